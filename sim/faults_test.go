package sim_test

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// faultFleet is the stalled scenario without its hang: two alike vLLM
// nodes (qwen3-8b-0 and -1) with open-loop chat traffic, each changed by
// edit if not nil, warmed up.
func faultFleet(t *testing.T, edit func(*sim.Node)) *sim.Fleet {
	t.Helper()
	cfg := simtest.Scenario(t, "stalled", testSeed())
	for i := range cfg.Nodes {
		cfg.Nodes[i].Hang = nil
		if edit != nil {
			edit(&cfg.Nodes[i])
		}
	}
	cfg.Warmup = 2 * time.Minute
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(cfg.Warmup)
	return f
}

// meanITL is the node's mean inter-token latency over what its histogram
// gathered since the earlier reading was.
func meanITL(t *testing.T, f *sim.Fleet, id string, was hist) (float64, hist) {
	t.Helper()
	h := histOf(scrape(t, f, id), "vllm:inter_token_latency_seconds")
	n := h.count - was.count
	if n <= 0 {
		t.Fatalf("%s: no inter-token observation", id)
	}
	return (h.sum - was.sum) / n, h
}

// TestSetSlowdown: a node slowed 10×, below its batch limit, decodes
// about 10× slower than before
// and than its peer (a token every ~10× as long), its batch grows with the
// requests that wait longer, and factor 1 gives it its own speed back.
func TestSetSlowdown(t *testing.T) {
	t.Parallel()
	// A third of the scenario's load: slowed 10×, the node still has batch
	// slots for its requests (~30 running), so its speed is its steps'.
	// Short prompts: prefill, slowed as much, takes little of the time
	// between tokens either way.
	f := faultFleet(t, func(n *sim.Node) {
		n.Workload.Rate = 0.3
		n.Workload.Prompt = sim.LogNormal(100, 0.2)
	})
	const slow, peer = "qwen3-8b-0", "qwen3-8b-1"
	_, h0 := meanITL(t, f, slow, hist{})
	_, p0 := meanITL(t, f, peer, hist{})
	f.Step(2 * time.Minute)
	before, h1 := meanITL(t, f, slow, h0)
	peerBefore, p1 := meanITL(t, f, peer, p0)

	if err := f.SetSlowdown(slow, 10); err != nil {
		t.Fatal(err)
	}
	// The requests running when it slowed down finish at the new speed;
	// read from a minute on.
	f.Step(time.Minute)
	_, h2 := meanITL(t, f, slow, h1)
	_, p2 := meanITL(t, f, peer, p1)
	f.Step(2 * time.Minute)
	during, h3 := meanITL(t, f, slow, h2)
	peerDuring, p3 := meanITL(t, f, peer, p2)
	st, _ := f.Stats(slow)
	ps, _ := f.Stats(peer)
	t.Logf("ITL %s %.1f→%.1f ms (running %d), %s %.1f→%.1f ms (running %d)", slow, before*1e3, during*1e3, st.Running,
		peer, peerBefore*1e3, peerDuring*1e3, ps.Running)
	// Every part of a step scales 10×; the batch grows with the slower
	// answers (Little's law: ~30 running instead of ~3), and with it the
	// per-sequence compute and context reads, ~15% of a step at 30: ×10
	// to ×13.
	if r := during / before; r < 9.8 || r > 13 {
		t.Errorf("%s slowed 10×: ITL %.2f ms → %.2f ms, ×%.2f: want ×10–13", slow, before*1e3, during*1e3, r)
	}
	if r := during / peerDuring; r < 9.8 || r > 13 {
		t.Errorf("%s slowed 10×: ITL %.2f ms against its peer's %.2f ms, ×%.2f: want ×10–13", slow, during*1e3, peerDuring*1e3, r)
	}
	if st.Running <= ps.Running {
		t.Errorf("slowed node running %d, peer %d: want the slowed node's batch larger", st.Running, ps.Running)
	}

	if err := f.SetSlowdown(slow, 1); err != nil {
		t.Fatal(err)
	}
	f.Step(2 * time.Minute)
	_, h4 := meanITL(t, f, slow, h3)
	_, p4 := meanITL(t, f, peer, p3)
	f.Step(2 * time.Minute)
	after, _ := meanITL(t, f, slow, h4)
	peerAfter, _ := meanITL(t, f, peer, p4)
	if r := after / peerAfter; r < 0.9 || r > 1.1 {
		t.Errorf("after SetSlowdown(1): ITL %.2f ms against its peer's %.2f ms: want alike", after*1e3, peerAfter*1e3)
	}

	for _, bad := range []float64{0, 0.5, math.NaN(), math.Inf(1), -2} {
		if err := f.SetSlowdown(slow, bad); err == nil {
			t.Errorf("SetSlowdown(%v): no error", bad)
		}
	}
	if err := f.SetSlowdown("nope", 2); !errors.Is(err, sim.ErrUnknownNode) {
		t.Errorf("SetSlowdown of an unknown node: %v, want ErrUnknownNode", err)
	}
}

