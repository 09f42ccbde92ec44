package promtest_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/sim"
	"github.com/llmdiag/llmdiag/source/prom"
)

// sameBound compares bucket bounds, NaN equal to NaN.
func sameBound(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// promWindows are the windows prom is read over, each with the
// PromQL of the bucket vector per node it must agree with, and the rate (or
// cumulative value) of a counter.
var promWindows = []struct {
	name    string
	vector  func(family string) string
	counter func(family string) string
}{
	{"15s",
		func(f string) string { return fmt.Sprintf("sum by (node, le) (rate(%s_bucket[15s]))", f) },
		func(f string) string { return fmt.Sprintf("rate(%s[15s])", f) }},
	{"lifetime",
		func(f string) string { return fmt.Sprintf("sum by (node, le) (%s_bucket)", f) },
		func(f string) string { return f }},
}

// promPaths are the two ways prom computes a node's metrics:
// Refresh (every node at once) and Window (one node's series only).
var promPaths = []string{"refresh", "window"}

// testPromExactness checks that the percentiles prom reports,
// through Refresh and Window, are Prometheus's histogram_quantile at the
// same evaluation time, with that quantile's bucket bounds; that every
// distribution no family of exactFamilies feeds is absent, never zero
// (Triton's E2E and queue time: a mean, no percentile, equal to
// Prometheus's rate(sum) / rate(count)).
func testPromExactness(t *testing.T, sf *simFleet, at time.Time, report *exactReport) {
	// Each query has its own deadline (promtest.DefaultQueryTimeout, the
	// source's Config.Timeout), not the hundreds together: on a loaded
	// machine they take minutes, and what is tested is their answers.
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err := prom.New(prom.Config{
		URL:       sf.prom.URL(),
		NodeLabel: "node", // the target label startFleet sets
		Quantiles: exactQuantiles,
		Timeout:   10 * time.Second,
	}, log, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}

	for _, w := range promWindows {
		// What prom says, both ways: by path, then node.
		got := readBothPaths(t, ctx, src, sf, w.name)

		for _, f := range exactFamilies {
			vector := w.vector(f.family)
			vec, err := sf.prom.QueryVector(ctx, vector, at)
			if err != nil {
				t.Fatal(err)
			}
			input := bucketsBy(t, vec, "node")
			if want := sf.instancesOf(f.engines...); len(input) != want {
				t.Fatalf("%s: %d nodes, want %d", vector, len(input), want)
			}
			get := distributionOf(f.concept)
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
						e := sf.engine[sf.instance[node]]
						bounds := histogram.Quantile(q, bs)
						for _, via := range promPaths {
							d := get(got[via][node])
							if d == nil {
								t.Errorf("%s %s: no %s distribution", via, node, f.concept)
								continue
							}
							var p *llmdiagv1.Percentile
							for _, pp := range d.GetPercentiles() {
								if pp.GetQuantile() == q {
									p = pp
								}
							}
							if p == nil {
								t.Errorf("%s %s %s: no percentile %g in %v", via, node, f.concept, q, d.GetPercentiles())
								continue
							}
							ours := histogram.Estimate{Value: p.GetValue(), Lower: p.GetLowerBound(), Upper: p.GetUpperBound()}
							report.add(e, via, name+" "+node, ours, want, false)
							if rel := relErr(ours.Value, want); rel > relTolerance {
								t.Errorf("%s %s %s: prom %v, prometheus %v: relative error %.3g > %g",
									via, node, f.concept, ours.Value, want, rel, relTolerance)
							}
							if !sameBound(ours.Lower, bounds.Lower) || !sameBound(ours.Upper, bounds.Upper) {
								t.Errorf("%s %s %s: bucket %v..%v, want %v..%v", via, node, f.concept,
									ours.Lower, ours.Upper, bounds.Lower, bounds.Upper)
							}
						}
					}
				})
			}
		}

		t.Run("means/"+w.name, func(t *testing.T) { testMeans(t, ctx, sf, at, w.counter, got, report) })
		if w.name != "lifetime" {
			t.Run("aborted/"+w.name, func(t *testing.T) { testAborted(t, ctx, sf, at, w.counter, got) })
		}
		t.Run("absent/"+w.name, func(t *testing.T) { testAbsent(t, sf, got) })
		t.Run("effects/"+w.name, func(t *testing.T) { testEffects(t, ctx, sf, at, w.counter, got) })
	}

	for _, e := range sim.Engines() {
		for _, via := range promPaths {
			path := via
			if !feeds(exactFamilies, e, -1) {
				path += " mean"
			}
			if s := report.get(e, path); s == nil || s.comparisons == 0 {
				t.Errorf("prom %s via %s: no comparisons", e, path)
			}
		}
	}
	t.Logf("prom sent %d queries (last Refresh: %d)", src.QueriesTotal(), src.QueriesLastRefresh())
}

