package prom

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/source"
)

var _ source.Source = (*Source)(nil)

// testNow is the evaluation time of the fixtures: 2026-01-01T00:00:00Z.
var testNow = time.Unix(1767225600, 0).UTC()

var inf = math.Inf(+1)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newTestSource(t testing.TB, url string, edit func(*Config)) *Source {
	t.Helper()
	cfg := Config{URL: url, Timeout: 5 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg, quietLog(), func() time.Time { return testNow })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fleetFake serves testdata/fleet for the plan of b.
func fleetFake(t *testing.T, b builder) *fakeProm {
	t.Helper()
	return newFakeProm(t, fixtureBodies(t, "testdata/fleet", plan(t, b, engine.Engines()...)))
}

func f(v float64) *float64 { return &v }

type pct struct{ q, value, lower, upper float64 }

type wantDist struct {
	count, sum     float64
	mean           *float64
	bounds, counts []float64
	pcts           []pct
}

type wantNode struct {
	id, model             string
	engine                llmdiagv1.Engine
	up, stale             bool
	staleness             time.Duration
	dp, tp                int
	queue, running, ratio *float64
	kv, kvCap             *float64
	prompt, gen, decode   *float64
	preempt, reqs         *float64
	ttft, e2e             *wantDist
	errs, warnings        []string // substrings, one per entry, in order
}

func TestRefreshFixtures(t *testing.T) {
	fake := fleetFake(t, defaultBuilder("5m"))
	src := newTestSource(t, fake.URL, nil)
	obs, err := src.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	want := []wantNode{
		{
			// Two engine cores (engine 0 and 1): gauges and rates are the
			// sums Prometheus returns; KV usage is weighted by each core's
			// capacity: (0.2×16000 + 0.6×48000) / 64000.
			id: "sglang-a:30000", model: "deepseek-ai/DeepSeek-V3", engine: llmdiagv1.Engine_ENGINE_SGLANG,
			up: true, staleness: time.Second, dp: 2, tp: 2,
			queue: f(5), running: f(20), ratio: f(0.25),
			// used / capacity over both dp ranks: (100 + 300) / 2000.
			kv: f(0.2), kvCap: f(2000),
			gen: f(400), decode: f(20),
			// Bucket rates 0, 1, 2, 2 (le 1, 2, 4, +Inf) × 300 s.
			ttft: &wantDist{
				count: 600, sum: 1500, mean: f(2.5),
				bounds: []float64{1, 2, 4, inf}, counts: []float64{0, 300, 600, 600},
				pcts: []pct{{0.5, 2, 1, 2}, {0.95, 3.8, 2, 4}, {0.99, 3.96, 2, 4}},
			},
		},
		{
			id: "vllm-a:8000", model: "Qwen/Qwen3-0.6B", engine: llmdiagv1.Engine_ENGINE_VLLM,
			up: true, staleness: 4 * time.Second, dp: 2,
			queue: f(3), running: f(8), ratio: f(0.375),
			kv: f(0.5), kvCap: f(64000),
			prompt: f(1000), gen: f(120), decode: f(15), reqs: f(2),
			// Bucket rates 0.5, 1.5, 1.8, 2 (le 0.1, 0.5, 1.0, +Inf) × 300 s;
			// _sum 0.8/s, _count 2/s.
			ttft: &wantDist{
				count: 600, sum: 240, mean: f(0.4),
				bounds: []float64{0.1, 0.5, 1, inf}, counts: []float64{150, 450, 540, 600},
				pcts: []pct{{0.5, 0.3, 0.1, 0.5}, {0.95, 1, 1, inf}, {0.99, 1, 1, inf}},
			},
			errs: []string{
				"preemptions: query: execution: query processing would load too many samples",
				"e2e: no +Inf bucket",
			},
			warnings: []string{"prometheus: partial response: store 10.0.0.3:10901 unavailable (ttft buckets)"},
		},
		{
			// Last scraped 100 s before the evaluation: stale. No capacity:
			// KV usage is the plain mean. le "1" and "1.0" are one bucket.
			id: "vllm-b:8000", model: "llama-3-8b", engine: llmdiagv1.Engine_ENGINE_VLLM,
			up: true, stale: true, staleness: 100 * time.Second, dp: 1,
			queue: f(0), running: f(1), ratio: f(0),
			kv:     f(0.9),
			prompt: f(10), gen: f(5), decode: f(5), reqs: f(0.1),
			ttft: &wantDist{
				count: 30, sum: 18, mean: f(0.6),
				bounds: []float64{0.5, 1, inf}, counts: []float64{15, 30, 30},
				pcts: []pct{{0.5, 0.5, 0, 0.5}, {0.95, 0.95, 0.5, 1}, {0.99, 0.99, 0.5, 1}},
			},
			errs: []string{
				"preemptions: query: execution",
			},
			warnings: []string{"partial response"},
		},
		{
			// Had series within the lookback, none now.
			id: "vllm-gone:8000", model: "Qwen/Qwen3-0.6B", engine: llmdiagv1.Engine_ENGINE_VLLM,
			up:       false,
			errs:     []string{"preemptions: query", "no series at 2026-01-01T00:00:00Z: target down"},
			warnings: []string{"partial response"},
		},
	}
	if len(obs) != len(want) {
		t.Fatalf("got %d observations, want %d: %v", len(obs), len(want), ids(obs))
	}
	for i, w := range want {
		checkObservation(t, obs[i], w, "5m")
	}
	for _, q := range fake.Seen() {
		if q.At != "1767225600" && q.At != "1767225600.000" {
			t.Errorf("query evaluated at %q, want the refresh time: %s", q.At, q.Expr)
		}
	}
}

func ids(obs []source.Observation) []string {
	var out []string
	for _, o := range obs {
		out = append(out, o.Node.ID)
	}
	return out
}

func checkObservation(t *testing.T, o source.Observation, w wantNode, window string) {
	t.Helper()
	m := o.Metrics
	t.Run(w.id, func(t *testing.T) {
		if o.Node.ID != w.id || m.GetNode() != w.id {
			t.Fatalf("node %q / %q, want %q", o.Node.ID, m.GetNode(), w.id)
		}
		if m.GetModel() != w.model || o.Node.Model != w.model || o.Engine != w.engine || m.GetEngine() != w.engine {
			t.Errorf("model %q engine %v, want %q %v", m.GetModel(), m.GetEngine(), w.model, w.engine)
		}
		if m.GetUp() != w.up || m.GetStale() != w.stale || m.GetWindow() != window {
			t.Errorf("up %v stale %v window %q, want %v %v %q", m.GetUp(), m.GetStale(), m.GetWindow(), w.up, w.stale, window)
		}
		if w.up && m.GetStaleness().AsDuration() != w.staleness {
			t.Errorf("staleness %v, want %v", m.GetStaleness().AsDuration(), w.staleness)
		}
		if o.Sample.DataParallel != w.dp || o.Sample.TensorParallel != w.tp {
			t.Errorf("dp %d tp %d, want %d %d", o.Sample.DataParallel, o.Sample.TensorParallel, w.dp, w.tp)
		}
		for _, c := range []struct {
			name      string
			got, want *float64
		}{
			{"queue", m.Queue, w.queue}, {"running", m.Running, w.running}, {"ratio", m.QueueRunningRatio, w.ratio},
			{"kv", m.KvPressure, w.kv}, {"kv capacity", m.KvCapacityTokens, w.kvCap},
			{"prompt", m.PromptTokensPerSecond, w.prompt}, {"generation", m.GenerationTokensPerSecond, w.gen},
			{"decode", m.DecodeTokensPerSecondPerRequest, w.decode},
			{"preemptions", m.PreemptionsPerSecond, w.preempt}, {"requests", m.RequestsPerSecond, w.reqs},
		} {
			if !nearPtr(c.got, c.want) {
				t.Errorf("%s = %s, want %s", c.name, testkit.Show(c.got), testkit.Show(c.want))
			}
		}
		checkDist(t, "ttft", m.GetTtft(), w.ttft)
		checkDist(t, "e2e", m.GetE2E(), w.e2e)
		checkStrings(t, "errors", m.GetErrors(), w.errs)
		checkStrings(t, "warnings", m.GetWarnings(), w.warnings)
	})
}

func checkStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %q, want %d matching %q", what, got, len(want), want)
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("%s[%d] = %q, want it to contain %q", what, i, got[i], want[i])
		}
	}
}