// TestSetHang: a node hung at run time behaves as the stalled scenario's:
// its counters and histograms stand still, its batch stays as it was and
// its queue grows by the arrivals, while /metrics answers; the peer works
// on. Released, it serves its queue and catches up.
func TestSetHang(t *testing.T) {
	t.Parallel()
	f := faultFleet(t, nil)
	const hung, peer = "qwen3-8b-0", "qwen3-8b-1"
	if err := f.SetHang(hung, false); err != nil { // not hung: nothing to do
		t.Fatal(err)
	}
	f.Step(time.Minute)
	if err := f.SetHang(hung, true); err != nil {
		t.Fatal(err)
	}
	if err := f.SetHang(hung, true); err != nil { // again: no change
		t.Fatal(err)
	}
	// The iteration under way would have ended within a step's time: read
	// the frozen state just after.
	f.Step(time.Second)
	at, _ := f.Stats(hung)
	frozen := counters(scrape(t, f, hung))
	peerAt, _ := f.Stats(peer)
	for range 3 {
		f.Step(time.Minute)
		st, _ := f.Stats(hung)
		if got := counters(scrape(t, f, hung)); !slices.Equal(got, frozen) {
			t.Fatalf("at %v of the hang: the counters moved:\n%s", st.Now-at.Now, firstDiff(frozen, got))
		}
		if st.Finished != at.Finished || st.Aborted != at.Aborted || st.GenerationTokens != at.GenerationTokens || st.Running != at.Running {
			t.Errorf("at %v of the hang: %+v, was %+v: want finished, aborted, generated and running still", st.Now-at.Now, st, at)
		}
	}
	st, _ := f.Stats(hung)
	// ~1 request/s for 3 minutes: 180 on average, Poisson.
	if grown := st.Waiting - at.Waiting; grown < 140 || grown > 220 {
		t.Errorf("queue grew by %d in 3 minutes of hang at ~1 request/s: want ~180", grown)
	}
	if p, _ := f.Stats(peer); p.Finished-peerAt.Finished < 100 {
		t.Errorf("peer finished %d in 3 minutes: want it working", p.Finished-peerAt.Finished)
	}

	if err := f.SetHang(hung, false); err != nil {
		t.Fatal(err)
	}
	f.Step(time.Second)
	if s, _ := f.Stats(hung); s.GenerationTokens <= st.GenerationTokens {
		t.Errorf("a second after the hang ended: generated %d → %d, want tokens again", st.GenerationTokens, s.GenerationTokens)
	}
	f.Step(5 * time.Minute)
	if s, _ := f.Stats(hung); s.Finished-st.Finished < 180 || s.Waiting > 5 {
		t.Errorf("5 minutes after the hang ended: %d finished, queue %d: want the backlog served", s.Finished-st.Finished, s.Waiting)
	}
	if err := f.SetHang("nope", true); !errors.Is(err, sim.ErrUnknownNode) {
		t.Errorf("SetHang of an unknown node: %v, want ErrUnknownNode", err)
	}
}
