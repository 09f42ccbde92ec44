package metrics

import (
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sample"
)

var inf = math.Inf(+1)

func f(v float64) *float64 { return &v }

// pct is one expected percentile: value in [lower, upper].
type pct struct{ q, value, lower, upper float64 }

// dist is an expected Distribution; nil means absent.
type dist struct {
	pcts   []pct
	mean   *float64
	count  float64
	bounds []float64
	counts []float64 // checked when set
	sum    *float64  // checked when set
}

type wantMetrics struct {
	window                                  string
	up, stale                               bool
	staleness                               time.Duration
	queue, running, ratio, kv, kvCap        *float64
	prompt, gen, decodePerReq, preempt, rps *float64
	aborted                                 *float64 // aborted_requests_per_second
	ttft, e2e, itl, tpot, queueTime         *dist
	errors                                  []string
}

func TestCompute(t *testing.T) {
	t0 := time.Date(2026, 1, 13, 12, 0, 0, 0, time.UTC)
	ttftBounds := []float64{0.1, 1, inf}
	// base: 60 s before newest.
	base := &sample.Sample{
		At: t0, Up: true, Engine: llmdiagv1.Engine_ENGINE_VLLM, Model: "m",
		PromptTokens: f(1000), GenerationTokens: f(500), Preemptions: f(2), RequestsFinished: f(10),
		RequestsAborted: f(3),
		Hists: [sample.NumHists]*sample.Histogram{
			sample.TTFT: {Bounds: ttftBounds, Counts: []float64{2, 5, 6}, Sum: 3, Count: 6},
			sample.E2E:  {Bounds: ttftBounds, Counts: []float64{1, 1, 1}, Sum: 0.05, Count: 1},
		},
	}
	newest := &sample.Sample{
		At: t0.Add(time.Minute), Up: true, Engine: llmdiagv1.Engine_ENGINE_VLLM, Model: "m",
		Queue: f(3), Running: f(12), KVUsage: f(0.4), KVCapacityTokens: f(1000),
		PromptTokens: f(4000), GenerationTokens: f(2300), Preemptions: f(2), RequestsFinished: f(40),
		RequestsAborted: f(9),
		Hists: [sample.NumHists]*sample.Histogram{
			sample.TTFT: {Bounds: ttftBounds, Counts: []float64{2, 25, 36}, Sum: 30, Count: 36},
			// Same as base: no observations in the window.
			sample.E2E: {Bounds: ttftBounds, Counts: []float64{1, 1, 1}, Sum: 0.05, Count: 1},
		},
		Errors: []string{"sglang:x (queue): boom"},
	}
	// After an engine restart between base and newest: counters and
	// histograms start again from 0.
	restarted := &sample.Sample{
		At: t0.Add(time.Minute), Up: true,
		Queue: f(4), Running: f(0),
		PromptTokens: f(300), GenerationTokens: f(600), Preemptions: f(2), RequestsFinished: f(4),
		RequestsAborted: f(1),
		Hists: [sample.NumHists]*sample.Histogram{
			sample.TTFT: {Bounds: ttftBounds, Counts: []float64{1, 3, 4}, Sum: 2, Count: 4},
		},
	}
	// A sample that exposes few concepts (a failed read of most families).
	sparse := &sample.Sample{At: t0.Add(time.Minute), Up: true, Queue: f(0), Running: f(0)}
	// A base read whose exposition had a family left out: what it lacks
	// may have been lost, not yet created.
	sparseOld := &sample.Sample{At: t0, Up: true, Warnings: []string{"family vllm:x left out: bad line"}}
	down := &sample.Sample{At: t0.Add(time.Minute), Errors: []string{"scrape: connection refused"}}

	tests := []struct {
		name         string
		newest, base *sample.Sample
		window       string
		quantiles    []float64
		now          time.Time
		want         wantMetrics
	}{
		{
			name: "window", newest: newest, base: base, window: "1m",
			now: t0.Add(90 * time.Second),
			want: wantMetrics{
				window: "1m", up: true, staleness: 30 * time.Second,
				// queue 3 / running 12.
				queue: f(3), running: f(12), ratio: f(0.25), kv: f(0.4), kvCap: f(1000),
				// (4000−1000)/60, (2300−500)/60, 0/60, (40−10)/60; 30 tok/s / 12 running.
				prompt: f(50), gen: f(30), decodePerReq: f(2.5), preempt: f(0), rps: f(0.5),
				// aborted (9−3)/60.
				aborted: f(0.1),
				// TTFT delta: counts 0, 20, 30; sum 27, count 30.
				ttft: &dist{
					pcts: []pct{
						// rank 15 in le=1 (20 ≥ 15): 0.1 + 0.9·15/20.
						{0.5, 0.775, 0.1, 1},
						// rank 28.5 > 20: +Inf bucket, largest finite bound.
						{0.95, 1, 1, inf},
						{0.99, 1, 1, inf},
					},
					mean: f(0.9), count: 30, bounds: ttftBounds,
					counts: []float64{0, 20, 30}, sum: f(27),
				},
				// No observations in the window: NaN percentiles, no mean.
				e2e: &dist{
					pcts:   []pct{{0.5, math.NaN(), math.NaN(), math.NaN()}, {0.95, math.NaN(), math.NaN(), math.NaN()}, {0.99, math.NaN(), math.NaN(), math.NaN()}},
					bounds: ttftBounds,
				},
				errors: []string{"sglang:x (queue): boom"},
			},
		},
		{
			name: "reset", newest: restarted, base: base, window: "1m",
			now: t0.Add(time.Minute),
			want: wantMetrics{
				window: "1m", up: true,
				// 4 queued, none running: the ratio is the queue.
				queue: f(4), running: f(0), ratio: f(4),
				// prompt fell 1000 → 300: delta 300; generation 500 → 600: 100;
				// requests 10 → 4: delta 4. No per-request speed without running.
				prompt: f(5), gen: f(100.0 / 60), preempt: f(0), rps: f(4.0 / 60),
				// aborted fell 3 → 1: delta 1.
				aborted: f(1.0 / 60),
				// TTFT count fell 6 → 4: the whole newest histogram. rank 2 in
				// le=1 (3 ≥ 2): 0.1 + 0.9·(2−1)/(3−1).
				ttft: &dist{
					pcts: []pct{{0.5, 0.55, 0.1, 1}}, mean: f(0.5), count: 4, bounds: ttftBounds,
					counts: []float64{1, 3, 4}, sum: f(2),
				},
			},
			quantiles: []float64{0.5},
		},
		{
			name: "absent concepts stay absent", newest: sparse, base: base, window: "5m",
			now: t0.Add(3 * time.Minute),
			want: wantMetrics{
				window: "5m", up: true, staleness: 2 * time.Minute, stale: true,
				// Both 0: ratio 0. Counters and histograms missing in newest.
				queue: f(0), running: f(0), ratio: f(0),
			},
		},
		{
			// No counters or histograms in a base with warnings: no
			// deltas, so absent (TestComputeSeriesBornInWindow has the
			// complete base).
			name: "incomplete base lacks what newest has", newest: newest, base: sparseOld, window: "1m",
			now: t0.Add(time.Minute),
			want: wantMetrics{
				window: "1m", up: true,
				queue: f(3), running: f(12), ratio: f(0.25), kv: f(0.4), kvCap: f(1000),
				errors: []string{"sglang:x (queue): boom"},
			},
		},
		{
			name: "base not older", newest: newest, base: newest, window: "1m",
			now: t0.Add(time.Minute),
			want: wantMetrics{
				window: "1m", up: true,
				queue: f(3), running: f(12), ratio: f(0.25), kv: f(0.4), kvCap: f(1000),
				ttft: &dist{
					pcts:   []pct{{0.5, math.NaN(), math.NaN(), math.NaN()}, {0.95, math.NaN(), math.NaN(), math.NaN()}, {0.99, math.NaN(), math.NaN(), math.NaN()}},
					bounds: ttftBounds,
				},
				e2e: &dist{
					pcts:   []pct{{0.5, math.NaN(), math.NaN(), math.NaN()}, {0.95, math.NaN(), math.NaN(), math.NaN()}, {0.99, math.NaN(), math.NaN(), math.NaN()}},
					bounds: ttftBounds,
				},
				errors: []string{"sglang:x (queue): boom", "window base is not older than the newest sample: no rates"},
			},
		},
		{
			name: "lifetime without counter start", newest: newest, window: "5m",
			now: t0.Add(time.Minute),
			want: wantMetrics{
				// base nil: lifetime, whatever the window asked.
				window: "lifetime", up: true,
				queue: f(3), running: f(12), ratio: f(0.25), kv: f(0.4), kvCap: f(1000),
				// Cumulative TTFT: counts 2, 25, 36. rank 18 in le=1:
				// 0.1 + 0.9·(18−2)/(25−2); rank 34.2 and 35.64 in +Inf.
				ttft: &dist{
					pcts: []pct{{0.5, 0.1 + 0.9*16.0/23, 0.1, 1}, {0.95, 1, 1, inf}, {0.99, 1, 1, inf}},
					mean: f(30.0 / 36), count: 36, bounds: ttftBounds,
				},
				e2e: &dist{
					// rank 0.5 in le=0.1 (count 1): 0.1·0.5/1.
					pcts: []pct{{0.5, 0.05, 0, 0.1}, {0.95, 0.095, 0, 0.1}, {0.99, 0.099, 0, 0.1}},
					mean: f(0.05), count: 1, bounds: ttftBounds,
				},
				errors: []string{"sglang:x (queue): boom"},
			},
		},
		{
			// Staleness exactly at the limit is not stale yet.
			name: "target down", newest: down, base: base, window: "1m",
			now:  t0.Add(2 * time.Minute),
			want: wantMetrics{window: "1m", staleness: time.Minute, errors: []string{"scrape: connection refused"}},
		},
		{
			name: "future sample", newest: sparse, window: "lifetime",
			now:  t0,
			want: wantMetrics{window: "lifetime", up: true, queue: f(0), running: f(0), ratio: f(0)},
		},
		{
			name: "no sample", window: "5m", now: t0,
			want: wantMetrics{window: "5m", stale: true, errors: []string{"no sample"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(tc.newest, tc.base, tc.window, tc.quantiles, tc.now, time.Minute)
			checkMetrics(t, got, tc.want)
			if tc.newest != nil {
				if got.GetObservedAt().AsTime() != tc.newest.At || got.GetModel() != tc.newest.Model || got.GetEngine() != tc.newest.Engine {
					t.Errorf("observed_at %v model %q engine %v, want the newest sample's", got.GetObservedAt().AsTime(), got.GetModel(), got.GetEngine())
				}
				if got.Queue != nil && got.Queue == tc.newest.Queue {
					t.Errorf("queue aliases the sample")
				}
			}
		})
	}
}

// TestComputeSeriesBornInWindow: engines create series on their first
// request, so a counter, histogram or total the newest read has may be
// missing from the base. Missing from a complete base (up, no errors, no
// warnings) it counts as 0 there; missing from any other base it may have
// been lost by the read, and stays absent. Where both ends have it, the
// base's completeness changes nothing.
func TestComputeSeriesBornInWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 13, 12, 0, 0, 0, time.UTC)
	bounds := []float64{0.1, 1, inf}
	// newest, a minute after the base: 6 requests finished so far, the
	// first ones the engine served.
	newest := &sample.Sample{
		At: t0.Add(time.Minute), Up: true, Engine: llmdiagv1.Engine_ENGINE_VLLM,
		Queue: f(0), Running: f(4),
		GenerationTokens: f(1200), RequestsFinished: f(40),
		Hists: [sample.NumHists]*sample.Histogram{
			sample.TTFT: {Bounds: bounds, Counts: []float64{3, 5, 6}, Sum: 3, Count: 6},
		},
		Totals: [sample.NumHists]*sample.Total{sample.E2E: {Sum: 12, Count: 6}},
	}
	// A base before the first request: only the finished-requests counter
	// (created at start) exists.
	early := func(mod func(*sample.Sample)) *sample.Sample {
		s := &sample.Sample{At: t0, Up: true, Engine: llmdiagv1.Engine_ENGINE_VLLM, Queue: f(0), Running: f(0), RequestsFinished: f(10)}
		if mod != nil {
			mod(s)
		}
		return s
	}
	// A base with every series: 3 requests served already.
	full := func(mod func(*sample.Sample)) *sample.Sample {
		s := early(nil)
		s.GenerationTokens = f(600)
		s.Hists[sample.TTFT] = &sample.Histogram{Bounds: bounds, Counts: []float64{1, 2, 3}, Sum: 1, Count: 3}
		s.Totals[sample.E2E] = &sample.Total{Sum: 6, Count: 3}
		if mod != nil {
			mod(s)
		}
		return s
	}
	withErrors := func(s *sample.Sample) { s.Errors = []string{"sglang:x (queue): boom"} }
	withWarnings := func(s *sample.Sample) {
		s.Warnings = []string{"family vllm:time_to_first_token_seconds left out: bad bucket"}
	}
	down := func(s *sample.Sample) { s.Up = false }
	// The whole newest TTFT histogram: rank 3 of 6 in le=0.1 (3 ≥ 3).
	wholeTTFT := &dist{
		pcts: []pct{{0.5, 0.1, 0, 0.1}}, mean: f(0.5), count: 6, bounds: bounds,
		counts: []float64{3, 5, 6}, sum: f(3),
	}
	// The total's whole newest sum and count: no percentile.
	wholeE2E := &dist{mean: f(2), count: 6, sum: f(12)}
	// Neither the generation rate nor the latencies: requests only.
	unknown := wantMetrics{window: "1m", up: true, queue: f(0), running: f(4), ratio: f(0), rps: f(0.5)}
	both := wantMetrics{
		window: "1m", up: true, queue: f(0), running: f(4), ratio: f(0),
		// (1200−600)/60 tok/s over 4 running; (40−10)/60 requests.
		gen: f(10), decodePerReq: f(2.5), rps: f(0.5),
		// Counts 2, 3, 3: rank 1.5 in le=0.1 (2 ≥ 1.5).
		ttft: &dist{
			pcts: []pct{{0.5, 0.075, 0, 0.1}}, mean: f(2.0 / 3), count: 3, bounds: bounds,
			counts: []float64{2, 3, 3}, sum: f(2),
		},
		e2e: &dist{mean: f(2), count: 3, sum: f(6)},
	}

	tests := []struct {
		name string
		base *sample.Sample
		want wantMetrics
	}{
		{
			name: "born in the window, complete base", base: early(nil),
			want: wantMetrics{
				window: "1m", up: true, queue: f(0), running: f(4), ratio: f(0),
				// 1200 tokens since 0 over 60 s; 5 tok/s each of 4 running.
				gen: f(20), decodePerReq: f(5), rps: f(0.5),
				ttft: wholeTTFT, e2e: wholeE2E,
			},
		},
		{name: "base with errors", base: early(withErrors), want: unknown},
		{name: "base with warnings", base: early(withWarnings), want: unknown},
		{name: "base down", base: early(down), want: unknown},
		{
			// A base read no earlier than newest gives no window at all.
			name: "complete base not older", base: early(func(s *sample.Sample) { s.At = newest.At }),
			want: wantMetrics{
				window: "1m", up: true, queue: f(0), running: f(4), ratio: f(0),
				errors: []string{"window base is not older than the newest sample: no rates"},
			},
		},
		{name: "both ends, complete base", base: full(nil), want: both},
		{name: "both ends, base with warnings", base: full(withWarnings), want: both},
		{name: "both ends, base with errors", base: full(withErrors), want: both},
		{
			// The engine restarted since the base: every counter counts
			// from 0, as Prometheus's rate reads a reset.
			name: "reset", base: full(func(s *sample.Sample) {
				s.RequestsFinished = f(100)
			}),
			want: func() wantMetrics {
				w := both
				w.rps = f(40.0 / 60)
				return w
			}(),
		},
		{
			name: "reset of every series",
			base: full(func(s *sample.Sample) {
				s.GenerationTokens = f(5000)
				s.Hists[sample.TTFT] = &sample.Histogram{Bounds: bounds, Counts: []float64{10, 10, 10}, Sum: 4, Count: 10}
				s.Totals[sample.E2E] = &sample.Total{Sum: 100, Count: 50}
			}),
			want: wantMetrics{
				window: "1m", up: true, queue: f(0), running: f(4), ratio: f(0),
				gen: f(20), decodePerReq: f(5), rps: f(0.5),
				ttft: wholeTTFT, e2e: wholeE2E,
			},
		},
		{
			// Sum and count are two counters, each read with its own
			// reset: the count fell 7 → 6 (whole: 6), the sum grew 6 → 12.
			name: "total whose count alone fell",
			base: full(func(s *sample.Sample) { s.Totals[sample.E2E] = &sample.Total{Sum: 6, Count: 7} }),
			want: func() wantMetrics {
				w := both
				w.e2e = &dist{mean: f(1), count: 6, sum: f(6)}
				return w
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(newest, tc.base, "1m", []float64{0.5}, newest.At, time.Minute)
			checkMetrics(t, got, tc.want)
		})
	}

	// The lifetime reads the total cumulative.
	t.Run("lifetime total", func(t *testing.T) {
		d := Compute(newest, nil, "", []float64{0.5}, newest.At, time.Minute).GetE2E()
		checkDist(t, "e2e", d, wholeE2E)
	})

	// A window longer than the history: Pick's base is the oldest read,
	// before the first request, and the window's rates come from the data
	// it holds.
	t.Run("history shorter than the window", func(t *testing.T) {
		history := []*sample.Sample{
			{At: t0, Up: true, Running: f(0)},
			{At: t0.Add(10 * time.Second), Up: true, Running: f(1), GenerationTokens: f(100)},
			{At: t0.Add(20 * time.Second), Up: true, Running: f(2), GenerationTokens: f(300)},
		}
		n, b := Pick(history, 5*time.Minute)
		got := Compute(n, b, "5m", nil, n.At, time.Minute)
		// 300 tokens over the 20 s held, shared by 2 running.
		if g := got.GenerationTokensPerSecond; g == nil || *g != 15 {
			t.Errorf("generation = %s, want 15", testkit.Show(g))
		}
		if v, from := PerRequestDecode(got); v != 7.5 || from != DecodeDerived || got.GetDecodeTokensPerSecondPerRequest() != 7.5 {
			t.Errorf("decode per request %v from %v, field %s; want 7.5 derived in both", v, from, testkit.Show(got.DecodeTokensPerSecondPerRequest))
		}
	})
}

