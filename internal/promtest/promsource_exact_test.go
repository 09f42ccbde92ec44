package promtest_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/promsource"
	"github.com/llmdiag/llmdiag/sim"
)

// distributionFields are the NodeMetrics distributions promsource fills
// from each simulated histogram family.
var distributionFields = []struct {
	engine sim.Engine
	family string
	field  string
	get    func(*llmdiagv1.NodeMetrics) *llmdiagv1.Distribution
}{
	{sim.VLLM, "vllm:time_to_first_token_seconds", "ttft", (*llmdiagv1.NodeMetrics).GetTtft},
	{sim.VLLM, "vllm:e2e_request_latency_seconds", "e2e", (*llmdiagv1.NodeMetrics).GetE2E},
	{sim.VLLM, "vllm:inter_token_latency_seconds", "inter_token", (*llmdiagv1.NodeMetrics).GetInterToken},
	{sim.VLLM, "vllm:request_time_per_output_token_seconds", "time_per_output_token", (*llmdiagv1.NodeMetrics).GetTimePerOutputToken},
	{sim.VLLM, "vllm:request_queue_time_seconds", "queue_time", (*llmdiagv1.NodeMetrics).GetQueueTime},
	{sim.SGLang, "sglang:time_to_first_token_seconds", "ttft", (*llmdiagv1.NodeMetrics).GetTtft},
	{sim.SGLang, "sglang:e2e_request_latency_seconds", "e2e", (*llmdiagv1.NodeMetrics).GetE2E},
	{sim.SGLang, "sglang:inter_token_latency_seconds", "inter_token", (*llmdiagv1.NodeMetrics).GetInterToken},
	{sim.SGLang, "sglang:queue_time_seconds", "queue_time", (*llmdiagv1.NodeMetrics).GetQueueTime},
}

// sameBound compares bucket bounds, NaN equal to NaN.
func sameBound(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// testPromsourceExactness checks that the percentiles promsource reports,
// through Refresh (every node at once) and Window (one node), are
// Prometheus's histogram_quantile at the same evaluation time, and that
// their bucket bounds are those of that quantile.
func testPromsourceExactness(t *testing.T, sf *seedFleet, at time.Time) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err := promsource.New(promsource.Config{
		URL:       sf.prom.URL(),
		NodeLabel: "node", // the target label startSeedFleet sets
		Quantiles: exactQuantiles,
		Timeout:   10 * time.Second,
	}, log, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}

	windows := []struct {
		name   string
		vector func(f string) string
	}{
		{"15s", func(f string) string { return fmt.Sprintf("sum by (node, le) (rate(%s_bucket[15s]))", f) }},
		{"lifetime", func(f string) string { return fmt.Sprintf("sum by (node, le) (%s_bucket)", f) }},
	}
	type path struct {
		engine sim.Engine
		via    string
	}
	stats := map[path]*exactStats{}
	for _, w := range windows {
		// What promsource says, both ways.
		obs, err := src.Refresh(ctx, w.name)
		if err != nil {
			t.Fatalf("Refresh(%s): %v", w.name, err)
		}
		got := map[string]map[string]*llmdiagv1.NodeMetrics{"refresh": {}, "window": {}}
		for _, o := range obs {
			got["refresh"][o.Node.ID] = o.Metrics
		}
		for id := range sf.instance {
			if got["refresh"][id] == nil {
				t.Fatalf("Refresh(%s) has no node %s (got %d observations)", w.name, id, len(obs))
			}
			nm, err := src.Window(ctx, id, w.name, 0)
			if err != nil {
				t.Fatalf("Window(%s, %s): %v", id, w.name, err)
			}
			got["window"][id] = nm
			if len(nm.GetErrors()) > 0 {
				t.Logf("Window(%s, %s) errors: %q", id, w.name, nm.GetErrors())
			}
		}

		for _, f := range distributionFields {
			vector := w.vector(f.family)
			vec, err := sf.prom.QueryVector(ctx, vector, at)
			if err != nil {
				t.Fatal(err)
			}
			input := bucketsBy(t, vec, "node")
			if want := sf.instancesOf(f.engine); len(input) != want {
				t.Fatalf("%s: %d nodes, want %d", vector, len(input), want)
			}
			for _, q := range exactQuantiles {
				name := fmt.Sprintf("%s/%s/q=%g", f.family, w.name, q)
				t.Run(name, func(t *testing.T) {
					expr := fmt.Sprintf("histogram_quantile(%s, %s)", strconv.FormatFloat(q, 'g', -1, 64), vector)
					res, err := sf.prom.QueryVector(ctx, expr, at)
					if err != nil {
						t.Fatal(err)
					}
					theirs := valuesBy(t, res, "node")
					for node, bs := range input {
						want, ok := theirs[node]
						if !ok {
							t.Fatalf("no histogram_quantile for node %s", node)
						}
						bounds := histogram.Quantile(q, bs)
						for _, via := range []string{"refresh", "window"} {
							d := f.get(got[via][node])
							if d == nil {
								t.Errorf("%s %s: no %s distribution", via, node, f.field)
								continue
							}
							var p *llmdiagv1.Percentile
							for _, pp := range d.GetPercentiles() {
								if pp.GetQuantile() == q {
									p = pp
								}
							}
							if p == nil {
								t.Errorf("%s %s %s: no percentile %g in %v", via, node, f.field, q, d.GetPercentiles())
								continue
							}
							ours := histogram.Estimate{Value: p.GetValue(), Lower: p.GetLowerBound(), Upper: p.GetUpperBound()}
							key := path{f.engine, via}
							if stats[key] == nil {
								stats[key] = &exactStats{}
							}
							stats[key].add(name+" "+node, ours, want, false)
							if rel := relErr(ours.Value, want); rel > relTolerance {
								t.Errorf("%s %s %s: promsource %v, prometheus %v: relative error %.3g > %g",
									via, node, f.field, ours.Value, want, rel, relTolerance)
							}
							if !sameBound(ours.Lower, bounds.Lower) || !sameBound(ours.Upper, bounds.Upper) {
								t.Errorf("%s %s %s: bucket %v..%v, want %v..%v", via, node, f.field,
									ours.Lower, ours.Upper, bounds.Lower, bounds.Upper)
							}
						}
					}
				})
			}
		}
	}
	for _, e := range []sim.Engine{sim.VLLM, sim.SGLang} {
		for _, via := range []string{"refresh", "window"} {
			s := stats[path{e, via}]
			if s == nil || s.comparisons == 0 {
				t.Errorf("promsource %s via %s: no comparisons", e, via)
				continue
			}
			t.Logf("promsource exactness %s via %s: %v", e, via, s)
		}
	}
	t.Logf("promsource sent %d queries (last Refresh: %d)", src.QueriesTotal(), src.QueriesLastRefresh())
}
