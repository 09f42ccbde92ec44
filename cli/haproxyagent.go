package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/server"
)

// haproxyAgentConfig is serve's --haproxy-agent-listen: HAProxy's agent
// check (server.HAProxyAgent) on an address of its own, in plaintext and
// without authentication, since HAProxy's agent can send no credential.
type haproxyAgentConfig struct{ addr string }

// register defines --haproxy-agent-listen on fs, filling f.
func (f *haproxyAgentConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "haproxy-agent-listen", "", "also answer HAProxy's agent check on this TCP address (agent-check with agent-send \"<node id>\\n\"): \"ready up NN%\" by load score, \"drain\" when saturated, \"down\" when STALLED or DOWN, \"up 100%\" when the data cannot say (docs/integrations.md, HAProxy). No authentication (HAProxy's agent sends none): bind it to loopback or a private interface; at most 256 connections")
}

// start answers the agent check on the flag's address until ctx is done;
// without the flag it does nothing.
func (f haproxyAgentConfig) start(ctx context.Context, log *slog.Logger, svc *server.Service, reg prometheus.Registerer) error {
	if f.addr == "" {
		return nil
	}
	agent, err := svc.HAProxyAgent(server.HAProxyAgentOptions{Registerer: reg})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("--haproxy-agent-listen: %w", err)
	}
	log.Info("answering HAProxy's agent check", "addr", ln.Addr().String())
	go func() {
		if err := agent.Serve(ctx, ln); err != nil {
			log.Error("--haproxy-agent-listen stopped", "err", err)
		}
	}()
	return nil
}