// TestComputeLifetimeScrape computes the lifetime indicators of the real vLLM
// scrape, read 100 s after its counters started.
func TestComputeLifetimeScrape(t *testing.T) {
	r, err := os.Open("testdata/vllm-v1-dynamo-metrics_examples.prom")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	exp, err := engine.Parse(r, engine.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	families := exp.Families
	s := engine.Extract(llmdiagv1.Engine_ENGINE_UNSPECIFIED, families, time.Time{})
	// prompt_tokens_created 1.768264339889982e+09 is the earliest start.
	if d := s.CountersCreated.Sub(time.Unix(1768264339, 889982000)); d.Abs() > time.Microsecond {
		t.Fatalf("CountersCreated = %v", s.CountersCreated)
	}
	s.At = s.CountersCreated.Add(100 * time.Second)
	got := Compute(s, nil, "", nil, s.At.Add(10*time.Second), time.Minute)
	checkMetrics(t, got, wantMetrics{
		window: "lifetime", up: true, staleness: 10 * time.Second,
		queue: f(0), running: f(0), ratio: f(0), kv: f(0), kvCap: f(95088),
		// 66 and 600 tokens, 0 preemptions, 2 requests over 100 s; running 0:
		// the per-request decode speed is 1 / P50 time per output token.
		prompt: f(0.66), gen: f(6), preempt: f(0), rps: f(0.02), decodePerReq: f(1 / 0.005),
		// finished_reason abort 0 + error 0.
		aborted: f(0),
		ttft: &dist{
			// Counts 0 to le=0.01, 1 to le=0.25, 2 from le=0.5.
			pcts: []pct{
				{0.5, 0.02, 0.01, 0.02},  // rank 1 in le=0.02: 0.01 + 0.01·1/1
				{0.95, 0.475, 0.25, 0.5}, // rank 1.9 in le=0.5: 0.25 + 0.25·0.9
				{0.99, 0.495, 0.25, 0.5}, // rank 1.98: 0.25 + 0.25·0.98
			},
			mean: f(0.4143967628479004 / 2), count: 2,
			bounds: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560, inf},
		},
		e2e: &dist{
			// Both requests in le=2.0 (previous bound 1.5).
			pcts: []pct{{0.5, 1.75, 1.5, 2}, {0.95, 1.975, 1.5, 2}, {0.99, 1.995, 1.5, 2}},
			mean: f(3.5736520290374756 / 2), count: 2,
			bounds: []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680, inf},
		},
		itl: &dist{
			// 597 of 598 gaps in le=0.01: rank/597 · 0.01.
			pcts: []pct{{0.5, 0.01 * 299 / 597, 0, 0.01}, {0.95, 0.01 * 568.1 / 597, 0, 0.01}, {0.99, 0.01 * 592.02 / 597, 0, 0.01}},
			mean: f(3.1598554495722055 / 598), count: 598,
			bounds: []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, inf},
		},
		tpot: &dist{
			pcts: []pct{{0.5, 0.005, 0, 0.01}, {0.95, 0.0095, 0, 0.01}, {0.99, 0.0099, 0, 0.01}},
			mean: f(0.010568078426662894 / 2), count: 2,
			bounds: []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, inf},
		},
		queueTime: &dist{
			pcts: []pct{{0.5, 0.15, 0, 0.3}, {0.95, 0.285, 0, 0.3}, {0.99, 0.297, 0, 0.3}},
			mean: f(1.883227378129959e-05 / 2), count: 2,
			bounds: []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680, inf},
		},
	})
}

