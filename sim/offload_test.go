package sim_test

import (
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// TestKVOffload: with an offload tier, the GPU KV cache the engine reports
// stays at ~0.99 by design while the blocks running requests hold stay
// few, with no preemption and no queue; vLLM shows the tier by an
// lmcache: family, and for the other schemas the fleet file declares it.
func TestKVOffload(t *testing.T) {
	for _, e := range []sim.Engine{sim.VLLM, sim.SGLang, sim.Triton} {
		t.Run(string(e), func(t *testing.T) {
			cfg := simtest.Scenario(t, "kv-offload", testSeed())
			cfg = sim.WithEngine(cfg, e)
			cfg.Warmup = 4 * time.Minute
			f, err := sim.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.Step(cfg.Warmup)
			for range 12 {
				f.Step(5 * time.Second)
				st, _ := f.Stats("qwen3-8b-0")
				if st.KVUsage > 0.3 || st.Waiting > 0 || st.Preemptions > 0 {
					t.Fatalf("at %v: blocks held %.2f, queue %d, preemptions %d: want few, 0, 0", st.Now, st.KVUsage, st.Waiting, st.Preemptions)
				}
			}
			mfs := scrape(t, f, "qwen3-8b-0")
			kvFamily := map[sim.Engine]string{sim.VLLM: "vllm:kv_cache_usage_perc", sim.SGLang: "sglang:token_usage",
				sim.Triton: "nv_trt_llm_kv_cache_block_metrics"}[e]
			var kv float64
			for _, m := range mfs[kvFamily].GetMetric() {
				for _, l := range m.GetLabel() {
					if e == sim.Triton && l.GetName() == "kv_cache_block_type" && l.GetValue() != "fraction" {
						goto next
					}
				}
				kv = m.GetGauge().GetValue()
			next:
			}
			t.Logf("%s = %.3f", kvFamily, kv)
			if kv < 0.97 || kv > 0.995 {
				t.Errorf("%s = %.3f, want ~0.99", kvFamily, kv)
			}
			_, shown := mfs["lmcache:num_stored_tokens_total"]
			declared := f.FleetFile().Nodes[0].Profile.KVOffload
			if shown != (e == sim.VLLM) || (declared != "") == shown {
				t.Errorf("lmcache family shown %v, fleet file declares %q: want exactly one of them", shown, declared)
			}
		})
	}
}
