package sim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sim"
)

func newScenario(t testing.TB, name string, seed int64) *sim.Fleet {
	t.Helper()
	cfg := simtest.Scenario(t, name, seed)
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestScenarios(t *testing.T) {
	want := map[string][]string{
		"seed":          {"deepseek-v4-0", "deepseek-v4-1", "glm-4.6-0", "glm-4.6-1", "kimi-k2.6-0"},
		"kv-exhausted":  {"kimi-k2.6-0", "kimi-k2.6-1"},
		"overloaded":    {"glm-4.6-0", "glm-4.6-1"},
		"burst":         {"kimi-k2.6-0", "deepseek-v4-0"},
		"prefill-heavy": {"kimi-k2.6-0", "kimi-k2.6-1"},
		"down":          {"glm-4.6-0", "glm-4.6-1", "kimi-k2.6-0"},
		"schemas": {"vllm-0", "vllm-otel-0", "sglang-0", "sglang-legacy-0",
			"trtllm-0", "triton-0", "tgi-0", "dynamo-0"},
		"idle-then-overload": {"qwen3-8b-0", "qwen3-8b-1"},
		"kv-flap":            {"qwen3-8b-0"},
		"kv-offload":         {"qwen3-8b-0"},
		"spec-decode":        {"qwen3-8b-0"},
		"lora-contention":    {"qwen3-8b-0"},
		"slo-burn":           {"kimi-k2.6-0"},
		"gpu-throttled":      {"glm-4.6-0", "glm-4.6-1"},
		"gpu-xid":            {"kimi-k2.6-0", "kimi-k2.6-1"},
		"gpu-xid-old":        {"kimi-k2.6-0", "kimi-k2.6-1"},
		"disaggregated":      {"kimi-k2.6-prefill-0", "kimi-k2.6-decode-0"},
		"stalled":            {"qwen3-8b-0", "qwen3-8b-1"},
		"gpu-bandwidth":      {"llama-3.3-70b-0", "llama-3.3-70b-1"},
	}
	names := sim.Scenarios()
	if len(names) != len(want) {
		t.Fatalf("Scenarios() = %v, want %d names", names, len(want))
	}
	for _, name := range names {
		cfg, err := sim.Scenario(name, 7)
		if err != nil {
			t.Fatalf("Scenario(%q): %v", name, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("Scenario(%q) invalid: %v", name, err)
		}
		var ids []string
		for _, n := range cfg.Nodes {
			ids = append(ids, n.ID)
		}
		if !slices.Equal(ids, want[name]) {
			t.Errorf("Scenario(%q) nodes = %v, want %v", name, ids, want[name])
		}
		if cfg.Seed != 7 || cfg.Name != name {
			t.Errorf("Scenario(%q) seed/name = %d/%q", name, cfg.Seed, cfg.Name)
		}
	}
	if _, err := sim.Scenario("nope", 1); err == nil {
		t.Error("Scenario(nope) did not fail")
	}
}

func TestValidate(t *testing.T) {
	base := simtest.Scenario(t, "burst", 1)
	tests := []struct {
		name   string
		mutate func(*sim.Config)
		want   string
	}{
		{"ok", func(*sim.Config) {}, ""},
		{"no nodes", func(c *sim.Config) { c.Nodes = nil }, "no nodes"},
		{"bad id", func(c *sim.Config) { c.Nodes[0].ID = "a b" }, "invalid id"},
		{"duplicate", func(c *sim.Config) { c.Nodes = append(c.Nodes, c.Nodes[0]) }, "duplicate"},
		{"engine", func(c *sim.Config) { c.Nodes[0].Engine = "llama.cpp" }, "engine"},
		{"scheduler", func(c *sim.Config) { c.Nodes[0].Scheduler = "fifo" }, "scheduler"},
		{"model len", func(c *sim.Config) { c.Nodes[0].Perf.MaxModelLen = 1 << 30 }, "exceeds KV capacity"},
		{"rate", func(c *sim.Config) { c.Nodes[0].Workload.Rate = -1 }, "rate"},
		{"lengths", func(c *sim.Config) { c.Nodes[0].Workload.Output = nil }, "no classes"},
		{"burst", func(c *sim.Config) { c.Nodes[0].Workload.Burst.Length = time.Hour }, "burst"},
		{"window", func(c *sim.Config) { c.Nodes[0].Down = []sim.Window{{Start: 2, End: 1}} }, "down window"},
		{"prefix", func(c *sim.Config) { c.Nodes[0].Workload.PrefixCacheHit = 1 }, "prefix cache"},
		{"step", func(c *sim.Config) { c.Nodes[0].Perf.StepBase = 0 }, "step base"},
		{"prefill attention", func(c *sim.Config) { c.Nodes[0].Perf.PrefillPerKContext = -1 }, "per-context costs"},
		{"sessions and rate", func(c *sim.Config) { c.Nodes[0].Workload.Sessions = 4 }, "sessions need"},
		{"sessions", func(c *sim.Config) {
			w := &c.Nodes[0].Workload
			w.Rate, w.Burst, w.Sessions, w.Think = 0, nil, 4, time.Second
		}, ""},
		{"think", func(c *sim.Config) {
			w := &c.Nodes[0].Workload
			w.Rate, w.Burst, w.Sessions = 0, nil, 4
		}, "sessions need"},
		{"shared prefix", func(c *sim.Config) { c.Nodes[0].Workload.SharedPrefix = 1 << 20 }, "shared prefix"},
		{"phases", func(c *sim.Config) {
			c.Nodes[0].Workload.Phases = []sim.Phase{{At: time.Minute, Rate: 2}, {At: 2 * time.Minute}}
		}, ""},
		{"phase order", func(c *sim.Config) {
			c.Nodes[0].Workload.Phases = []sim.Phase{{At: time.Minute, Rate: 2}, {At: time.Minute}}
		}, "increasing times"},
		{"phase rate", func(c *sim.Config) { c.Nodes[0].Workload.Phases = []sim.Phase{{Rate: math.NaN()}} }, "phase 0: rate"},
		{"phase sessions with burst", func(c *sim.Config) {
			c.Nodes[0].Workload.Phases = []sim.Phase{{Sessions: 2, Think: time.Second}}
		}, "phase 0: sessions need"},
		{"phase think", func(c *sim.Config) {
			w := &c.Nodes[0].Workload
			w.Burst, w.Phases = nil, []sim.Phase{{At: time.Second, Sessions: 2}}
		}, "phase 0: sessions need"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.Nodes = slices.Clone(base.Nodes)
			b := *cfg.Nodes[0].Workload.Burst
			cfg.Nodes[0].Workload.Burst = &b
			tt.mutate(&cfg)
			_, err := sim.New(cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestDeterminism checks that a seed fixes the exposition, however the
// simulated time is cut into steps, and that another seed changes it; with
// the schemas scenario, in every schema.
func TestDeterminism(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    time.Duration
	}{{"seed", 5 * time.Minute}, {"burst", 5 * time.Minute}, {"schemas", 40 * time.Second},
		{"idle-then-overload", 11 * time.Minute}, {"kv-flap", 4 * time.Minute}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b, c := newScenario(t, tt.name, 42), newScenario(t, tt.name, 42), newScenario(t, tt.name, 43)
			a.Step(tt.d)
			for range int(tt.d / time.Second) {
				b.Step(time.Second)
			}
			c.Step(tt.d)
			for _, id := range a.Nodes() {
				ma, _ := a.Metrics(id)
				mb, _ := b.Metrics(id)
				mc, _ := c.Metrics(id)
				if !bytes.Equal(ma, mb) {
					t.Errorf("%s: same seed, different exposition after %v", id, tt.d)
				}
				if bytes.Equal(ma, mc) {
					t.Errorf("%s: seeds 42 and 43 gave the same exposition", id)
				}
			}
		})
	}
}

// testSeed is the seed of the physics tests: 1, or SIM_SEED for
// robustness sweeps (SIM_SEED=n go test -run 'Physics|Scenarios').
func testSeed() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SIM_SEED"), 10, 64); err == nil {
		return v
	}
	return 1
}

// run warms a scenario up and measures it, sampling every 5 seconds.
func run(t *testing.T, name string, warmup, d time.Duration) (*sim.Fleet, map[string]*figures) {
	t.Helper()
	f := newScenario(t, name, testSeed())
	f.Step(warmup)
	figs := measure(t, f, d, 5*time.Second)
	for _, id := range sortedKeys(figs) {
		t.Logf("%s %s: %v", name, id, figs[id])
	}
	return f, figs
}

func check(t *testing.T, what string, ok bool, got any) {
	t.Helper()
	if !ok {
		t.Errorf("%s: got %v", what, got)
	}
}

// TestSeedPhysics checks the seed scenario's fleet after SeedWarmup, in
// each of four consecutive 5-minute windows (llmdiag may read any of them)
// and then five 1-minute windows. The DeepSeek DP nodes are decode-bound:
// KV ≈ 0.3, queue ≈ 0, ~40 running, prompt ≈ 20,000 tok/s, generation
// ≈ 120 tok/s, so ~3 tok/s per request, an E2E P99 of 10–15 minutes, a
// TTFT P99 under 10 s and no preemptions. GLM is healthy, and Kimi's tensor
// parallelism decodes each request faster at a lower concurrency.
func TestSeedPhysics(t *testing.T) {
	t.Parallel()
	f := newScenario(t, "seed", testSeed())
	f.Step(sim.SeedWarmup)
	deepseeks := []string{"deepseek-v4-0", "deepseek-v4-1"}
	m, s := 5*time.Minute, time.Minute
	windows := measureWindows(t, f, 5*time.Second, m, m, m, m, s, s, s, s, s)
	for w, figs := range windows[:4] {
		at := fmt.Sprintf("5m window %d: ", w)
		for _, id := range sortedKeys(figs) {
			t.Logf("%s%s: %v", at, id, figs[id])
		}
		for _, id := range deepseeks {
			d, what := figs[id], at+id
			check(t, what+" KV mean in [0.2,0.4]", d.kvMean >= 0.2 && d.kvMean <= 0.4, d.kvMean)
			check(t, what+" KV max < 0.6", d.kvMax < 0.6, d.kvMax)
			check(t, what+" queue empty in ≥40% of samples", d.queueZero >= 0.4, d.queueZero)
			check(t, what+" queue > 5 in ≤5% of samples", d.queueOver5 <= 0.05, d.queueOver5)
			check(t, what+" queue max ≤ 12", d.queueMax <= 12, d.queueMax)
			check(t, what+" queue/running mean < 0.1", d.queueMean/d.runningMean < 0.1, d.queueMean/d.runningMean)
			check(t, what+" running mean in [25,60]", d.runningMean >= 25 && d.runningMean <= 60, d.runningMean)
			check(t, what+" prompt rate in [15k,25k] tok/s", d.promptRate >= 15000 && d.promptRate <= 25000, d.promptRate)
			check(t, what+" generation rate in [75,175] tok/s", d.genRate >= 75 && d.genRate <= 175, d.genRate)
			check(t, what+" prompt/generation ratio ≥ 80", d.promptRate/d.genRate >= 80, d.promptRate/d.genRate)
			check(t, what+" per-request decode < 6 tok/s", d.perRequest() < 6, d.perRequest())
			check(t, what+" no preemptions", d.preemptions == 0, d.preemptions)
			check(t, what+" E2E P50 ≥ 8s", d.e2eP50 >= 8, d.e2eP50)
			check(t, what+" E2E P99 in [6,25] min", d.e2eP99 >= 360 && d.e2eP99 <= 1500, d.e2eP99)
			check(t, what+" TTFT P99 < 10s", d.ttftP99 < 10, d.ttftP99)
		}
		for _, id := range []string{"glm-4.6-0", "glm-4.6-1"} {
			g, what := figs[id], at+id
			check(t, what+" KV mean in [0.15,0.5]", g.kvMean >= 0.15 && g.kvMean <= 0.5, g.kvMean)
			check(t, what+" KV max < 0.9", g.kvMax < 0.9, g.kvMax)
			check(t, what+" queue empty in ≥80% of samples", g.queueZero >= 0.8, g.queueZero)
			check(t, what+" no retractions", g.preemptions == 0, g.preemptions)
			check(t, what+" ITL P50 < 30ms", g.itlP50 < 0.03, g.itlP50)
			check(t, what+" TTFT P99 < 5s", g.ttftP99 < 5, g.ttftP99)
		}
		k, what := figs["kimi-k2.6-0"], at+"kimi-k2.6-0"
		check(t, what+" queue empty in ≥90% of samples", k.queueZero >= 0.9, k.queueZero)
		check(t, what+" no preemptions", k.preemptions == 0, k.preemptions)
		for _, id := range deepseeks {
			d := figs[id]
			check(t, what+" TPOT < "+id+" TPOT / 3", k.tpotMean < d.tpotMean/3, [2]float64{k.tpotMean, d.tpotMean})
			check(t, what+" per-request decode > 3× "+id+"'s", k.perRequest() > 3*d.perRequest(), [2]float64{k.perRequest(), d.perRequest()})
			check(t, what+" running < "+id+"'s / 2", k.runningMean < d.runningMean/2, [2]float64{k.runningMean, d.runningMean})
		}
	}
	// A 1-minute window already shows slow decode and, unless no long
	// generation happened to finish in it (~0.2% of windows), a long E2E
	// tail.
	short := map[string]int{}
	for w, figs := range windows[4:] {
		at := fmt.Sprintf("1m window %d: ", w)
		for _, id := range deepseeks {
			d, what := figs[id], at+id
			t.Logf("%s: %v", what, d)
			check(t, what+" per-request decode < 10 tok/s", d.perRequest() < 10 && d.perRequestEnd() < 10, [2]float64{d.perRequest(), d.perRequestEnd()})
			check(t, what+" TTFT P99 < 10s", d.ttftP99 < 10, d.ttftP99)
			check(t, what+" no preemptions", d.preemptions == 0, d.preemptions)
			if d.e2eP99 <= 90 {
				short[id]++
			}
		}
	}
	for _, id := range deepseeks {
		check(t, id+" E2E P99 > 90s in ≥4 of 5 1-minute windows", short[id] <= 1, short[id])
	}
}

// TestSessionsAndSharedPrefix checks closed-loop traffic (never more
// requests in flight than sessions) and a shared prompt prefix: counted in
// the prompt tokens like any prompt, held once per core in KV.
func TestSessionsAndSharedPrefix(t *testing.T) {
	node := func(id string, shared, rest int, hit float64) sim.Node {
		n := sim.Node{ID: id, Model: "m", Engine: sim.VLLM,
			Perf: sim.Perf{StepBase: 20 * time.Millisecond, StepPerSeq: time.Millisecond,
				PrefillTokensPerSec: 20000, MaxBatchedTokens: 4096, MaxNumSeqs: 64, KVCapacityTokens: 1 << 20},
			Workload: sim.Workload{Sessions: 12, Think: 2 * time.Second, SharedPrefix: shared,
				Prompt: sim.LogNormal(float64(rest), 0), Output: sim.LogNormal(300, 0), PrefixCacheHit: hit}}
		return n
	}
	// The same 9,000-token prompts, computing the same 1,000 tokens each:
	// 8,000 of them a shared prefix, or cached per request.
	cfg := sim.Config{Seed: 1, Nodes: []sim.Node{node("shared", 8000, 1000, 0), node("private", 0, 9000, 8000.0/9000)}}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(time.Minute)
	figs := measure(t, f, 5*time.Minute, time.Second)
	sh, pr := figs["shared"], figs["private"]
	t.Logf("shared: %v\nprivate: %v", sh, pr)
	for id, fg := range figs {
		inFlight := 0
		for _, s := range fg.samples {
			inFlight = max(inFlight, s.Running+s.Waiting)
		}
		check(t, id+" in flight ≤ 12 sessions", inFlight <= 12, inFlight)
		check(t, id+" running mean ≥ 6", fg.runningMean >= 6, fg.runningMean)
		check(t, id+" TTFT P50 < 1s", fg.ttftP50 < 1, fg.ttftP50)
	}
	perReq := func(fg *figures) float64 { return fg.promptRate / (fg.genRate / 300) }
	check(t, "prompt tokens per request 9,000 on both", math.Abs(perReq(sh)-9000) < 200 && math.Abs(perReq(pr)-9000) < 200,
		[2]float64{perReq(sh), perReq(pr)})
	kv := func(fg *figures) float64 { return fg.kvMean * (1 << 20) / fg.runningMean }
	// Per running request: ~1,150 tokens of its own plus a share of the
	// 8,000-token prefix, against ~9,150 each without sharing.
	check(t, "shared KV per running request < 2,500 tokens", kv(sh) < 2500, kv(sh))
	check(t, "private KV per running request > 8,500 tokens", kv(pr) > 8500, kv(pr))
}

// TestFailureScenarios checks each failure scenario shows its signature.
func TestFailureScenarios(t *testing.T) {
	fraction := func(ss []sim.NodeStats, ok func(sim.NodeStats) bool) float64 {
		n := 0
		for _, s := range ss {
			if ok(s) {
				n++
			}
		}
		return float64(n) / float64(len(ss))
	}
	tests := []struct {
		scenario string
		check    func(t *testing.T, figs map[string]*figures)
	}{
		{"kv-exhausted", func(t *testing.T, figs map[string]*figures) {
			k := figs["kimi-k2.6-0"]
			high := fraction(k.samples, func(s sim.NodeStats) bool { return s.KVUsage >= 0.95 })
			check(t, "KV ≥ 0.95 in ≥70% of samples", high >= 0.7, high)
			check(t, "KV mean ≥ 0.95", k.kvMean >= 0.95, k.kvMean)
			half := len(k.samples) / 2
			mid, last := k.samples[half].Preemptions, k.samples[len(k.samples)-1].Preemptions
			first := k.samples[0].Preemptions
			check(t, "preemptions rising in both halves", mid > first && last > mid, [3]uint64{first, mid, last})
			p := figs["kimi-k2.6-1"]
			check(t, "peer KV max < 0.9", p.kvMax < 0.9, p.kvMax)
			check(t, "peer no preemptions", p.preemptions == 0, p.preemptions)
		}},
		{"overloaded", func(t *testing.T, figs map[string]*figures) {
			g := figs["glm-4.6-0"]
			high := fraction(g.samples, func(s sim.NodeStats) bool { return s.Waiting > 50 && s.Waiting > 2*s.Running })
			check(t, "queue > 50 and > 2×running in ≥90% of samples", high >= 0.9, high)
			check(t, "KV max < 0.95", g.kvMax < 0.95, g.kvMax)
			check(t, "no retractions", g.preemptions == 0, g.preemptions)
			check(t, "requests abandoned", g.aborted > 0, g.aborted)
			check(t, "queue below its timeout plateau", g.queueMax < 1500, g.queueMax)
			check(t, "peer queue empty in ≥80% of samples", figs["glm-4.6-1"].queueZero >= 0.8, figs["glm-4.6-1"].queueZero)
		}},
		{"burst", func(t *testing.T, figs map[string]*figures) {
			k := figs["kimi-k2.6-0"]
			check(t, "queue empty in ≥60% of samples", k.queueZero >= 0.6, k.queueZero)
			check(t, "no preemptions", k.preemptions == 0, k.preemptions)
			check(t, "KV max < 0.95", k.kvMax < 0.95, k.kvMax)
			// Every 2-minute period has a spike and ends drained.
			per := int((2 * time.Minute) / (5 * time.Second))
			for p := 0; p+per <= len(k.samples); p += per {
				peak, drained := 0, false
				for _, s := range k.samples[p : p+per] {
					peak = max(peak, s.Waiting)
				}
				for _, s := range k.samples[p+per/2 : p+per] {
					drained = drained || s.Waiting == 0
				}
				check(t, "period "+strconv.Itoa(p/per)+" spikes ≥ 5 and drains to 0", peak >= 5 && drained, [2]any{peak, drained})
			}
		}},
		{"prefill-heavy", func(t *testing.T, figs map[string]*figures) {
			k, p := figs["kimi-k2.6-0"], figs["kimi-k2.6-1"]
			check(t, "TTFT P99 ≥ 10s", k.ttftP99 >= 10, k.ttftP99)
			check(t, "TTFT P99 ≥ 10× peer's", k.ttftP99 >= 10*p.ttftP99, [2]float64{k.ttftP99, p.ttftP99})
			check(t, "queue mean < 1", k.queueMean < 1, k.queueMean)
			check(t, "queue empty in ≥70% of samples", k.queueZero >= 0.7, k.queueZero)
			check(t, "KV max < 0.9", k.kvMax < 0.9, k.kvMax)
			check(t, "no preemptions", k.preemptions == 0, k.preemptions)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			t.Parallel()
			_, figs := run(t, tt.scenario, 5*time.Minute, 15*time.Minute)
			tt.check(t, figs)
		})
	}
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// bounds lists a histogram's finite bucket bounds; it must end with +Inf.
func bounds(m *dto.Metric) []float64 {
	var b []float64
	for _, x := range m.GetHistogram().GetBucket() {
		b = append(b, x.GetUpperBound())
	}
	if len(b) == 0 || !math.IsInf(b[len(b)-1], 1) {
		return append(b, math.NaN()) // never equal to a wanted list
	}
	return b[:len(b)-1]
}

// TestExposition checks names, types, labels and buckets against the
// engines' own (docs/engine-metrics.md).
func TestExposition(t *testing.T) {
	f := newScenario(t, "seed", 1)
	f.Step(2 * time.Minute)

	vllmLatency := []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	vllmITL := []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	vllm := map[string]struct {
		typ     dto.MetricType
		buckets []float64
	}{
		"vllm:num_requests_waiting":                  {dto.MetricType_GAUGE, nil},
		"vllm:num_requests_running":                  {dto.MetricType_GAUGE, nil},
		"vllm:kv_cache_usage_perc":                   {dto.MetricType_GAUGE, nil},
		"vllm:prompt_tokens_total":                   {dto.MetricType_COUNTER, nil},
		"vllm:generation_tokens_total":               {dto.MetricType_COUNTER, nil},
		"vllm:num_preemptions_total":                 {dto.MetricType_COUNTER, nil},
		"vllm:request_success_total":                 {dto.MetricType_COUNTER, nil},
		"vllm:time_to_first_token_seconds":           {dto.MetricType_HISTOGRAM, []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}},
		"vllm:e2e_request_latency_seconds":           {dto.MetricType_HISTOGRAM, vllmLatency},
		"vllm:request_queue_time_seconds":            {dto.MetricType_HISTOGRAM, vllmLatency},
		"vllm:inter_token_latency_seconds":           {dto.MetricType_HISTOGRAM, vllmITL},
		"vllm:request_time_per_output_token_seconds": {dto.MetricType_HISTOGRAM, vllmITL},
	}
	mfs := scrape(t, f, "deepseek-v4-0")
	for name, want := range vllm {
		mf := mfs[name]
		if mf == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if mf.GetType() != want.typ {
			t.Errorf("%s type %v, want %v", name, mf.GetType(), want.typ)
		}
		engines := map[string]bool{}
		for _, m := range mf.GetMetric() {
			l := labelsOf(m)
			wantLabels := []string{"engine", "model_name"}
			if name == "vllm:request_success_total" {
				wantLabels = []string{"engine", "finished_reason", "model_name"}
			}
			if !slices.Equal(sortedKeys(l), wantLabels) || l["model_name"] != "deepseek-v4" {
				t.Errorf("%s labels %v", name, l)
			}
			engines[l["engine"]] = true
			if want.buckets != nil && !slices.Equal(bounds(m), want.buckets) {
				t.Errorf("%s buckets %v, want %v", name, bounds(m), want.buckets)
			}
		}
		if len(engines) != 8 {
			t.Errorf("%s has %d engine values, want 8 (DP=8)", name, len(engines))
		}
	}
	reasons := map[string]bool{}
	for _, m := range mfs["vllm:request_success_total"].GetMetric() {
		reasons[labelsOf(m)["finished_reason"]] = true
	}
	if len(reasons) != 4 || !reasons["stop"] || !reasons["length"] || !reasons["abort"] || !reasons["error"] {
		t.Errorf("finished_reason values %v", reasons)
	}
	info := mfs["vllm:cache_config_info"]
	if info == nil || len(info.GetMetric()) != 8 {
		t.Fatalf("vllm:cache_config_info: %v", info)
	}
	if l := labelsOf(info.GetMetric()[0]); l["block_size"] != "64" || l["num_gpu_blocks"] != "2048" || l["engine"] == "" {
		t.Errorf("cache_config_info labels %v", l)
	}

	sched := []string{"engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"}
	sglang := map[string]struct {
		typ     dto.MetricType
		labels  []string
		buckets []float64
	}{
		"sglang:num_queue_reqs":               {dto.MetricType_GAUGE, sched, nil},
		"sglang:num_running_reqs":             {dto.MetricType_GAUGE, sched, nil},
		"sglang:token_usage":                  {dto.MetricType_GAUGE, sched, nil},
		"sglang:num_used_tokens":              {dto.MetricType_GAUGE, sched, nil},
		"sglang:max_total_num_tokens":         {dto.MetricType_GAUGE, sched, nil},
		"sglang:num_retracted_requests_total": {dto.MetricType_COUNTER, sched, nil},
		"sglang:queue_time_seconds": {dto.MetricType_HISTOGRAM, sched, []float64{0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
			200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}},
		"sglang:prompt_tokens_total":         {dto.MetricType_COUNTER, []string{"model_name"}, nil},
		"sglang:generation_tokens_total":     {dto.MetricType_COUNTER, []string{"model_name"}, nil},
		"sglang:time_to_first_token_seconds": {dto.MetricType_HISTOGRAM, []string{"model_name"}, []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}},
		"sglang:inter_token_latency_seconds": {dto.MetricType_HISTOGRAM, []string{"model_name"}, []float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8}},
		"sglang:e2e_request_latency_seconds": {dto.MetricType_HISTOGRAM, []string{"model_name"}, []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}},
	}
	mfs = scrape(t, f, "glm-4.6-0")
	for name, want := range sglang {
		mf := mfs[name]
		if mf == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if mf.GetType() != want.typ || len(mf.GetMetric()) != 1 {
			t.Errorf("%s type %v with %d series", name, mf.GetType(), len(mf.GetMetric()))
			continue
		}
		m := mf.GetMetric()[0]
		l := labelsOf(m)
		if !slices.Equal(sortedKeys(l), want.labels) || l["model_name"] != "glm-4.6" {
			t.Errorf("%s labels %v, want %v", name, l, want.labels)
		}
		if len(want.labels) > 1 && (l["engine_type"] != "unified" || l["tp_rank"] != "0") {
			t.Errorf("%s labels %v", name, l)
		}
		if want.buckets != nil && !slices.Equal(bounds(m), want.buckets) {
			t.Errorf("%s buckets %v, want %v", name, bounds(m), want.buckets)
		}
	}
	if v := mfs["sglang:max_total_num_tokens"].GetMetric()[0].GetGauge().GetValue(); v != 300000 {
		t.Errorf("sglang:max_total_num_tokens = %v", v)
	}
	for name := range mfs {
		if strings.HasPrefix(name, "vllm:") {
			t.Errorf("SGLang node exposes %s", name)
		}
	}
}