func checkMetrics(t *testing.T, got *llmdiagv1.NodeMetrics, w wantMetrics) {
	t.Helper()
	if got.GetWindow() != w.window || got.GetUp() != w.up || got.GetStale() != w.stale {
		t.Errorf("window %q up %v stale %v, want %q %v %v", got.GetWindow(), got.GetUp(), got.GetStale(), w.window, w.up, w.stale)
	}
	if got.Staleness != nil && got.Staleness.AsDuration() != w.staleness {
		t.Errorf("staleness %v, want %v", got.Staleness.AsDuration(), w.staleness)
	}
	fig := testkit.Figures(t, 1e-12)
	fig("queue", got.Queue, w.queue)
	fig("running", got.Running, w.running)
	fig("queue_running_ratio", got.QueueRunningRatio, w.ratio)
	fig("kv_pressure", got.KvPressure, w.kv)
	fig("kv_capacity_tokens", got.KvCapacityTokens, w.kvCap)
	fig("prompt_tokens_per_second", got.PromptTokensPerSecond, w.prompt)
	fig("generation_tokens_per_second", got.GenerationTokensPerSecond, w.gen)
	fig("decode_tokens_per_second_per_request", got.DecodeTokensPerSecondPerRequest, w.decodePerReq)
	fig("preemptions_per_second", got.PreemptionsPerSecond, w.preempt)
	fig("requests_per_second", got.RequestsPerSecond, w.rps)
	fig("aborted_requests_per_second", got.AbortedRequestsPerSecond, w.aborted)
	for _, d := range []struct {
		name string
		got  *llmdiagv1.Distribution
		want *dist
	}{
		{"ttft", got.Ttft, w.ttft},
		{"e2e", got.E2E, w.e2e},
		{"inter_token", got.InterToken, w.itl},
		{"time_per_output_token", got.TimePerOutputToken, w.tpot},
		{"queue_time", got.QueueTime, w.queueTime},
	} {
		checkDist(t, d.name, d.got, d.want)
	}
	if !slices.Equal(got.GetErrors(), w.errors) {
		t.Errorf("errors %q, want %q", got.GetErrors(), w.errors)
	}
}