func checkDist(t *testing.T, name string, got *llmdiagv1.Distribution, want *wantDist) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Errorf("%s = %v, want %v", name, got, want)
		return
	}
	if got == nil {
		return
	}
	if !near(got.GetCount(), want.count) || !near(got.GetSum(), want.sum) || !nearPtr(got.Mean, want.mean) {
		t.Errorf("%s count %v sum %v mean %s, want %v %v %s", name, got.GetCount(), got.GetSum(), testkit.Show(got.Mean), want.count, want.sum, testkit.Show(want.mean))
	}
	if !slices.Equal(got.GetBucketBounds(), want.bounds) || !slices.EqualFunc(got.GetBucketCounts(), want.counts, near) {
		t.Errorf("%s buckets %v %v, want %v %v", name, got.GetBucketBounds(), got.GetBucketCounts(), want.bounds, want.counts)
	}
	if len(got.GetPercentiles()) != len(want.pcts) {
		t.Fatalf("%s has %d percentiles, want %d", name, len(got.GetPercentiles()), len(want.pcts))
	}
	for i, p := range got.GetPercentiles() {
		w := want.pcts[i]
		if p.GetQuantile() != w.q || !near(p.GetValue(), w.value) || p.GetLowerBound() != w.lower || p.GetUpperBound() != w.upper {
			t.Errorf("%s P%v = %v in [%v, %v], want %v in [%v, %v]", name, p.GetQuantile()*100, p.GetValue(), p.GetLowerBound(), p.GetUpperBound(), w.value, w.lower, w.upper)
		}
	}
}

