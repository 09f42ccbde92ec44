package promtest_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// TestPrometheusOutageAndRecovery runs the real pipeline on a real
// Prometheus, stops Prometheus, and restarts it: while it is down refreshes
// fail, answers keep the last good data marked stale with its age and, past
// the staleness limit, UNKNOWN verdicts — never an error, never HEALTHY; once
// it is back, fresh verdicts return by themselves.
func TestPrometheusOutageAndRecovery(t *testing.T) {
	t.Parallel()
	sf := startSeedFleet(t, 3)
	const staleAfter = 3 * time.Second
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src, err := prom.New(prom.Config{URL: sf.prom.URL(), NodeLabel: "node", Timeout: 2 * time.Second, StaleAfter: staleAfter}, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := telemetry.New(prometheus.NewRegistry(), time.Now)
	th := diagnose.DefaultThresholds()
	th.StaleAfter = staleAfter
	st := memory.New(memory.Options{}, "r")
	loop := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: metrics.Window(15 * time.Second), Thresholds: th, Interval: 500 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	svc := server.NewService(st, src, log, time.Now, server.Config{DefaultWindow: metrics.Window(15 * time.Second), StaleAfter: staleAfter, Thresholds: th}, ctx.Done())

	node := "glm-4.6-0"
	diag := func() *llmdiagv1.Diagnosis {
		t.Helper()
		resp, err := svc.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node}))
		if err != nil {
			t.Fatalf("DiagnoseNode while Prometheus is %s: %v", map[bool]string{true: "up", false: "down"}[sf.prom.Running()], err)
		}
		return resp.Msg.GetDiagnosis()
	}
	waitUntil := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			if err := loop.Once(ctx); err != nil && sf.prom.Running() {
				t.Logf("refresh: %v", err)
			}
			if ok() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %s waiting for %s", d, what)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	waitUntil("a fresh verdict", 30*time.Second, func() bool {
		d := diag()
		return d.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN && !d.GetStale()
	})
	before := diag()

	sf.prom.Stop()
	if err := loop.Once(ctx); err == nil {
		t.Fatal("a refresh with Prometheus down reported no error")
	}
	// The last good data stays, with its age.
	m, err := svc.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: node}))
	if err != nil {
		t.Fatalf("GetNodeMetrics with Prometheus down: %v", err)
	}
	if m.Msg.GetMetrics().GetE2E() == nil || m.Msg.GetMetrics().GetStaleness() == nil {
		t.Fatalf("last good metrics lost: %v", m.Msg.GetMetrics())
	}
	waitUntil("the verdict to turn UNKNOWN", 20*time.Second, func() bool {
		d := diag()
		if d.GetStatus() == llmdiagv1.Status_STATUS_OK || d.GetRootCause() == llmdiagv1.Cause_CAUSE_HEALTHY {
			if d.GetStale() {
				t.Fatalf("stale data reported healthy: %v", d)
			}
		}
		return d.GetStatus() == llmdiagv1.Status_STATUS_UNKNOWN && d.GetStale() && !d.GetRoutable()
	})
	// An on-demand window needs Prometheus: Unavailable, not a hang.
	start := time.Now()
	_, err = svc.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: node, Window: "1m"}))
	if connect.CodeOf(err) != connect.CodeUnavailable || time.Since(start) > 10*time.Second {
		t.Fatalf("on-demand window with Prometheus down: %v after %v, want unavailable promptly", err, time.Since(start))
	}

	sf.prom.Restart(t)
	waitUntil("fresh verdicts after Prometheus returns", 60*time.Second, func() bool {
		d := diag()
		return d.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN && !d.GetStale() && d.GetObservedAt().AsTime().After(before.GetObservedAt().AsTime())
	})
}
