package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/server"
)

// healthListenMaxConns bounds the connections --health-listen keeps open
// at once: it is meant for the kubelet's probes and a load balancer's
// checks, a handful of callers.
const healthListenMaxConns = 64

// healthListenConfig is serve's --health-listen: grpc.health.v1 alone, in
// plaintext (gRPC over h2c, Connect, gRPC-Web), on an address of its own.
// The kubelet's grpc probe speaks neither TLS nor authentication, so with
// --tls-cert on --listen it needs this port; health carries no fleet data
// and is open on --listen too.
type healthListenConfig struct{ addr string }

// register defines --health-listen on fs, filling f.
func (f *healthListenConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "health-listen", "", "also serve grpc.health.v1 alone on this address, in plaintext and without authentication (for the kubelet's grpc probe, which speaks no TLS; deploy/ uses it); at most 64 connections")
}

// start serves health on the flag's address until ctx is done; without
// the flag it does nothing.
func (f healthListenConfig) start(ctx context.Context, log *slog.Logger, health grpchealth.Checker, grace time.Duration, refusals *refusal.Log) error {
	if f.addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("--health-listen: %w", err)
	}
	ln = server.LimitConnections(ln, server.ConnLimits{Max: healthListenMaxConns, Flag: "--health-listen's cap", Refusals: refusals})
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(health, connect.WithReadMaxBytes(server.MaxRequestBytes)))
	log.Info("serving grpc.health.v1", "addr", "http://"+ln.Addr().String())
	go func() {
		if err := server.Serve(ctx, ln, mux, log, grace, server.ServeOptions{Refusals: refusals}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("--health-listen stopped", "err", err)
		}
	}()
	return nil
}
