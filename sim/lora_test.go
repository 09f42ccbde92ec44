package sim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// TestLoRAContentionScenario: three adapters, one slot. Every read names
// max_lora 1 and at most one adapter running; at nearly every read some
// request waits for an adapter that is not the running one, with room in
// the batch; and the queue never exceeds 4 (5 clients), below
// queue_saturated.
func TestLoRAContentionScenario(t *testing.T) {
	cfg := simtest.Scenario(t, "lora-contention", testSeed())
	cfg.Warmup = 3 * time.Minute
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(cfg.Warmup)
	const reads = 120
	contended := 0
	for range reads {
		f.Step(5 * time.Second)
		s := engine.Extract(llmdiagv1.Engine_ENGINE_VLLM, scrape(t, f, "qwen3-8b-0"), time.Now())
		e := s.Effects
		if e.LoRAMax == nil || *e.LoRAMax != 1 || len(e.LoRARunning) > 1 {
			t.Fatalf("max_lora %v, running %q: want max_lora 1 and at most one adapter running", e.LoRAMax, e.LoRARunning)
		}
		st, _ := f.Stats("qwen3-8b-0")
		if st.Waiting > 4 {
			t.Fatalf("%d waiting: want at most 4 (5 clients)", st.Waiting)
		}
		if len(e.LoRARunning) == 1 && len(e.LoRAWaiting) > 0 && !slices.Contains(e.LoRAWaiting, e.LoRARunning[0]) &&
			st.Waiting > 0 && st.Running < cfg.Nodes[0].Perf.MaxNumSeqs {
			contended++
		}
	}
	t.Logf("%d of %d reads: requests wait for an unloaded adapter while one holds the slot", contended, reads)
	if contended < reads*9/10 {
		t.Errorf("contention at %d of %d reads, want at least 90%%", contended, reads)
	}
}
