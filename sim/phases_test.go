package sim_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// TestPhases runs a node through phases measured from the end of a
// 20-second warm-up: no traffic, open loop at 5 requests/s, 8 sessions,
// 2 sessions, none. Each phase's load shows in the node's state: nothing
// before the first, concurrency bounded by the sessions, nothing sent
// after the last; and cutting the same run into 1-second steps gives the
// same exposition.
func TestPhases(t *testing.T) {
	n := schemaNode(t, sim.VLLM)
	n.Workload.Rate = 0
	n.Workload.Output = sim.LogNormal(100, 0.3) // requests last a second or two
	n.Workload.Phases = []sim.Phase{
		{At: 10 * time.Second, Rate: 5},
		{At: 40 * time.Second, Sessions: 8, Think: time.Second},
		{At: 70 * time.Second, Sessions: 2, Think: time.Second},
		{At: 100 * time.Second},
	}
	cfg := sim.Config{Seed: 1, Warmup: 20 * time.Second, Nodes: []sim.Node{n}}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// inSystem samples waiting+running every 100ms until simulated time to
	// and returns its least and greatest values.
	inSystem := func(to time.Duration) (lo, hi int) {
		lo = 1 << 30
		for f.Now() < to {
			f.Step(100 * time.Millisecond)
			st, _ := f.Stats(n.ID)
			lo, hi = min(lo, st.Waiting+st.Running), max(hi, st.Waiting+st.Running)
		}
		return lo, hi
	}
	// Phases start at 30, 60, 90 and 120 s of simulated time.
	if _, hi := inSystem(29900 * time.Millisecond); hi != 0 {
		t.Fatalf("before the first phase (30 s): %d requests in the system", hi)
	}
	inSystem(35 * time.Second)
	if err := f.SetRate(n.ID, 5); err != nil {
		t.Errorf("SetRate in an open-loop phase: %v", err)
	}
	inSystem(60 * time.Second)
	open, _ := f.Stats(n.ID)
	if open.Finished < 100 {
		t.Errorf("open loop at 5/s for 30 s: %d finished", open.Finished)
	}
	inSystem(70 * time.Second)
	if err := f.SetRate(n.ID, 1); !errors.Is(err, sim.ErrClosedLoop) {
		t.Errorf("SetRate in a closed-loop phase: %v", err)
	}
	if _, hi := inSystem(90 * time.Second); hi < 6 || hi > 8 {
		t.Errorf("8 sessions: up to %d requests in the system, want 6 to 8", hi)
	}
	inSystem(100 * time.Second)
	if lo, hi := inSystem(120 * time.Second); lo > 0 || hi > 2 {
		t.Errorf("2 sessions: %d–%d requests in the system, want at most 2 and at times none", lo, hi)
	}
	inSystem(130 * time.Second)
	before, _ := f.Stats(n.ID)
	if lo, hi := inSystem(170 * time.Second); hi != 0 || lo != 0 {
		t.Errorf("no load: %d–%d requests in the system", lo, hi)
	}
	after, _ := f.Stats(n.ID)
	if after.Finished != before.Finished || before.Finished <= open.Finished+20 {
		t.Errorf("finished %d at 60 s, %d at 130 s, %d at 170 s: want the sessions' requests, then none", open.Finished, before.Finished, after.Finished)
	}

	a, _ := sim.New(cfg)
	b, _ := sim.New(cfg)
	a.Step(170 * time.Second)
	for b.Now() < a.Now() {
		b.Step(time.Second)
	}
	ma, _ := a.Metrics(n.ID)
	mb, _ := b.Metrics(n.ID)
	if !bytes.Equal(ma, mb) {
		t.Error("phases: one step and 1s steps give different expositions")
	}
}

// TestPhasedScenarios checks the phased scenarios' signatures, sampling
// every 5 s from the end of a 2-minute warm-up.
func TestPhasedScenarios(t *testing.T) {
	sample := func(t *testing.T, name string, d time.Duration) (*sim.Fleet, []sim.NodeStats) {
		cfg := simtest.Scenario(t, name, testSeed())
		cfg.Warmup = 2 * time.Minute
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Step(cfg.Warmup)
		var out []sim.NodeStats
		for at := time.Duration(0); at <= d; at += 5 * time.Second {
			if at > 0 {
				f.Step(5 * time.Second)
			}
			st, _ := f.Stats("qwen3-8b-0")
			st.Now -= cfg.Warmup
			out = append(out, st)
		}
		return f, out
	}
	in := func(ss []sim.NodeStats, from, to time.Duration) []sim.NodeStats {
		var out []sim.NodeStats
		for _, s := range ss {
			if s.Now >= from && s.Now < to {
				out = append(out, s)
			}
		}
		return out
	}
	t.Run("idle-then-overload", func(t *testing.T) {
		t.Parallel()
		_, ss := sample(t, "idle-then-overload", 17*time.Minute)
		for _, s := range in(ss, 0, 10*time.Minute) {
			if s.Finished+uint64(s.Waiting+s.Running) != 0 {
				t.Fatalf("idle phase, at %v: %+v", s.Now, s)
			}
		}
		for _, s := range in(ss, 10*time.Minute+10*time.Second, 14*time.Minute) {
			if s.Waiting <= 5 || s.Running != 4 {
				t.Errorf("overload, at %v: queue %d running %d, want > 5 and all 4 slots", s.Now, s.Waiting, s.Running)
			}
		}
		for _, s := range in(ss, 14*time.Minute+30*time.Second, 17*time.Minute) {
			if s.Waiting > 0 || s.Running > 2 {
				t.Errorf("light load, at %v: queue %d running %d", s.Now, s.Waiting, s.Running)
			}
		}
		if last := ss[len(ss)-1]; last.Aborted != 0 || last.Preemptions != 0 {
			t.Errorf("no abort or preemption expected: %+v", last)
		}
	})
	t.Run("kv-flap", func(t *testing.T) {
		t.Parallel()
		_, ss := sample(t, "kv-flap", 14*time.Minute)
		high := func(ss []sim.NodeStats) (n int) {
			for _, s := range ss {
				if s.KVUsage >= 0.95 {
					n++
				}
			}
			return n
		}
		dips := 0
		for _, p := range []struct{ from, to time.Duration }{{3 * time.Minute, 6 * time.Minute}, {8 * time.Minute, 11 * time.Minute}} {
			// Settled 15 s after the phase starts, until it ends.
			above := in(ss, p.from+15*time.Second, p.to)
			h := high(above)
			if h < len(above)*85/100 {
				t.Errorf("%v–%v: KV ≥ 0.95 at %d of %d samples, want at least 85%%", p.from, p.to, h, len(above))
			}
			dips += len(above) - h
		}
		if dips == 0 {
			t.Error("KV never dipped below 0.95 in the KV-bound phases")
		}
		for _, p := range []struct{ from, to time.Duration }{{0, 3 * time.Minute}, {6*time.Minute + 30*time.Second, 8 * time.Minute}, {11*time.Minute + 30*time.Second, 14 * time.Minute}} {
			if h := high(in(ss, p.from, p.to)); h != 0 {
				t.Errorf("%v–%v: KV ≥ 0.95 at %d samples, want none", p.from, p.to, h)
			}
		}
		if last := ss[len(ss)-1]; last.Preemptions == 0 {
			t.Errorf("KV-bound phases without a preemption: %+v", last)
		}
	})
}