func checkDist(t *testing.T, name string, got *llmdiagv1.Distribution, want *dist) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Errorf("%s = %v, want absent", name, got)
		}
		return
	}
	if got == nil {
		t.Errorf("%s absent", name)
		return
	}
	if got.Count != want.count || !slices.Equal(got.BucketBounds, want.bounds) {
		t.Errorf("%s count %v bounds %v, want %v %v", name, got.Count, got.BucketBounds, want.count, want.bounds)
	}
	if want.counts != nil && !slices.Equal(got.BucketCounts, want.counts) || len(got.BucketCounts) != len(got.BucketBounds) {
		t.Errorf("%s bucket counts %v, want %v", name, got.BucketCounts, want.counts)
	}
	if want.sum != nil && !near(got.Sum, *want.sum) {
		t.Errorf("%s sum %v, want %v", name, got.Sum, *want.sum)
	}
	if (got.Mean == nil) != (want.mean == nil) || (got.Mean != nil && !near(*got.Mean, *want.mean)) {
		t.Errorf("%s mean %s, want %s", name, testkit.Show(got.Mean), testkit.Show(want.mean))
	}
	if len(got.Percentiles) != len(want.pcts) {
		t.Fatalf("%s has %d percentiles, want %d", name, len(got.Percentiles), len(want.pcts))
	}
	for i, p := range got.Percentiles {
		w := want.pcts[i]
		if p.Quantile != w.q || !near(p.Value, w.value) || !near(p.LowerBound, w.lower) || !near(p.UpperBound, w.upper) {
			t.Errorf("%s q%v = %v in [%v, %v], want %v in [%v, %v]", name, p.Quantile, p.Value, p.LowerBound, p.UpperBound, w.value, w.lower, w.upper)
		}
	}
}