// readBothPaths reads every node over window with Refresh and, node by
// node, with Window, and checks that each reports the node's engine.
func readBothPaths(t *testing.T, ctx context.Context, src *prom.Source, sf *simFleet, window string) map[string]map[string]*llmdiagv1.NodeMetrics {
	t.Helper()
	got := map[string]map[string]*llmdiagv1.NodeMetrics{"refresh": {}, "window": {}}
	obs, err := src.Refresh(ctx, window)
	if err != nil {
		t.Fatalf("Refresh(%s): %v", window, err)
	}
	for _, o := range obs {
		got["refresh"][o.Node.ID] = o.Metrics
	}
	// The Window calls are independent: run them side by side.
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for id := range sf.instance {
		if got["refresh"][id] == nil {
			t.Fatalf("Refresh(%s) has no node %s (got %d observations)", window, id, len(obs))
		}
		wg.Go(func() {
			nm, err := src.Window(ctx, id, window, 0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("Window(%s, %s): %w", id, window, err))
				return
			}
			got["window"][id] = nm
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for id, inst := range sf.instance {
		want := mappingOf(t, sf.engine[inst]).Engine
		for _, via := range promPaths {
			nm := got[via][id]
			if nm.GetEngine() != want || !nm.GetUp() {
				t.Errorf("%s %s (%s): engine %s up %v, want %s up", via, id, sf.engine[inst], nm.GetEngine(), nm.GetUp(), want)
			}
			if len(nm.GetErrors()) > 0 {
				t.Errorf("%s %s (%s) errors: %q", via, id, window, nm.GetErrors())
			}
		}
	}
	return got
}

// testMeans checks the means of meanFamilies: prom's mean is
// Prometheus's rate(sum) / rate(count) (cumulative sum / count for the
// lifetime), and absent where that is NaN.
func testMeans(t *testing.T, ctx context.Context, sf *simFleet, at time.Time, counter func(string) string,
	got map[string]map[string]*llmdiagv1.NodeMetrics, report *exactReport) {
	for _, f := range meanFamilies {
		expr := fmt.Sprintf("%s / %s * %s", counter(f.sumFamily), counter(f.countFam), strconv.FormatFloat(f.scale, 'g', -1, 64))
		res, err := sf.prom.QueryVector(ctx, expr, at)
		if err != nil {
			t.Fatal(err)
		}
		theirs := valuesBy(t, res, "node")
		if want := sf.instancesOf(f.engines...); len(theirs) != want {
			t.Fatalf("%s: %d nodes, want %d (%v)", expr, len(theirs), want, res)
		}
		get := distributionOf(f.concept)
		for node, want := range theirs {
			e := sf.engine[sf.instance[node]]
			if !slices.Contains(f.engines, e) {
				t.Fatalf("%s: node %s is %s, not one of %v", expr, node, e, f.engines)
			}
			for _, via := range promPaths {
				d := get(got[via][node])
				if d == nil {
					t.Errorf("%s %s: no %s distribution, want its mean", via, node, f.concept)
					continue
				}
				if len(d.GetPercentiles()) > 0 || len(d.GetBucketBounds()) > 0 || len(d.GetBucketCounts()) > 0 {
					t.Errorf("%s %s %s: percentiles %v, buckets %v: want none, %s exposes no histogram",
						via, node, f.concept, d.GetPercentiles(), d.GetBucketBounds(), e)
				}
				ours := math.NaN()
				if d.Mean != nil {
					ours = d.GetMean()
				}
				nan := math.NaN()
				report.add(e, via+" mean", fmt.Sprintf("%s mean %s", f.concept, node), histogram.Estimate{Value: ours, Lower: nan, Upper: nan}, want, false)
				if rel := relErr(ours, want); rel > relTolerance {
					t.Errorf("%s %s %s: prom mean %v (absent: %v), prometheus %s = %v: relative error %.3g > %g",
						via, node, f.concept, ours, d.Mean == nil, expr, want, rel, relTolerance)
				}
			}
		}
	}
}

// testAbsent checks that prom reports, on every node, exactly the
// distributions exactFamilies and meanFamilies feed for its schema: the
// others are absent (UNKNOWN), never a zero distribution.
func testAbsent(t *testing.T, sf *simFleet, got map[string]map[string]*llmdiagv1.NodeMetrics) {
	for id, inst := range sf.instance {
		e := sf.engine[inst]
		for _, lc := range latencyConcepts {
			fed := feeds(exactFamilies, e, lc.concept) || feeds(meanFamilies, e, lc.concept)
			for _, via := range promPaths {
				d := lc.get(got[via][id])
				switch {
				case fed && d == nil:
					t.Errorf("%s %s (%s): no %s distribution", via, id, e, lc.concept)
				case !fed && d != nil:
					t.Errorf("%s %s (%s): %s distribution (%d percentiles, %d buckets, count %v), but no family of exactFamilies or meanFamilies feeds it: want it absent (or the family in the table)",
						via, id, e, lc.concept, len(d.GetPercentiles()), len(d.GetBucketBounds()), d.GetCount())
				}
			}
		}
	}
}

// abortedSeries are, per schema, the requests aborted or failed as
// Prometheus sums them per node, written here apart from engine/table.go:
// the counters (PromQL selectors) and the aggregation.
var abortedSeries = map[sim.Engine]struct{ selector, agg string }{
	sim.VLLM:         {`vllm:request_success_total{finished_reason=~"abort|error"}`, "sum by (node) (%s)"},
	sim.VLLMOTel:     {`vllm_request_success{finished_reason=~"abort|error"}`, "sum by (node) (%s)"},
	sim.SGLang:       {`sglang:num_aborted_requests_total`, "sum by (node) (%s)"},
	sim.SGLangLegacy: {`sglang:num_aborted_requests_total`, "sum by (node) (%s)"},
	sim.TRTLLM:       {`trtllm_request_success_total{finished_reason=~"abort|cancelled|error"}`, "sum by (node) (%s)"},
	// Per model over reasons, then the largest model.
	sim.Triton: {`nv_inference_request_failure`, "max by (node) (sum by (node, model, version) (%s))"},
	sim.TGI:    {`tgi_request_failure`, "sum by (node) (%s)"},
	sim.Dynamo: {`dynamo_frontend_requests_total{status="error"}`, "sum by (node) (%s)"},
}

// testAborted checks aborted_requests_per_second: on every node, through
// Refresh and Window, it is Prometheus's rate of the schema's aborted
// counters, and absent exactly where the node has no such series (TGI
// before its first failure). Every schema must show aborts on some node
// (the aborting fleet).
func testAborted(t *testing.T, ctx context.Context, sf *simFleet, at time.Time, counter func(string) string,
	got map[string]map[string]*llmdiagv1.NodeMetrics) {
	nonzero := map[sim.Engine]int{}
	for _, e := range sim.Engines() {
		a, ok := abortedSeries[e]
		if !ok {
			t.Errorf("schema %s: no entry in abortedSeries", e)
			continue
		}
		expr := fmt.Sprintf(a.agg, counter(a.selector))
		res, err := sf.prom.QueryVector(ctx, expr, at)
		if err != nil {
			t.Fatal(err)
		}
		theirs := valuesBy(t, res, "node")
		for id, inst := range sf.instance {
			if sf.engine[inst] != e {
				continue
			}
			want, has := theirs[id]
			for _, via := range promPaths {
				ours := got[via][id].AbortedRequestsPerSecond
				switch {
				case !has && ours != nil:
					t.Errorf("%s %s (%s): aborted %v/s, but %s has no series", via, id, e, *ours, expr)
				case has && ours == nil:
					t.Errorf("%s %s (%s): no aborted rate, %s = %v", via, id, e, expr, want)
				case has && relErr(*ours, want) > relTolerance:
					t.Errorf("%s %s (%s): aborted %v/s, %s = %v", via, id, e, *ours, expr, want)
				}
			}
			if has && want > 0 {
				nonzero[e]++
			}
		}
	}
	for _, e := range sim.Engines() {
		if nonzero[e] == 0 {
			t.Errorf("schema %s: no node with aborted requests in the window", e)
		}
	}
}
