package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/server"
)

// haproxyAgentConfig is serve's --haproxy-agent-listen: HAProxy's agent
// check (server.HAProxyAgent) on an address of its own, in plaintext and
// without authentication, since HAProxy's agent can send no credential.
type haproxyAgentConfig struct {
	addr       string
	stopAnswer time.Duration
}

// register defines --haproxy-agent-listen on fs, filling f.
func (f *haproxyAgentConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "haproxy-agent-listen", "", "also answer HAProxy's agent check on this TCP address (agent-check with agent-send \"<node id>\\n\"): \"ready up NN%\" by load score, \"drain\" when saturated, \"down\" when STALLED or DOWN, \"up 100%\" when the data cannot say (docs/integrations.md, HAProxy). No authentication (HAProxy's agent sends none): bind it to loopback or a private interface; at most 256 connections")
	fs.DurationVar(&f.stopAnswer, "haproxy-agent-stop-answer", 2*time.Second, "on stopping, go on answering HAProxy's agent check this long, every server \"ready up 100%\" (fail open), before closing its port: HAProxy keeps the state the agent last gave a server when the agent stops answering. At least twice the agent-inter of haproxy.cfg; 0: close at once")
}

// start answers the agent check on the flag's address until ctx is done
// and --haproxy-agent-stop-answer after it; wait returns once it has
// stopped. Without the flag it does nothing.
func (f haproxyAgentConfig) start(ctx context.Context, log *slog.Logger, svc *server.Service, reg prometheus.Registerer) (wait func(), err error) {
	if f.addr == "" {
		return func() {}, nil
	}
	agent, err := svc.HAProxyAgent(server.HAProxyAgentOptions{Registerer: reg, StopAnswer: f.stopAnswer})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, fmt.Errorf("--haproxy-agent-listen: %w", err)
	}
	log.Info("answering HAProxy's agent check", "addr", ln.Addr().String())
	if f.stopAnswer > 0 {
		context.AfterFunc(ctx, func() {
			log.Info("stopping: answering HAProxy's agent check ready up 100% (fail open) before closing", "for", f.stopAnswer)
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := agent.Serve(ctx, ln); err != nil {
			log.Error("--haproxy-agent-listen stopped", "err", err)
		}
	}()
	return func() { <-done }, nil
}
