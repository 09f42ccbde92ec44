package cli

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"github.com/llmdiag/llmdiag/tracing"
)

// traceShutdownGrace bounds the flush of the spans not yet exported when
// serve stops.
const traceShutdownGrace = 5 * time.Second

// traceConfig is serve's tracing flag; the rest of tracing's configuration
// is the standard OTEL_* environment (package tracing; docs/operations.md, Tracing).
type traceConfig struct {
	trustRemote bool
}

// register defines the tracing flag on fs, filling t.
func (t *traceConfig) register(fs *flag.FlagSet) {
	fs.BoolVar(&t.trustRemote, "trace-trust-remote", false, "with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT set): make each RPC's span a child of the caller's traceparent, so a gateway's trace continues into llmdiag; off, the default, an RPC starts its own trace linked to the caller's, and callers cannot choose what is sampled")
}

// setup reads the OTEL_* environment through getenv and builds tracing
// (off without an endpoint); a bad value is a usage error naming the
// variable. The caller defers shutdown, which flushes within
// traceShutdownGrace.
func (t traceConfig) setup(ctx context.Context, getenv func(string) string, log *slog.Logger) (tr *tracing.Tracing, shutdown func(), err error) {
	cfg, err := tracing.FromEnv(getenv)
	if err != nil {
		return nil, nil, usageError{err}
	}
	tr, err = tracing.New(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	tr.TrustRemote = t.trustRemote
	return tr, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceShutdownGrace)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans not flushed on exit", "err", err, "within", traceShutdownGrace)
		}
	}, nil
}
