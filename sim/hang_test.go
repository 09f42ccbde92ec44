package sim_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// counters renders every series of an exposition but the gauges: what a
// hung engine must leave unchanged.
func counters(mfs map[string]*dto.MetricFamily) []string {
	var out []string
	for name, mf := range mfs {
		if mf.GetType() == dto.MetricType_GAUGE {
			continue
		}
		for _, m := range mf.GetMetric() {
			m.Gauge = nil
			out = append(out, name+" "+m.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestStalledScenario: in every schema, from StalledAt on the hung node's
// /metrics answers, its counters and histograms stand still for minutes,
// its batch stays as it was and its queue grows by about the arrival rate;
// the peer keeps working.
func TestStalledScenario(t *testing.T) {
	t.Parallel()
	for _, e := range sim.Engines() {
		t.Run(string(e), func(t *testing.T) {
			cfg := simtest.Scenario(t, "stalled", testSeed())
			cfg = sim.WithEngine(cfg, e)
			cfg.Warmup = 2 * time.Minute
			f, err := sim.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.Step(cfg.Warmup + sim.StalledAt - time.Minute)
			before, _ := f.Stats("qwen3-8b-0")
			f.Step(time.Minute)
			at, _ := f.Stats("qwen3-8b-0")
			if at.Finished <= before.Finished || at.GenerationTokens <= before.GenerationTokens {
				t.Fatalf("before the hang: finished %d→%d, generated %d→%d in a minute: want both rising",
					before.Finished, at.Finished, before.GenerationTokens, at.GenerationTokens)
			}
			frozen := counters(scrape(t, f, "qwen3-8b-0"))
			peer, _ := f.Stats("qwen3-8b-1")
			for range 3 {
				f.Step(time.Minute)
				st, _ := f.Stats("qwen3-8b-0")
				if got := counters(scrape(t, f, "qwen3-8b-0")); !slices.Equal(got, frozen) {
					t.Fatalf("at %v, hung since %v: the counters moved:\n%s", st.Now-cfg.Warmup, sim.StalledAt, firstDiff(frozen, got))
				}
				if st.Finished != at.Finished || st.Aborted != at.Aborted || st.GenerationTokens != at.GenerationTokens {
					t.Errorf("at %v: finished %d→%d, aborted %d→%d, generated %d→%d: want all still", st.Now-cfg.Warmup,
						at.Finished, st.Finished, at.Aborted, st.Aborted, at.GenerationTokens, st.GenerationTokens)
				}
				if st.Running != at.Running {
					t.Errorf("at %v: running %d, %d when the hang began: want the batch as it was", st.Now-cfg.Warmup, st.Running, at.Running)
				}
			}
			st, _ := f.Stats("qwen3-8b-0")
			// ~1 request/s for 3 minutes: 180 on average, Poisson.
			if grown := st.Waiting - at.Waiting; grown < 140 || grown > 220 {
				t.Errorf("queue grew by %d in 3 minutes of hang at ~1 request/s: want ~180", grown)
			}
			t.Logf("hung node: running %d, waiting %d→%d", st.Running, at.Waiting, st.Waiting)
			p, _ := f.Stats("qwen3-8b-1")
			if p.Finished-peer.Finished < 100 || p.Waiting > 5 {
				t.Errorf("peer: %d finished in 3 minutes, queue %d: want it working", p.Finished-peer.Finished, p.Waiting)
			}
		})
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return "  was " + a[i] + "\n  now " + b[i]
		}
	}
	return fmt.Sprintf("  %d series were, %d now", len(a), len(b))
}

// TestHangWindow: a hang with an end holds the engine, idle groups
// included, and lets it go when it ends. A node with two data-parallel
// cores that do not step together and no traffic until the hang: the
// requests that arrive during it all wait (running reads 0) and nothing
// finishes; once it ends both cores work the queue off.
func TestHangWindow(t *testing.T) {
	n := schemaNode(t, sim.VLLM)
	n.Profile.DataParallel = 2
	n.Workload.Rate = 0
	n.Workload.Output = sim.LogNormal(50, 0.3)
	n.Workload.Phases = []sim.Phase{{At: 10 * time.Second, Rate: 2}}
	n.Hang = []sim.Window{{Start: 5 * time.Second, End: 65 * time.Second}}
	cfg := sim.Config{Seed: 1, Warmup: 10 * time.Second, Nodes: []sim.Node{n}}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(cfg.Warmup + 64*time.Second)
	st, _ := f.Stats(n.ID)
	if st.Running != 0 || st.Finished != 0 || st.GenerationTokens != 0 || st.Waiting < 80 {
		t.Fatalf("1 s before the hang ends: running %d, waiting %d, finished %d, generated %d: want 0, ~108, 0, 0",
			st.Running, st.Waiting, st.Finished, st.GenerationTokens)
	}
	f.Step(30 * time.Second)
	after, _ := f.Stats(n.ID)
	if after.Finished < uint64(st.Waiting) || after.Waiting > 5 {
		t.Errorf("30 s after the hang: %d finished, %d waiting; %d waited when it ended: want them served", after.Finished, after.Waiting, st.Waiting)
	}
	if err := (sim.Config{Nodes: []sim.Node{func() sim.Node { m := n; m.Hang = []sim.Window{{Start: time.Minute, End: time.Second}}; return m }()}}).Validate(); err == nil {
		t.Error("a hang ending before it starts validated")
	}
}
