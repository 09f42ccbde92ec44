package promtest_test

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/internal/promtest"
	"github.com/llmdiag/llmdiag/sim"
)

// Exactness (issue 3 item 6): llmdiag's percentiles must be Prometheus's
// histogram_quantile, bit for bit up to float noise, on real engine
// histograms scraped by a real Prometheus.

// relTolerance is the largest relative difference accepted between
// llmdiag's and Prometheus's quantile.
const relTolerance = 1e-9

// histogramFamilies are the latency histograms the simulated engines expose.
var histogramFamilies = []struct {
	engine sim.Engine
	name   string
}{
	{sim.VLLM, "vllm:time_to_first_token_seconds"},
	{sim.VLLM, "vllm:e2e_request_latency_seconds"},
	{sim.VLLM, "vllm:inter_token_latency_seconds"},
	{sim.VLLM, "vllm:request_time_per_output_token_seconds"},
	{sim.VLLM, "vllm:request_queue_time_seconds"},
	{sim.SGLang, "sglang:time_to_first_token_seconds"},
	{sim.SGLang, "sglang:e2e_request_latency_seconds"},
	{sim.SGLang, "sglang:inter_token_latency_seconds"},
	{sim.SGLang, "sglang:queue_time_seconds"},
}

var exactQuantiles = []float64{0.5, 0.9, 0.95, 0.99, 0.999}

// exactWindows turn a family into the per-instance bucket vector both sides
// compute the quantile of.
var exactWindows = []struct {
	name string
	// vector is the PromQL for the input vector of family f.
	vector func(f string) string
	// synthetic marks an input built to hit one branch of the algorithm.
	synthetic bool
}{
	{name: "rate5s", vector: func(f string) string { return fmt.Sprintf("sum by (instance, le) (rate(%s_bucket[5s]))", f) }},
	{name: "rate15s", vector: func(f string) string { return fmt.Sprintf("sum by (instance, le) (rate(%s_bucket[15s]))", f) }},
	// lifetime: the raw cumulative counters.
	{name: "cumulative", vector: func(f string) string { return fmt.Sprintf("sum by (instance, le) (%s_bucket)", f) }},
	// Every observation in the +Inf bucket: the quantile is the largest
	// finite bound.
	{name: "inf-only", synthetic: true, vector: func(f string) string {
		return fmt.Sprintf(`sum by (instance, le) (%[1]s_bucket{le!="+Inf"}) * 0 or sum by (instance, le) (%[1]s_bucket{le="+Inf"})`, f)
	}},
}

// seedFleet is the simulated seed fleet scraped by a real Prometheus.
type seedFleet struct {
	fleet *sim.Fleet
	prom  *promtest.Prometheus
	// instances maps node id to instance label (host:port) and back.
	instance map[string]string
	node     map[string]string
	engine   map[string]sim.Engine // by instance
}

// startSeedFleet serves the seed scenario in real time (after 5 simulated
// minutes of warm-up) and has Prometheus scrape every node each second
// until each has at least scrapes successful scrapes.
func startSeedFleet(t *testing.T, scrapes int) *seedFleet {
	t.Helper()
	cfg, err := sim.Scenario("seed", 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Warmup = 5 * time.Minute
	cfg.Speed = 1
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sim: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("sim fleet did not stop within 10s")
		}
	})

	sf := &seedFleet{fleet: f, instance: map[string]string{}, node: map[string]string{}, engine: map[string]sim.Engine{}}
	var targets []string
	labels := map[string]map[string]string{}
	for _, n := range f.FleetFile().Nodes {
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatalf("node %s url %q: %v", n.ID, n.URL, err)
		}
		targets = append(targets, u.Host)
		labels[u.Host] = map[string]string{"node": n.ID}
		sf.instance[n.ID], sf.node[u.Host], sf.engine[u.Host] = u.Host, n.ID, sim.Engine(n.Engine)
	}
	sf.prom = promtest.Start(t, promtest.Options{Targets: targets, TargetLabels: labels, ScrapeInterval: time.Second})
	wctx, wcancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer wcancel()
	if err := sf.prom.WaitForScrapes(wctx, scrapes); err != nil {
		t.Fatal(err)
	}
	return sf
}

