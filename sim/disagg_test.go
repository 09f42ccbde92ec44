package sim_test

import (
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// The disaggregated scenario: the fleet file carries the roles; the
// engines export the KV transfers on the side that observes them (vLLM's
// decode worker, SGLang's prefill worker) with the transfer time the KV
// link gives, and SGLang labels its schedulers with the role.
func TestDisaggregated(t *testing.T) {
	const prefill, decode = "kimi-k2.6-prefill-0", "kimi-k2.6-decode-0"
	for _, tc := range []struct {
		engine               sim.Engine
		xfer                 string // histogram family of the transfer time
		observer, other      string
		scale                float64 // family unit per second
		engineType           string  // SGLang's engine_type on the prefill worker
		bytesFamily, counter string
	}{
		{sim.VLLM, "vllm:nixl_xfer_time_seconds", decode, prefill, 1, "", "vllm:nixl_bytes_transferred", "vllm:nixl_num_failed_transfers_total"},
		{sim.VLLMOTel, "vllm_nixl_xfer_time_seconds", decode, prefill, 1, "", "vllm_nixl_bytes_transferred", "vllm_nixl_num_failed_transfers"},
		{sim.SGLang, "sglang:kv_transfer_latency_ms", prefill, decode, 1000, "prefill", "", ""},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			cfg := simtest.Scenario(t, "disaggregated", 1)
			cfg = sim.WithEngine(cfg, tc.engine)
			f, err := sim.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			roles := map[string]string{}
			for _, n := range f.FleetFile().Nodes {
				roles[n.ID] = n.Role
			}
			if roles[prefill] != "prefill" || roles[decode] != "decode" {
				t.Fatalf("fleet file roles %v", roles)
			}
			f.Step(20 * time.Minute)
			obs, other := scrape(t, f, tc.observer), scrape(t, f, tc.other)
			h := histOf(obs, tc.xfer)
			if h.count < 60 {
				t.Fatalf("%s on %s: %v transfers in 20 min at 0.1/s", tc.xfer, tc.observer, h.count)
			}
			// ~70 KB a token over 0.6 GB/s: prompts of median 64k tokens
			// (mean ~68k) take ~8 s.
			if mean := h.mean() / tc.scale; mean < 6 || mean > 11 {
				t.Errorf("mean transfer %.1f s, want ~8 s", mean)
			}
			if mf := other[tc.xfer]; mf == nil || histOf(other, tc.xfer).count != 0 {
				t.Errorf("%s on %s: want the family registered and never observed", tc.xfer, tc.other)
			}
			if tc.bytesFamily != "" {
				b := histOf(obs, tc.bytesFamily)
				if per := b.mean(); b.count != h.count || math.Abs(per/(h.mean()*0.6e9)-1) > 1e-6 {
					t.Errorf("%s: %v transfers of %.3g bytes, want %v of the time's bytes", tc.bytesFamily, b.count, per, h.count)
				}
				if obs[tc.counter] == nil {
					t.Errorf("no %s", tc.counter)
				}
			}
			if tc.engineType != "" && !hasLabel(scrape(t, f, prefill)["sglang:num_queue_reqs"], "engine_type", "prefill") ||
				tc.engineType != "" && !hasLabel(scrape(t, f, decode)["sglang:num_queue_reqs"], "engine_type", "decode") {
				t.Errorf("engine_type does not carry the roles")
			}
		})
	}
}

func hasLabel(mf *dto.MetricFamily, name, value string) bool {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				return true
			}
		}
	}
	return false
}

func TestRoleValidation(t *testing.T) {
	cfg := simtest.Scenario(t, "disaggregated", 1)
	cfg.Nodes[0].KVTransfer = sim.KVLink{}
	cfg.Nodes[1].Role = "encode"
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "kv transfer") || !strings.Contains(err.Error(), `unknown role "encode"`) {
		t.Fatalf("Validate: %v", err)
	}
}
