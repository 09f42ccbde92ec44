package refresh_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/source/scrape"
	"github.com/llmdiag/llmdiag/store/memory"
)

// vllmTTFT serves a vLLM exposition whose every scrape first records 10
// requests: 9 with a first token in 0.5 s, 1 in 2 s. Against a 1 s target
// (a vLLM bucket bound) attainment is exactly 90% over any window.
func vllmTTFT(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	labels := []string{"model_name", "engine"}
	ttft := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds", Help: "TTFT.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}}, labels)
	running := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:num_requests_running", Help: "Running."}, labels)
	reg.MustRegister(ttft, running)
	running.WithLabelValues("m", "0").Set(4)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 10 {
			ttft.WithLabelValues("m", "0").Observe(map[bool]float64{true: 2, false: 0.5}[i == 0])
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// countingWindows counts the on-demand window reads a source serves.
type countingWindows struct {
	*scrape.Scraper
	n atomic.Int64
}

func (c *countingWindows) Window(ctx context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	c.n.Add(1)
	return c.Scraper.Window(ctx, node, window, offset)
}

// TestSLOWindowsThroughDirectScrape runs the real pipeline (a direct
// scrape of a vLLM exposition, the refresh loop, the memory store) with an
// SLO of 99% of first tokens within 1 s over 30 days. 90% make it: the
// budget burns at 10×, under the CRIT pair's 14.4× and over the WARN pair's
// 6×. The scraper keeps samples 6h back (refresh.SLORetention), so:
//
//   - at 3h, the 6h window is covered for 3h only: it is not judged, and the
//     finding is UNKNOWN, saying so, with a real 90% over 1h;
//   - from 6h on, it is covered: WARN.
//
// Then, with refreshes every 5s, the windows are read at their cadence
// (refresh.SLOCadence): 30m twice a minute, 1h and 6h once.
func TestSLOWindowsThroughDirectScrape(t *testing.T) {
	now := time.Unix(1e9, 0)
	clock := func() time.Time { return now }
	th := diagnose.DefaultThresholds()
	th.SLOs = diagnose.NewSLOSet(diagnose.SLO{Name: "ttft-1s", Metric: diagnose.SLOTTFT, Target: time.Second, Objective: 0.99, Period: 30 * 24 * time.Hour})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := &countingWindows{Scraper: scrape.New([]fleet.Node{{ID: "n", URL: vllmTTFT(t), Engine: "vllm"}}, nil, log, clock,
		scrape.Options{LongRetention: refresh.SLORetention(th)})}
	st := memory.New(memory.Options{}, "t")
	const interval = 5 * time.Second
	loop := refresh.New(src, st, &nopRecorder{}, log, clock, refresh.Config{Interval: interval, Window: metrics.DefaultWindow, Thresholds: th})
	ctx := context.Background()

	finding := func() *llmdiagv1.Finding {
		t.Helper()
		rec, err := st.Get(ctx, "n")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rec.Diagnosis.GetFindings() {
			if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_SLO_TTFT {
				return f
			}
		}
		t.Fatalf("no SLO finding in %v", rec.Diagnosis.GetFindings())
		return nil
	}
	// run refreshes every step for d, the first refresh step from now.
	run := func(d, step time.Duration) {
		t.Helper()
		for range d / step {
			now = now.Add(step)
			if err := loop.Once(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	const step = 2 * time.Minute
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	run(3*time.Hour, step)
	f := finding()
	if f.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN || f.GetValue() != "90% within 1 s (1h)" ||
		!slices.Contains(f.GetEvidence(), "6h: only the last 3h covered, not judged") {
		t.Errorf("at 3h: %s %q %s %q; want UNKNOWN, 90%% over 1h, 6h covered 3h", f.GetStatus(), f.GetValue(), f.GetConclusion(), f.GetEvidence())
	}

	run(3*time.Hour, step)
	f = finding()
	if f.GetStatus() != llmdiagv1.Status_STATUS_WARN || f.GetValue() != "90% within 1 s (1h)" {
		t.Errorf("at 6h: %s %q %s %q; want WARN, 90%% over 1h", f.GetStatus(), f.GetValue(), f.GetConclusion(), f.GetEvidence())
	}
	for _, w := range f.GetSlo().GetWindows() {
		if w.AttainmentLower == nil || w.GetAttainmentLower() != 0.9 || w.GetAttainmentUpper() != 0.9 {
			t.Errorf("window %s: attainment [%v, %v], want exactly 0.9", w.GetWindow(), w.AttainmentLower, w.AttainmentUpper)
		}
	}

	// The refresh at `now` read every window. 12 refreshes over the next
	// minute read 30m at +30s and +60s, 1h and 6h at +60s.
	src.n.Store(0)
	run(time.Minute, interval)
	if n := src.n.Load(); n != 4 {
		t.Errorf("%d window reads over a minute of refreshes every %v, want 4", n, interval)
	}
	if f := finding(); f.GetStatus() != llmdiagv1.Status_STATUS_WARN {
		t.Errorf("between reads: %s, want WARN from the windows kept", f.GetStatus())
	}
}

// TestLoopSLOWindows: Loop.SLOWindows gives the windows the diagnosis of
// the stored record read, matched by its observed_at (the record of the
// refresh before too, which the service may still read while the next is
// being stored), so that the record diagnosed again in Chinese shows the
// stored English verdict's SLO figures; nothing for older records, unknown
// nodes, or a loop without SLOs.
func TestLoopSLOWindows(t *testing.T) {
	now := time.Unix(1e9, 0)
	clock := func() time.Time { return now }
	th := diagnose.DefaultThresholds()
	th.SLOs = diagnose.NewSLOSet(diagnose.SLO{Name: "ttft-1s", Metric: diagnose.SLOTTFT, Target: time.Second, Objective: 0.99, Period: 30 * 24 * time.Hour})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	url := vllmTTFT(t)
	ctx := context.Background()
	loopOf := func(th diagnose.Thresholds) (*refresh.Loop, *memory.Store) {
		src := scrape.New([]fleet.Node{{ID: "n", URL: url, Engine: "vllm"}}, nil, log, clock, scrape.Options{LongRetention: refresh.SLORetention(th)})
		st := memory.New(memory.Options{}, "t")
		return refresh.New(src, st, &nopRecorder{}, log, clock, refresh.Config{Interval: 5 * time.Second, Window: metrics.DefaultWindow, Thresholds: th}), st
	}
	loop, st := loopOf(th)
	// Six hours of samples, so that every window is covered.
	for range 6*60/2 + 1 {
		now = now.Add(2 * time.Minute)
		if err := loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var observed []time.Time
	for range 3 {
		now = now.Add(5 * time.Second)
		if err := loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
		rec, err := st.Get(ctx, "n")
		if err != nil {
			t.Fatal(err)
		}
		observed = append(observed, rec.Metrics.GetObservedAt().AsTime())
	}
	rec, err := st.Get(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	w, ok := loop.SLOWindows("n", observed[2])
	var names []string
	for _, m := range w {
		names = append(names, m.GetWindow())
	}
	if !ok || !slices.Equal(names, []string{"30m", "1h", "6h"}) {
		t.Fatalf("SLOWindows of the stored record: %v %v, want 30m, 1h, 6h", names, ok)
	}
	sloOf := func(d *llmdiagv1.Diagnosis) *llmdiagv1.SLOBurn {
		for _, f := range d.GetFindings() {
			if f.GetSlo() != nil {
				return f.GetSlo()
			}
		}
		t.Fatalf("no SLO finding in %v", d.GetFindings())
		return nil
	}
	for _, pw := range sloOf(rec.Diagnosis).GetWindows() {
		if pw.AttainmentLower == nil {
			t.Errorf("stored verdict: window %s without attainment", pw.GetWindow())
		}
	}
	zh := diagnose.Diagnose(diagnose.Input{Metrics: rec.Metrics, Windows: w}, th, llmdiagv1.Language_LANGUAGE_ZH)
	if got, want := sloOf(zh), sloOf(rec.Diagnosis); !proto.Equal(got, want) {
		t.Errorf("the stored record diagnosed again in Chinese: SLO figures\n%v\nwant the stored verdict's\n%v", got, want)
	}
	for _, tc := range []struct {
		name string
		loop *refresh.Loop
		node string
		at   time.Time
		ok   bool
	}{
		{"the refresh before", loop, "n", observed[1], true},
		{"two refreshes before", loop, "n", observed[0], false},
		{"not observed", loop, "n", observed[2].Add(time.Second), false},
		{"unknown node", loop, "m", observed[2], false},
	} {
		if _, ok := tc.loop.SLOWindows(tc.node, tc.at); ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.name, ok, tc.ok)
		}
	}
	plain, _ := loopOf(diagnose.DefaultThresholds())
	if err := plain.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if w, ok := plain.SLOWindows("n", now); ok || w != nil {
		t.Errorf("without SLOs: %v %v, want nothing", w, ok)
	}
}