// instancesOf counts the nodes running engine e.
func (sf *seedFleet) instancesOf(e sim.Engine) int {
	n := 0
	for _, got := range sf.engine {
		if got == e {
			n++
		}
	}
	return n
}

// evalTime picks the one timestamp every comparison is evaluated at. It is
// 2 s in the past, so every scrape stamped at or before it has been
// committed and queries at it see fixed data. And at it, every node's last
// scrape succeeded (a failed one, as under heavy CPU load, marks the node's
// series stale, and instant selectors find nothing) and every rate window
// has samples enough. It retries for up to 30 s.
func (sf *seedFleet) evalTime(t *testing.T) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	q := fmt.Sprintf(`up{job=%[1]q} == 1 and sum_over_time(up{job=%[1]q}[5s]) >= 3 and sum_over_time(up{job=%[1]q}[15s]) >= 10`, sf.prom.Job())
	for {
		at := time.Now().Add(-2 * time.Second).Truncate(time.Millisecond)
		vec, err := sf.prom.QueryVector(ctx, q, at)
		if err == nil && len(vec) == len(sf.instance) {
			return at
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no evaluation time at which every node was up with enough samples: last %v, %v", vec, err)
		case <-time.After(time.Second):
		}
	}
}

// bucketsBy groups a `sum by (label, le)` vector into buckets per value of
// label.
func bucketsBy(t *testing.T, vec model.Vector, label model.LabelName) map[string][]histogram.Bucket {
	t.Helper()
	out := map[string][]histogram.Bucket{}
	for _, s := range vec {
		key := string(s.Metric[label])
		le, err := strconv.ParseFloat(string(s.Metric[model.BucketLabel]), 64)
		if key == "" || err != nil {
			t.Fatalf("sample %v: want %s and a numeric le", s, label)
		}
		out[key] = append(out[key], histogram.Bucket{UpperBound: le, Count: float64(s.Value)})
	}
	return out
}

// valuesBy maps a vector by label, which must tell its samples apart.
func valuesBy(t *testing.T, vec model.Vector, label model.LabelName) map[string]float64 {
	t.Helper()
	out := make(map[string]float64, len(vec))
	for _, s := range vec {
		key := string(s.Metric[label])
		if _, dup := out[key]; dup || key == "" {
			t.Fatalf("vector %v: want one sample per %s", vec, label)
		}
		out[key] = float64(s.Value)
	}
	return out
}

// relErr is the relative difference of a and b, 0 when they are equal
// (both NaN included) and +Inf when only one is NaN or infinite.
func relErr(a, b float64) float64 {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		if math.IsNaN(a) && math.IsNaN(b) {
			return 0
		}
		return math.Inf(1)
	case a == b:
		return 0
	case math.IsInf(a, 0) || math.IsInf(b, 0):
		return math.Inf(1)
	}
	return math.Abs(a-b) / math.Max(math.Abs(a), math.Abs(b))
}

// exactStats summarises the comparisons of one engine.
type exactStats struct {
	comparisons, exact, nan, infBucket, infSynthetic, lowest int
	maxRel                                                   float64
	maxRelAt                                                 string
}

func (s *exactStats) add(what string, ours histogram.Estimate, theirs float64, synthetic bool) {
	s.comparisons++
	rel := relErr(ours.Value, theirs)
	switch {
	case math.IsNaN(theirs) && math.IsNaN(ours.Value):
		s.nan++
	case ours.Value == theirs:
		s.exact++
	}
	if math.IsInf(ours.Upper, 1) {
		if synthetic {
			s.infSynthetic++
		} else {
			s.infBucket++
		}
	}
	if ours.Lower == 0 || math.IsInf(ours.Lower, -1) {
		s.lowest++
	}
	if rel > s.maxRel {
		s.maxRel, s.maxRelAt = rel, what
	}
}