func near(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func nearPtr(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return near(*a, *b)
}

// TestPercentilesMatchHistogramQuantile checks that the percentiles of a
// distribution are histogram.Quantile (histogram_quantile) of the bucket
// rates Prometheus returned, not of the scaled counts.
func TestPercentilesMatchHistogramQuantile(t *testing.T) {
	fake := fleetFake(t, defaultBuilder("5m"))
	src := newTestSource(t, fake.URL, func(c *Config) { c.Quantiles = []float64{0.1, 0.5, 0.9, 0.999} })
	obs, err := src.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string][]histogram.Bucket{
		"vllm-a:8000":    buckets(0.1, 0.5, 0.5, 1.5, 1, 1.8, inf, 2),
		"vllm-b:8000":    buckets(0.5, 0.05, 1, 0.1, inf, 0.1),
		"sglang-a:30000": buckets(1, 0, 2, 1, 4, 2, inf, 2),
	}
	for _, o := range obs {
		bs, ok := rates[o.Node.ID]
		if !ok {
			continue
		}
		for _, p := range o.Metrics.GetTtft().GetPercentiles() {
			e := histogram.Quantile(p.GetQuantile(), bs)
			if p.GetValue() != e.Value || p.GetLowerBound() != e.Lower || p.GetUpperBound() != e.Upper {
				t.Errorf("%s P%v = %v [%v, %v], histogram_quantile gives %v [%v, %v]",
					o.Node.ID, p.GetQuantile(), p.GetValue(), p.GetLowerBound(), p.GetUpperBound(), e.Value, e.Lower, e.Upper)
			}
		}
	}
}

// buckets makes buckets from upper bound, count pairs.
func buckets(pairs ...float64) []histogram.Bucket {
	var out []histogram.Bucket
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, histogram.Bucket{UpperBound: pairs[i], Count: pairs[i+1]})
	}
	return out
}

