package promtest_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// TestSLOWindowsFromPrometheus: with an SLO configured, a refresh through
// a real Prometheus reads the SLO windows (5m, 30m, 1h, 6h) on demand and
// the SLO finding reads a real attainment, not UNKNOWN. Every first token
// of trtllmServe takes 50 ms; the SLO wants 99% within 40 ms (a bucket
// bound), so attainment is exactly 0% in every window and the budget
// burns at 100×: CRIT. A second refresh right after reads no window again
// (refresh.SLOCadence): it sends only the refresh's own queries.
func TestSLOWindowsFromPrometheus(t *testing.T) {
	t.Parallel()
	addr := trtllmServe(t)
	p := promtest.Start(t, promtest.Options{Targets: []string{addr}, TargetLabels: map[string]map[string]string{addr: {"node": "trt-0"}}})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := p.WaitForSamples(ctx, `sum_over_time(up{node="trt-0"}[1h]) >= 3`, 1); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src, err := prom.New(prom.Config{URL: p.URL(), NodeLabel: "node", Timeout: 5 * time.Second}, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.SLOs = diagnose.NewSLOSet(diagnose.SLO{Name: "ttft-40ms", Metric: diagnose.SLOTTFT, Target: 40 * time.Millisecond, Objective: 0.99, Period: 30 * 24 * time.Hour})
	tm, _ := telemetry.New(prometheus.NewRegistry(), time.Now)
	st := memory.New(memory.Options{}, "r")
	loop := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: metrics.Window(15 * time.Second), Thresholds: th, Interval: time.Minute})
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Get(ctx, "trt-0")
	if err != nil {
		t.Fatal(err)
	}
	var f *llmdiagv1.Finding
	for _, x := range rec.Diagnosis.GetFindings() {
		if x.GetIndicator() == llmdiagv1.Indicator_INDICATOR_SLO_TTFT {
			f = x
		}
	}
	if f == nil {
		t.Fatalf("no SLO finding in %v", rec.Diagnosis.GetFindings())
	}
	if f.GetStatus() != llmdiagv1.Status_STATUS_CRIT || f.GetValue() != "0% within 40 ms (1h)" {
		t.Errorf("SLO finding %s %q: %s %q; want CRIT, 0%% within 40 ms", f.GetStatus(), f.GetValue(), f.GetConclusion(), f.GetEvidence())
	}
	if n := len(f.GetSlo().GetWindows()); n != len(diagnose.SLOWindows()) {
		t.Fatalf("%d SLO windows, want %d", n, len(diagnose.SLOWindows()))
	}
	for _, w := range f.GetSlo().GetWindows() {
		if w.AttainmentLower == nil || w.GetAttainmentLower() != 0 || w.GetAttainmentUpper() != 0 || w.GetRequests() <= 0 {
			t.Errorf("window %s: attainment [%v, %v] of %v requests, want exactly 0 of some", w.GetWindow(), w.AttainmentLower, w.AttainmentUpper, w.GetRequests())
		}
	}

	before := src.QueriesTotal()
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if sent, own := src.QueriesTotal()-before, int64(src.QueriesLastRefresh()); sent != own {
		t.Errorf("second refresh sent %d queries, its own %d: the SLO windows were read again before their cadence", sent, own)
	}
	rec, _ = st.Get(ctx, "trt-0")
	for _, x := range rec.Diagnosis.GetFindings() {
		if x.GetIndicator() == llmdiagv1.Indicator_INDICATOR_SLO_TTFT && x.GetStatus() != llmdiagv1.Status_STATUS_CRIT {
			t.Errorf("second refresh: SLO finding %s, want CRIT from the windows kept", x.GetStatus())
		}
	}
}