// TestGarbage checks that garbled bodies do not parse, in every schema
// (the schemas scenario at its start: histograms, if any, are empty).
func TestGarbage(t *testing.T) {
	burst := newScenario(t, "burst", 1)
	burst.Step(time.Minute)
	for _, f := range []*sim.Fleet{burst, newScenario(t, "schemas", 1)} {
		for _, id := range f.Nodes() {
			for _, g := range []sim.Garbage{sim.GarbageTruncated, sim.GarbageJunk} {
				if err := f.SetGarbage(id, g); err != nil {
					t.Fatal(err)
				}
				body, err := f.Metrics(id)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := parseErr(body); err == nil {
					t.Errorf("%s: garbage mode %d parsed cleanly:\n%s", id, g, body)
				}
			}
		}
	}
	if err := burst.SetGarbage("nope", sim.GarbageJunk); !errors.Is(err, sim.ErrUnknownNode) {
		t.Errorf("SetGarbage(nope) = %v", err)
	}
}

// listen builds cfg's fleet on clk and binds its listeners; it returns the
// fleet and its (valid) fleet file.
func listen(t *testing.T, cfg sim.Config, clk sim.Clock) (*sim.Fleet, *fleet.File) {
	t.Helper()
	f, err := sim.New(cfg, sim.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ff := f.FleetFile()
	if err := ff.Validate(); err != nil {
		t.Fatalf("fleet file: %v", err)
	}
	return f, ff
}

func get(t *testing.T, u string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// TestServe runs the down scenario on loopback: URLs, scrapes, a node down
// from the start, SetDown both ways, the clock driving simulated time, and
// Start returning once ctx is cancelled.
func TestServe(t *testing.T) {
	cfg := simtest.Scenario(t, "down", 1)
	cfg.Warmup = time.Minute
	cfg.Speed = 60
	clk := testkit.NewClock(time.Unix(0, 0))
	clk.Add(time.Hour)
	f, ff := listen(t, cfg, clk)
	urls, dcgmURLs := map[string]string{}, map[string]string{}
	for _, n := range ff.Nodes {
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		if host := u.Hostname(); host != "127.0.0.1" || u.Port() == "0" || u.Path != "/metrics" {
			t.Errorf("%s: URL %s, want http://127.0.0.1:PORT/metrics", n.ID, n.URL)
		}
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
			t.Errorf("%s: not on loopback: %s", n.ID, n.URL)
		}
		urls[n.ID] = n.URL
		if d, err := url.Parse(n.DCGM); err != nil || d.Host != u.Host || d.Path != sim.DCGMPath {
			t.Errorf("%s: DCGM URL %s, want http://%s%s", n.ID, n.DCGM, u.Host, sim.DCGMPath)
		}
		dcgmURLs[n.ID] = n.DCGM
	}
	if e := ff.Nodes[0]; e.Engine != "sglang" || e.Model != "glm-4.6" || e.Profile.TensorParallel != 8 {
		t.Errorf("fleet node 0 = %+v", e)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()

	testkit.Eventually(t, time.Minute, "warm-up", func() bool { return f.Now() >= cfg.Warmup })
	var (
		body []byte
		err  error
	)
	testkit.Eventually(t, time.Minute, "glm-4.6-0 to answer", func() bool {
		body, err = get(t, urls["glm-4.6-0"])
		return err == nil
	})
	if mfs := parse(t, body); mfs["sglang:num_running_reqs"] == nil {
		t.Error("glm-4.6-0 served no sglang:num_running_reqs")
	}
	// Its DCGM exporter answers on the same address: one series per GPU.
	if body, err := get(t, dcgmURLs["glm-4.6-0"]); err != nil {
		t.Errorf("glm-4.6-0 DCGM: %v", err)
	} else if mf := parse(t, body)["DCGM_FI_PROF_DRAM_ACTIVE"]; mf == nil || len(mf.GetMetric()) != 8 {
		t.Errorf("glm-4.6-0 DCGM: DCGM_FI_PROF_DRAM_ACTIVE %v, want 8 GPUs", mf)
	}
	if _, err := get(t, urls["glm-4.6-1"]); !refused(err) {
		t.Errorf("glm-4.6-1 (down from the start): err = %v, want connection refused", err)
	}
	if _, err := f.Metrics("glm-4.6-1"); !errors.Is(err, sim.ErrNodeDown) {
		t.Errorf("Metrics(glm-4.6-1) = %v, want ErrNodeDown", err)
	}
	if s, _ := f.Stats("glm-4.6-1"); !s.Down {
		t.Error("Stats(glm-4.6-1).Down = false")
	}

	// The clock drives simulated time at Speed.
	before := f.Now()
	clk.Add(time.Second)
	testkit.Eventually(t, time.Minute, "a simulated minute", func() bool { return f.Now() >= before+time.Minute })

	if err := f.SetDown("kimi-k2.6-0", true); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, urls["kimi-k2.6-0"]); !refused(err) {
		t.Errorf("kimi-k2.6-0 set down: err = %v, want connection refused", err)
	}
	if err := f.SetDown("kimi-k2.6-0", false); err != nil {
		t.Fatal(err)
	}
	if body, err := get(t, urls["kimi-k2.6-0"]); err != nil || parse(t, body)["vllm:num_requests_running"] == nil {
		t.Errorf("kimi-k2.6-0 back up: err = %v", err)
	}
	if err := f.SetGarbage("kimi-k2.6-0", sim.GarbageTruncated); err != nil {
		t.Fatal(err)
	}
	if body, err := get(t, urls["kimi-k2.6-0"]); err != nil {
		t.Errorf("garbage scrape: %v", err)
	} else if _, perr := parseErr(body); perr == nil {
		t.Error("truncated exposition parsed cleanly")
	}
	if err := f.SetDown("nope", true); !errors.Is(err, sim.ErrUnknownNode) {
		t.Errorf("SetDown(nope) = %v", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start did not return after cancel")
	}
	if _, err := get(t, urls["glm-4.6-0"]); !refused(err) {
		t.Errorf("after Start returned: err = %v, want connection refused", err)
	}
	if err := f.Start(context.Background()); err == nil {
		t.Error("second Start did not fail")
	}
}

// TestDownWindow checks a scheduled down window, measured from the end of
// warm-up.
func TestDownWindow(t *testing.T) {
	cfg := simtest.Scenario(t, "burst", 1)
	cfg.Warmup = time.Minute
	cfg.Nodes[0].Down = []sim.Window{{Start: time.Minute, End: 2 * time.Minute}}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := f.Nodes()[0]
	for _, step := range []struct {
		at   time.Duration
		down bool
	}{{90 * time.Second, false}, {2 * time.Minute, true}, {170 * time.Second, true}, {3 * time.Minute, false}} {
		f.Step(step.at - f.Now())
		_, err := f.Metrics(id)
		if got := errors.Is(err, sim.ErrNodeDown); got != step.down {
			t.Errorf("at %v: down = %v, want %v", step.at, got, step.down)
		}
	}
}
