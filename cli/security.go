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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/server"
)

// securityConfig is serve's configuration of who may call what on the
// port.
type securityConfig struct {
	tokens, metricsListen string
	reflection, insecure  bool
}

// register defines the security flags on fs, filling s.
func (s *securityConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&s.tokens, "auth-tokens", "", "tokens file (YAML, see docs/configuration.md, The tokens file): bearer tokens and client certificate subjects, each with a name and a role (reader, router, admin, alertmanager); re-read when it changes. With it (or --tls-client-ca) every request but grpc.health.v1 needs credentials")
	fs.StringVar(&s.metricsListen, "metrics-listen", "", "serve /metrics on this address (plaintext, no authentication) instead of on --listen, where with authentication on it needs the admin role")
	fs.BoolVar(&s.reflection, "reflection", false, "serve gRPC server reflection (grpcurl list, describe); with authentication on it needs the admin role")
	fs.BoolVar(&s.insecure, "insecure", false, "allow --listen on a non-loopback address without TLS and authentication (logged as a warning)")
}

// setup returns the optional surfaces of the port and authorize, which
// puts a handler behind authentication and authorization when
// --auth-tokens or --tls-client-ca is given, and returns it unchanged
// otherwise (open, as on loopback by default). It refuses a non-loopback
// listen address without TLS and authentication unless --insecure, and
// starts --metrics-listen and the tokens file's reloads (auth.File.Run),
// which stop with ctx. authorize is meant to be the
// outermost handler, so that those after it (limits) see the principal.
func (s securityConfig) setup(ctx context.Context, log *slog.Logger, listen string, tls serveTLSConfig, reg prometheus.Gatherer, grace time.Duration, refusals *refusal.Log) (surfaces server.Surfaces, authorize func(http.Handler) http.Handler, err error) {
	clientCA := tls.clientCA != ""
	authn := s.tokens != "" || clientCA
	warn, err := server.CheckExposure(listen, tls.cert != "", authn, s.insecure)
	if err != nil {
		return surfaces, nil, usageError{err}
	}
	a := &auth.Authenticator{}
	if s.tokens != "" {
		if a.Tokens, err = auth.OpenFile(s.tokens, auth.FileOptions{Log: log}); err != nil {
			return surfaces, nil, usageError{fmt.Errorf("--auth-tokens: %w", err)}
		}
		// Reloaded without waiting for a request, so that a revoked
		// token's open streams end within a second.
		go a.Tokens.Run(ctx)
	} else {
		// --tls-client-ca alone: the CA is the whole policy.
		a.UnmappedClientRole = auth.RoleAdmin
	}
	if warn != "" {
		log.Warn(warn)
	}
	surfaces = server.Surfaces{Reflection: s.reflection, Metrics: reg, Refusals: refusals}
	if s.metricsListen != "" {
		surfaces.Metrics = nil
		ln, err := net.Listen("tcp", s.metricsListen)
		if err != nil {
			return surfaces, nil, fmt.Errorf("--metrics-listen: %w", err)
		}
		log.Info("serving /metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})) // exemplars: server/server.go
		go func() {
			if err := server.Serve(ctx, ln, mux, log, grace); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("--metrics-listen stopped", "err", err)
			}
		}()
	}
	if !authn {
		return surfaces, func(h http.Handler) http.Handler { return h }, nil
	}
	log.Info("authentication on", "tokens_file", s.tokens, "client_certificates", clientCA, "reflection", s.reflection)
	return surfaces, func(h http.Handler) http.Handler { return server.Authorize(h, a, refusals) }, nil
}