// TestWindowOffset: an on-demand window reads the whole fleet at
// now − offset, once for every node asked about.
func TestWindowOffset(t *testing.T) {
	fake := fleetFake(t, defaultBuilder("1h"))
	src := newTestSource(t, fake.URL, nil)
	m, err := src.Window(context.Background(), "vllm-a:8000", "60m", 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The fixtures are rates: over 1h the counts are × 3600. "60m" is read
	// (and answered) as "1h".
	if m.GetNode() != "vllm-a:8000" || m.GetWindow() != "1h" || m.GetTtft().GetCount() != 7200 {
		t.Errorf("got node %q window %q ttft count %v", m.GetNode(), m.GetWindow(), m.GetTtft().GetCount())
	}
	sent := fake.Seen()
	at := strconv.FormatInt(testNow.Add(-30*time.Minute).Unix(), 10)
	for _, q := range sent {
		if strings.TrimSuffix(q.At, ".000") != at {
			t.Errorf("query at %q, want now − offset %s", q.At, at)
		}
		if strings.Contains(q.Expr, `instance="`) {
			t.Errorf("fleet-wide read with a node matcher: %s", q.Expr)
		}
	}
	// Another node, and the same window spelled otherwise: no query.
	if m, err := src.Window(context.Background(), "sglang-a:30000", "1h", 30*time.Minute); err != nil || m.GetNode() != "sglang-a:30000" {
		t.Errorf("second node: %v, %v", m.GetNode(), err)
	}
	if n := len(fake.Seen()); n != len(sent) {
		t.Errorf("a second node of the same window sent %d more queries, want 0", n-len(sent))
	}
	if _, err := src.Window(context.Background(), "nope:1", "1h", 30*time.Minute); !errors.Is(err, source.ErrUnknownNode) {
		t.Errorf("unknown node: err = %v, want ErrUnknownNode", err)
	}
	for _, bad := range []string{"", "a\nb", "x\x00", string([]byte{0xff}), strings.Repeat("x", 2000)} {
		if _, err := src.Window(context.Background(), bad, "1h", 0); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("node %q: err = %v, want ErrInvalidValue", bad, err)
		}
	}
	if _, err := src.Window(context.Background(), "vllm-a:8000", "1h", -time.Second); err == nil {
		t.Error("negative offset accepted")
	}
	if _, err := src.Window(context.Background(), "vllm-a:8000", "bogus", 0); err == nil {
		t.Error("bad window accepted")
	}
}