func (s *exactStats) String() string {
	at := ""
	if s.maxRel > 0 {
		at = " at " + s.maxRelAt
	}
	return fmt.Sprintf("%d comparisons: %d bit-identical, %d NaN on both sides, max relative error %.3g%s; "+
		"+Inf-bucket cases %d natural + %d synthetic, lowest-bucket cases %d",
		s.comparisons, s.exact, s.nan, s.maxRel, at, s.infBucket, s.infSynthetic, s.lowest)
}

func TestExactness(t *testing.T) {
	t.Parallel()
	// 16 scrapes at 1 s: a full 15 s window before evalTime.
	sf := startSeedFleet(t, 16)
	at := sf.evalTime(t)
	t.Logf("evaluation time %s", at.Format(time.RFC3339Nano))

	t.Run("histogram", func(t *testing.T) { testHistogramExactness(t, sf, at) })
	t.Run("promsource", func(t *testing.T) { testPromsourceExactness(t, sf, at) })
}

// testHistogramExactness compares histogram.Quantile over Prometheus's own
// input vector with Prometheus's histogram_quantile of it, at one time.
func testHistogramExactness(t *testing.T, sf *seedFleet, at time.Time) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stats := map[sim.Engine]*exactStats{sim.VLLM: {}, sim.SGLang: {}}
	for _, fam := range histogramFamilies {
		for _, w := range exactWindows {
			vector := w.vector(fam.name)
			vec, err := sf.prom.QueryVector(ctx, vector, at)
			if err != nil {
				t.Fatal(err)
			}
			buckets := bucketsBy(t, vec, "instance")
			if want := sf.instancesOf(fam.engine); len(buckets) != want {
				t.Fatalf("%s: %d instances, want %d (%v)", vector, len(buckets), want, vec)
			}
			for _, q := range exactQuantiles {
				name := fmt.Sprintf("%s/%s/q=%g", fam.name, w.name, q)
				t.Run(name, func(t *testing.T) {
					expr := fmt.Sprintf("histogram_quantile(%s, %s)", strconv.FormatFloat(q, 'g', -1, 64), vector)
					res, err := sf.prom.QueryVector(ctx, expr, at)
					if err != nil {
						t.Fatal(err)
					}
					theirs := valuesBy(t, res, "instance")
					if len(theirs) != len(buckets) {
						t.Fatalf("histogram_quantile gave %d instances, input vector %d", len(theirs), len(buckets))
					}
					for inst, bs := range buckets {
						want, ok := theirs[inst]
						if !ok {
							t.Fatalf("no histogram_quantile for instance %s", inst)
						}
						got := histogram.Quantile(q, bs)
						node := sf.node[inst]
						stats[fam.engine].add(name+" "+node, got, want, w.synthetic)
						if rel := relErr(got.Value, want); rel > relTolerance {
							t.Errorf("%s: llmdiag %v (bucket %v..%v), prometheus %v: relative error %.3g > %g; buckets %v",
								node, got.Value, got.Lower, got.Upper, want, rel, relTolerance, bs)
						}
						if w.synthetic && !math.IsNaN(want) && !math.IsInf(got.Upper, 1) {
							t.Errorf("%s: synthetic +Inf-only histogram gave bucket %v..%v, want the +Inf bucket", node, got.Lower, got.Upper)
						}
					}
				})
			}
		}
	}
	for _, e := range []sim.Engine{sim.VLLM, sim.SGLang} {
		s := stats[e]
		t.Logf("exactness %s (%d nodes): %v", e, sf.instancesOf(e), s)
		if s.comparisons == 0 {
			t.Errorf("%s: no comparisons", e)
		}
		if s.infSynthetic == 0 {
			t.Errorf("%s: the +Inf-bucket case was never exercised", e)
		}
	}
}