func near(got, want float64) bool { return testkit.Near(got, want, 1e-12) }

// TestDistributionOf: DistributionOf, its bucket scratch shared by
// histograms of every size one after another, gives what Distribution
// gives, keeping the histogram's slices where Distribution copies them.
func TestDistributionOf(t *testing.T) {
	qs := []float64{0.5, 0.9, 0.99, 0}
	hists := []*sample.Histogram{
		{Bounds: []float64{0.1, 1, 10, inf}, Counts: []float64{1, 5, 9, 10}, Count: 10, Sum: 20},
		{Bounds: []float64{1, inf}, Counts: []float64{0.5, 0.75}, Count: 0.75, Sum: 1},
		{Bounds: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, inf}, Counts: []float64{0, 0, 1, 1, 3, 2, 7, 8, 9, 9, 9}, Count: 9, Sum: 0.7},
		{Bounds: []float64{1, 2}, Counts: []float64{1, 2}, Count: 2, Sum: 3}, // no +Inf: no percentiles
		{Bounds: []float64{}, Counts: []float64{}},
	}
	var scratch []histogram.Bucket
	for i, h := range hists {
		want := Distribution(h, qs)
		if len(h.Bounds) > 0 && &want.BucketBounds[0] == &h.Bounds[0] {
			t.Errorf("case %d: Distribution kept the histogram's bounds", i)
		}
		own := &sample.Histogram{Count: h.Count, Sum: h.Sum, Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts)}
		got := DistributionOf(own, qs, &scratch)
		if !proto.Equal(got, want) {
			t.Errorf("case %d: DistributionOf %v, Distribution %v", i, got, want)
		}
		if len(h.Bounds) > 0 && (&got.BucketBounds[0] != &own.Bounds[0] || &got.BucketCounts[0] != &own.Counts[0]) {
			t.Errorf("case %d: DistributionOf copied the histogram's buckets", i)
		}
	}
}
