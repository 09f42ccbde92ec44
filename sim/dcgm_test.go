package sim_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// gpuOf reads node id's DCGM exposition as llmdiag does.
func gpuOf(t *testing.T, f *sim.Fleet, id string) *llmdiagv1.GPUMetrics {
	t.Helper()
	body, err := f.DCGM(id)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := engine.Parse(bytes.NewReader(body), engine.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	g, warnings := engine.ExtractGPU(exp.Families)
	if g == nil || len(warnings) > 0 || len(exp.Warnings) > 0 {
		t.Fatalf("%s: GPU %v, warnings %q %q", id, g, warnings, exp.Warnings)
	}
	return g
}

// denseDecode is a dense 70B model on one H100, serving sessions with short
// prompts and long answers: decode, sessions requests at a time.
func denseDecode(sessions int) sim.Node {
	p := fleet.Profile{DataParallel: 1, TensorParallel: 1, GPU: "H100", ActiveParamsBillions: 70, TotalParamsBillions: 70}
	perf := sim.EstimatePerf(p)
	perf.MaxBatchedTokens, perf.MaxNumSeqs, perf.KVCapacityTokens, perf.MaxModelLen = 8192, 256, 1<<20, 16384
	return sim.Node{ID: "dense-70b", Model: "dense-70b", Engine: sim.VLLM, Profile: p, Perf: perf,
		Workload: sim.Workload{Sessions: sessions, Think: time.Second,
			Prompt: sim.LogNormal(200, 0.3), Output: sim.LogNormal(2000, 0.3), MaxTokens: 4096}}
}

// TestDCGMPhysics: the simulated GPUs' DCGM figures follow the simulated
// steps. A large model decoding a large batch keeps the memory interface
// busy; the seed's DeepSeek ranks, in lockstep, mostly wait for the one
// that prefills, with a kernel running all the time (utilisation ~99%);
// an idle node's GPUs do nothing. Throttling and XIDs are reported on the
// GPUs they hit only, and a throttled GPU slows its engine core.
func TestDCGMPhysics(t *testing.T) {
	type check struct {
		id                          string
		gpus                        uint32
		dramMin, dramMax, tensorMax float64
		utilMin                     float64
	}
	seed := simtest.Scenario(t, "seed", 1)
	idle := denseDecode(1)
	idle.ID, idle.Workload = "idle", sim.Workload{Rate: 1e-9, Prompt: sim.LogNormal(10, 0.1), Output: sim.LogNormal(10, 0.1)}
	for _, tc := range []struct {
		name   string
		cfg    sim.Config
		warmup time.Duration
		checks []check
	}{
		{"seed", seed, sim.SeedWarmup, []check{
			{id: "deepseek-v4-0", gpus: 8, dramMax: 0.3, tensorMax: 0.3, utilMin: 0.95},
			{id: "kimi-k2.6-0", gpus: 8, dramMax: 0.3, tensorMax: 0.3},
		}},
		{"large batch", sim.Config{Seed: 1, Nodes: []sim.Node{denseDecode(128)}}, 5 * time.Minute, []check{
			{id: "dense-70b", gpus: 1, dramMin: 0.6, dramMax: 1, tensorMax: 0.5, utilMin: 0.95},
		}},
		{"idle", sim.Config{Seed: 1, Nodes: []sim.Node{idle}}, 5 * time.Minute, []check{
			{id: "idle", gpus: 1, dramMax: 0.01, tensorMax: 0.01},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := sim.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.Step(tc.warmup)
			for _, c := range tc.checks {
				g := gpuOf(t, f, c.id)
				if g.GetGpus() != c.gpus || g.GetDramActive() < c.dramMin || g.GetDramActive() > c.dramMax ||
					g.GetTensorActive() > c.tensorMax || g.GetUtilization() < c.utilMin {
					t.Errorf("%s: %d GPUs, DRAM %.3f (want %.2f–%.2f), tensor %.3f (≤ %.2f), util %.3f (≥ %.2f)", c.id, g.GetGpus(),
						g.GetDramActive(), c.dramMin, c.dramMax, g.GetTensorActive(), c.tensorMax, g.GetUtilization(), c.utilMin)
				}
				if len(g.GetClockEventReasons()) > 0 || len(g.GetXidErrors()) > 0 || !g.GetXidRead() {
					t.Errorf("%s: reasons %q, XIDs %v on healthy GPUs", c.id, g.GetClockEventReasons(), g.GetXidErrors())
				}
			}
		})
	}
}

func TestDCGMFaults(t *testing.T) {
	for _, tc := range []struct {
		scenario, id string
		reasons      []string
		throttled    []string
		xid          uint32
		xidGPU       string
		xidCount     uint64 // DCGM_EXP_XID_ERRORS_TOTAL at 5 minutes
	}{
		{"gpu-throttled", "glm-4.6-0", []string{"sw_thermal_slowdown", "hw_thermal_slowdown"}, []string{"3"}, 0, "", 0},
		{"gpu-xid", "kimi-k2.6-0", nil, nil, 48, "5", 2},
		{"gpu-xid-old", "kimi-k2.6-0", nil, nil, 31, "2", 1},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			cfg := simtest.Scenario(t, tc.scenario, 1)
			f, err := sim.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.Step(5 * time.Minute)
			g := gpuOf(t, f, tc.id)
			if got := g.GetClockEventReasons(); len(got) != len(tc.reasons) || (len(got) > 0 && got[0] != tc.reasons[0]) {
				t.Errorf("reasons %q, want %q", got, tc.reasons)
			}
			if got := g.GetThrottledGpus(); len(got) != len(tc.throttled) || (len(got) > 0 && got[0] != tc.throttled[0]) {
				t.Errorf("throttled GPUs %q, want %q", got, tc.throttled)
			}
			if tc.throttled != nil && (g.GetSmClockMhzMin() != 1155 || g.GetTemperatureCelsiusMax() != 92) {
				t.Errorf("throttled: lowest clock %v MHz, hottest %v °C; want 1155 (0.58 × 1980, by 15 MHz) and 92", g.GetSmClockMhzMin(), g.GetTemperatureCelsiusMax())
			}
			xs := g.GetXidErrors()
			if (tc.xid == 0) != (len(xs) == 0) || (len(xs) > 0 && (len(xs) != 1 || xs[0].GetXid() != tc.xid || xs[0].GetGpu() != tc.xidGPU ||
				!xs[0].GetLast() || xs[0].GetCount() != tc.xidCount)) {
				t.Errorf("XIDs %v, want %d on GPU %s, counted %d", xs, tc.xid, tc.xidGPU, tc.xidCount)
			}
			// The peer is healthy.
			peer := cfg.Nodes[1].ID
			if p := gpuOf(t, f, peer); len(p.GetThrottledGpus()) > 0 || len(p.GetXidErrors()) > 0 {
				t.Errorf("peer %s: %v", peer, p)
			}
		})
	}

	// A throttled GPU slows its engine core: the same node, the same seed,
	// generates fewer tokens per second per request.
	speed := func(throttle sim.Throttle) float64 {
		cfg := simtest.Scenario(t, "gpu-throttled", 1)
		cfg.Nodes = cfg.Nodes[:1]
		cfg.Nodes[0].GPUFault.Throttle = throttle
		cfg.Nodes[0].Workload = sim.Workload{Sessions: 64, Think: time.Second, Prompt: sim.LogNormal(200, 0.3), Output: sim.LogNormal(500, 0.3)}
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Step(5 * time.Minute)
		s, err := f.Stats(cfg.Nodes[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return float64(s.GenerationTokens)
	}
	if fast, slow := speed(sim.ThrottleNone), speed(sim.ThrottleThermal); !(slow < 0.95*fast) {
		t.Errorf("thermally throttled: %v tokens in 5 min, unthrottled %v: want fewer", slow, fast)
	}
}

// TestGPUBandwidthScenario: the gpu-bandwidth scenario's node is
// decode-bound at the memory-bandwidth limit by the simulator's own
// physics, in each 5-minute window after SeedWarmup (llmdiag may read
// any): per-request decode under 10 tok/s (the default
// decode_tokens_per_request_low) with an E2E P99 over a minute, no queue to
// speak of, KV well under 0.9 and no preemptions; and at every 5 s scrape
// its DCGM exporter reads DRAM active ≥ 0.6 (the diagnosis' gpuDRAMHigh)
// on the mean of its four GPUs, tensor pipes mostly idle. The peer, the
// same deployment with light chat traffic, decodes each request more than
// twice as fast with an E2E P99 under a minute.
func TestGPUBandwidthScenario(t *testing.T) {
	t.Parallel()
	const node, peer = "llama-3.3-70b-0", "llama-3.3-70b-1"
	f := newScenario(t, "gpu-bandwidth", testSeed())
	f.Step(sim.SeedWarmup)
	m := 5 * time.Minute
	for w, figs := range measureWindows(t, f, 5*time.Second, m, m, m) {
		n, p := figs[node], figs[peer]
		t.Logf("window %d: %s %v; %s %v", w, node, n, peer, p)
		check(t, "per-request tok/s", n.perRequest() > 6 && n.perRequest() < 9.5, n.perRequest())
		check(t, "running", n.runningMean > 280, n.runningMean)
		check(t, "E2E P99 (s)", n.e2eP99 > 120, n.e2eP99)
		check(t, "KV", n.kvMax < 0.85 && n.kvMean > 0.6, [2]float64{n.kvMean, n.kvMax})
		check(t, "queue", n.queueMax <= 3 && n.queueZero > 0.8, [2]float64{n.queueMax, n.queueZero})
		check(t, "preemptions", n.preemptions == 0, n.preemptions)
		check(t, "ITL P99 (s)", n.itlP99 < 0.2, n.itlP99)
		check(t, "peer per-request tok/s", p.perRequest() > 2*n.perRequest(), p.perRequest())
		check(t, "peer E2E P99 (s)", p.e2eP99 < 45, p.e2eP99)
		check(t, "peer ITL P99 (s)", p.itlP99 < 0.2, p.itlP99)
		check(t, "peer queue", p.queueMax <= 5, p.queueMax)
	}

	// The same run again, the DCGM exporter read at every 5 s scrape.
	f = newScenario(t, "gpu-bandwidth", testSeed())
	f.Step(sim.SeedWarmup)
	dramMin, dramMax, tensorMax := 1.0, 0.0, 0.0
	for range 3 * m / (5 * time.Second) {
		f.Step(5 * time.Second)
		g := gpuOf(t, f, node)
		if g.GetGpus() != 4 {
			t.Fatalf("%s: %d GPUs, want 4", node, g.GetGpus())
		}
		dramMin, dramMax = min(dramMin, g.GetDramActive()), max(dramMax, g.GetDramActive())
		tensorMax = max(tensorMax, g.GetTensorActive())
	}
	t.Logf("%s: DRAM active %.3f–%.3f, tensor at most %.3f", node, dramMin, dramMax, tensorMax)
	check(t, "DRAM active at least", dramMin >= 0.6, dramMin)
	check(t, "DRAM active at most", dramMax < 0.7, dramMax)
	check(t, "tensor active at most", tensorMax < 0.3, tensorMax)
}

// TestDCGMXIDAt: the gpu-xid scenario's GPU reports no XID until
// sim.GPUXIDAt after warm-up, then XID 48 counted once, then twice a
// minute later.
func TestDCGMXIDAt(t *testing.T) {
	cfg := simtest.Scenario(t, "gpu-xid", 1)
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(cfg.Warmup)
	for _, tc := range []struct {
		to    time.Duration // from the end of warm-up
		count uint64        // 0: no XID
	}{
		{sim.GPUXIDAt - time.Second, 0},
		{sim.GPUXIDAt, 1},
		{sim.GPUXIDAt + time.Minute - time.Second, 1},
		{sim.GPUXIDAt + time.Minute, 2},
	} {
		f.Step(cfg.Warmup + tc.to - f.Now())
		xs := gpuOf(t, f, "kimi-k2.6-0").GetXidErrors()
		switch {
		case tc.count == 0 && len(xs) != 0:
			t.Errorf("at %v: XIDs %v before the first", tc.to, xs)
		case tc.count > 0 && (len(xs) != 1 || xs[0].GetXid() != 48 || xs[0].GetCount() != tc.count):
			t.Errorf("at %v: XIDs %v, want XID 48 counted %d", tc.to, xs, tc.count)
		}
	}
}
