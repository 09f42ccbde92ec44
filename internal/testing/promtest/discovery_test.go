package promtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// trtllmServe serves an exposition shaped like trtllm-serve's: histograms
// and counters only, no gauge. Every scrape first records 10 finished
// requests, each with a time to first token of 50 ms and an end-to-end
// latency of 1.2 s, so that rates over any window are steady.
func trtllmServe(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	labels := []string{"model_name", "engine_type"}
	bounds := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	ttft := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "trtllm_time_to_first_token_seconds", Help: "TTFT.", Buckets: bounds}, labels)
	e2e := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "trtllm_e2e_request_latency_seconds", Help: "E2E.", Buckets: bounds}, labels)
	done := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trtllm_request_success_total", Help: "Finished."}, append(labels, "finished_reason"))
	reg.MustRegister(ttft, e2e, done)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 10 {
			ttft.WithLabelValues("m", "trtllm").Observe(0.05)
			e2e.WithLabelValues("m", "trtllm").Observe(1.2)
			done.WithLabelValues("m", "trtllm", "stop").Inc()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// writeSD writes a file_sd target file: one target per node label.
func writeSD(t *testing.T, path string, targets map[string]string) {
	t.Helper()
	groups := []map[string]any{}
	for node, addr := range targets {
		groups = append(groups, map[string]any{"targets": []string{addr}, "labels": map[string]string{"node": node}})
	}
	b, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	// Written whole and renamed, so Prometheus never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestDiscovery: a real Prometheus scrapes an engine that exports only
// histograms and counters (trtllm-serve), a target it cannot scrape in the
// same job, and one more node found through a file it then drops. The first
// is listed with its percentiles; the second reads TARGET_DOWN with
// Prometheus's scrape error; the third, once gone from Prometheus, is
// reported down for the lookback and then no longer listed.
func TestDiscovery(t *testing.T) {
	t.Parallel()
	live, gone, down := trtllmServe(t), trtllmServe(t), testkit.ClosedAddr(t)
	sd := filepath.Join(t.TempDir(), "targets.json")
	writeSD(t, sd, map[string]string{"trt-gone": gone})
	p := promtest.Start(t, promtest.Options{
		Targets:      []string{live, down},
		TargetLabels: map[string]map[string]string{live: {"node": "trt-0"}, down: {"node": "trt-down"}},
		ExtraScrapeConfigs: fmt.Sprintf(`
- job_name: llmdiag-sd
  file_sd_configs:
    - files: [%q]
`, sd),
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// Rates over 15s need two scrapes in the window; the refused target
	// has been tried.
	if err := p.WaitForSamples(ctx, `sum_over_time(up{node=~"trt-0|trt-gone"}[1h]) >= 3`, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForSamples(ctx, `up{node="trt-down"} == 0`, 1); err != nil {
		t.Fatal(err)
	}

	const lookback = 6 * time.Second
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src, err := prom.New(prom.Config{URL: p.URL(), NodeLabel: "node", Timeout: 5 * time.Second, Lookback: lookback}, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := telemetry.New(prometheus.NewRegistry(), time.Now)
	st := memory.New(memory.Options{}, "r")
	loop := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: metrics.Window(15 * time.Second), Thresholds: diagnose.DefaultThresholds(), Interval: time.Second})
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}

	rec, err := st.Get(ctx, "trt-0")
	if err != nil {
		t.Fatalf("the node exporting only histograms and counters is not listed: %v", err)
	}
	m := rec.Metrics
	if m.GetEngine() != llmdiagv1.Engine_ENGINE_TRTLLM || !m.GetUp() || m.GetModel() != "m" {
		t.Errorf("trt-0: engine %v up %v model %q, want TRTLLM, up, m", m.GetEngine(), m.GetUp(), m.GetModel())
	}
	for name, d := range map[string]*llmdiagv1.Distribution{"ttft": m.GetTtft(), "e2e": m.GetE2E()} {
		want := map[string][2]float64{"ttft": {0.04, 0.06}, "e2e": {1, 2.5}}[name]
		if len(d.GetPercentiles()) == 0 {
			t.Errorf("trt-0: no %s percentiles: %v; errors %q", name, d, m.GetErrors())
		}
		for _, pc := range d.GetPercentiles() {
			if pc.GetValue() <= want[0] || pc.GetValue() > want[1] {
				t.Errorf("trt-0: %s P%g = %v, want in (%v, %v], the bucket of every observation", name, 100*pc.GetQuantile(), pc.GetValue(), want[0], want[1])
			}
		}
	}
	if r := m.GetRequestsPerSecond(); r <= 0 {
		t.Errorf("trt-0: %v requests/s, want a positive rate", r)
	}

	rec, err = st.Get(ctx, "trt-down")
	if err != nil {
		t.Fatalf("the target Prometheus cannot scrape is not listed: %v", err)
	}
	if rec.Node.GetStatus() != llmdiagv1.Status_STATUS_DOWN || rec.Diagnosis.GetRootCause() != llmdiagv1.Cause_CAUSE_TARGET_DOWN || rec.Metrics.GetUp() {
		t.Errorf("trt-down: %v %v up %v, want DOWN, TARGET_DOWN", rec.Node.GetStatus(), rec.Diagnosis.GetRootCause(), rec.Metrics.GetUp())
	}
	if errs := strings.Join(rec.Metrics.GetErrors(), "\n"); !strings.Contains(errs, "up == 0") || !strings.Contains(errs, "connection refused") {
		t.Errorf("trt-down: errors %q, want Prometheus's scrape error (connection refused)", rec.Metrics.GetErrors())
	}
	if ev := strings.Join(rec.Diagnosis.GetEvidence(), "\n"); !strings.Contains(ev, "connection refused") {
		t.Errorf("trt-down: evidence %q lacks the scrape error", rec.Diagnosis.GetEvidence())
	}

	// The file drops trt-gone: Prometheus stops scraping it. It is listed
	// down while its last series are within the lookback, then not at all.
	obsOf := func() map[string]source.Observation {
		obs, err := src.Refresh(ctx, "15s")
		if err != nil {
			t.Fatalf("refresh: %v", err)
		}
		out := map[string]source.Observation{}
		for _, o := range obs {
			out[o.Node.ID] = o
		}
		return out
	}
	if o, ok := obsOf()["trt-gone"]; !ok || !o.Metrics.GetUp() {
		t.Fatalf("trt-gone before it is dropped: listed %v, want up", ok)
	}
	writeSD(t, sd, nil)
	var seenDown bool
	var downFor time.Duration
	var downAt time.Time
	testkit.Eventually(t, 45*time.Second, "trt-gone to age out", func() bool {
		obs := obsOf()
		if _, ok := obs["trt-0"]; !ok {
			t.Fatalf("trt-0 missing while trt-gone ages out: %v", slices.Sorted(maps.Keys(obs)))
		}
		o, ok := obs["trt-gone"]
		switch {
		case ok && !o.Metrics.GetUp():
			if !seenDown {
				seenDown, downAt = true, time.Now()
			}
		case !ok:
			if seenDown {
				downFor = time.Since(downAt)
			}
			return true
		}
		time.Sleep(200 * time.Millisecond)
		return false
	})
	if !seenDown {
		t.Error("trt-gone was never reported down before it aged out")
	}
	if downFor > lookback+5*time.Second {
		t.Errorf("trt-gone was listed down for %v, more than the lookback %v", downFor, lookback)
	}
	t.Logf("trt-gone listed down for about %v (lookback %v)", downFor.Round(100*time.Millisecond), lookback)
}