func TestRefreshFailures(t *testing.T) {
	unavailable := canned{Status: http.StatusServiceUnavailable, Body: []byte("prometheus is restarting")}
	t.Run("prometheus down", func(t *testing.T) {
		fake := newFakeProm(t, nil)
		url := fake.URL
		fake.Close()
		_, err := newTestSource(t, url, nil).Refresh(context.Background(), "5m")
		if !errors.Is(err, ErrNoData) {
			t.Errorf("err = %v, want ErrNoData", err)
		}
	})
	t.Run("every query refused", func(t *testing.T) {
		fake := newFakeProm(t, nil)
		fake.SetMissing(unavailable)
		_, err := newTestSource(t, fake.URL, nil).Refresh(context.Background(), "5m")
		if !errors.Is(err, ErrNoData) {
			t.Errorf("err = %v, want ErrNoData", err)
		}
	})
	t.Run("data queries refused", func(t *testing.T) {
		// Nodes are found, then Prometheus goes away: no partial garbage.
		bodies := fixtureBodies(t, "testdata/fleet", plan(t, defaultBuilder("5m"), engine.Engines()...))
		for expr := range bodies {
			if !strings.Contains(expr, "timestamp(") {
				delete(bodies, expr)
			}
		}
		fake := newFakeProm(t, bodies)
		fake.SetMissing(unavailable)
		_, err := newTestSource(t, fake.URL, nil).Refresh(context.Background(), "5m")
		if !errors.Is(err, ErrNoData) {
			t.Errorf("err = %v, want ErrNoData", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		fake := fleetFake(t, defaultBuilder("5m"))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := newTestSource(t, fake.URL, nil).Refresh(ctx, "5m")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("deadline per query", func(t *testing.T) {
		block := make(chan struct{})
		fake := newFakeProm(t, nil)
		fake.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block })
		defer close(block)
		start := time.Now()
		_, err := newTestSource(t, fake.URL, func(c *Config) { c.Timeout = 100 * time.Millisecond }).Refresh(context.Background(), "5m")
		if !errors.Is(err, ErrNoData) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want ErrNoData wrapping a deadline", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("refresh took %v despite the 100ms query timeout", d)
		}
	})
}

func TestLifetime(t *testing.T) {
	b := defaultBuilder("")
	qs := plan(t, b, llmdiagv1.Engine_ENGINE_VLLM)
	bodies := map[string]canned{}
	A := []string{"instance", "vllm-a:8000"}
	for _, q := range qs {
		var ss []fakeSample
		switch {
		case q.shape == shapeIdentity:
			ss = []fakeSample{{append(A, "engine", "0", "model_name", "m"), "1767225599"}}
		case q.shape == shapeCreated:
			// Counters started 1000 s before the evaluation.
			ss = []fakeSample{{A, "1767224600"}}
		case q.concept == engine.GenerationTokens:
			ss = []fakeSample{{A, "50000"}}
		case q.concept == engine.TTFT && q.shape == shapeBuckets:
			ss = []fakeSample{{append(A, "le", "1"), "10"}, {append(A, "le", "+Inf"), "20"}}
		case q.concept == engine.TTFT && q.shape == shapeHistCount:
			ss = []fakeSample{{A, "20"}}
		case q.concept == engine.TTFT && q.shape == shapeHistSum:
			ss = []fakeSample{{A, "30"}}
		}
		if strings.Contains(q.expr, "rate(") {
			t.Errorf("lifetime query with rate: %s", q.expr)
		}
		bodies[q.expr] = canned{Status: http.StatusOK, Body: vectorBody(testNow, ss)}
	}
	fake := newFakeProm(t, bodies)
	obs, err := newTestSource(t, fake.URL, nil).Refresh(context.Background(), "lifetime")
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 1 {
		t.Fatalf("got %v", ids(obs))
	}
	m := obs[0].Metrics
	// Cumulative counts as they are; rates over the 1000 s since start.
	if !nearPtr(m.GenerationTokensPerSecond, f(50)) || m.PromptTokensPerSecond != nil || m.GetCovered() != nil {
		t.Errorf("generation %s prompt %s covered %v", testkit.Show(m.GenerationTokensPerSecond), testkit.Show(m.PromptTokensPerSecond), m.GetCovered())
	}
	d := m.GetTtft()
	if d.GetCount() != 20 || d.GetSum() != 30 || !slices.Equal(d.GetBucketCounts(), []float64{10, 20}) || d.GetPercentiles()[0].GetValue() != 1 {
		t.Errorf("ttft = %v", d)
	}
}

// TestOneNodeSeveralSeries checks per-replica KV arithmetic and engine
// choice for a node two engines report.
func TestKV(t *testing.T) {
	k := func(key string, v float64) keyed { return keyed{key: key, v: v} }
	tests := []struct {
		name              string
		usage, capa, used *replicas
		wantKV, wantCap   *float64
	}{
		{name: "used over capacity", used: &replicas{vs: []keyed{k("0", 100), k("1", 300)}}, capa: &replicas{vs: []keyed{k("0", 1000), k("1", 1000)}},
			usage: &replicas{agg: engine.CapacityWeighted, vs: []keyed{k("0", 0.9)}}, wantKV: f(0.2), wantCap: f(2000)},
		{name: "capacity weighted", usage: &replicas{agg: engine.CapacityWeighted, vs: []keyed{k("0", 0.2), k("1", 0.6)}},
			capa: &replicas{vs: []keyed{k("0", 16000), k("1", 48000)}}, wantKV: f(0.5), wantCap: f(64000)},
		{name: "capacity of one replica unknown: mean", usage: &replicas{agg: engine.CapacityWeighted, vs: []keyed{k("0", 0.2), k("1", 0.6)}},
			capa: &replicas{vs: []keyed{k("0", 16000)}}, wantKV: f(0.4), wantCap: f(16000)},
		{name: "not capacity weighted: mean", usage: &replicas{agg: engine.Mean, vs: []keyed{k("0", 0.2), k("1", 0.6)}},
			capa: &replicas{vs: []keyed{k("0", 16000), k("1", 48000)}}, wantKV: f(0.4), wantCap: f(64000)},
		{name: "zero capacity: usage gauge", used: &replicas{vs: []keyed{k("", 5)}}, capa: &replicas{vs: []keyed{k("", 0)}},
			usage: &replicas{agg: engine.CapacityWeighted, vs: []keyed{k("", 0.3)}}, wantKV: f(0.3), wantCap: f(0)},
		{name: "nothing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := &nodeState{reps: make([]*replicas, int(engine.KVUsedTokens)+1)}
			ns.reps[engine.KVUsage], ns.reps[engine.KVCapacityTokens], ns.reps[engine.KVUsedTokens] = tc.usage, tc.capa, tc.used
			kv, capa := ns.kv()
			if !nearPtr(kv, tc.wantKV) || !nearPtr(capa, tc.wantCap) {
				t.Errorf("kv %s capacity %s, want %s %s", testkit.Show(kv), testkit.Show(capa), testkit.Show(tc.wantKV), testkit.Show(tc.wantCap))
			}
		})
	}
}
