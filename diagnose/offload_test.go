package diagnose_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// kvHistory is n one-minute refreshes with no queue, 10 running and the
// given KV pressure.
func kvHistory(n int, kv float64) []diagnose.Point {
	h := flatHistory(n, 0, 10)
	for i := range h {
		h[i].KVPressure = f64(kv)
	}
	return h
}

// TestKVOffload: a node whose GPU KV cache an offload tier keeps full,
// with no preemptions and no queue, is not KV_EXHAUSTED, stays routable
// and says why; without the tier, or once it preempts or queues, the same
// figures read KV_EXHAUSTED.
func TestKVOffload(t *testing.T) {
	en := llmdiagv1.Language_LANGUAGE_EN
	for _, tc := range []struct {
		name      string
		tier      string // NodeMetrics.kv_offload
		declared  string // Profile.kv_offload
		preempt   float64
		queue     float64
		history   bool
		want      llmdiagv1.Cause
		routable  bool
		byDesign  bool // the KV row and ruled_out say "full by design"
		wantScore float64
	}{
		{name: "lmcache, usage 0.99", tier: "lmcache", want: llmdiagv1.Cause_CAUSE_HEALTHY, routable: true, byDesign: true},
		{name: "lmcache, held 10 refreshes", tier: "lmcache", history: true, want: llmdiagv1.Cause_CAUSE_HEALTHY, routable: true, byDesign: true},
		{name: "declared cpu in the fleet file", declared: "cpu", history: true, want: llmdiagv1.Cause_CAUSE_HEALTHY, routable: true, byDesign: true},
		{name: "no tier", history: true, want: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED},
		{name: "lmcache, preempting", tier: "lmcache", history: true, preempt: 0.5, want: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED},
		{name: "lmcache, queueing", tier: "lmcache", history: true, queue: 40, want: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := healthyMetrics()
			m.KvPressure, m.KvOffload = f64(0.99), tc.tier
			m.PreemptionsPerSecond, m.Queue = f64(tc.preempt), f64(tc.queue)
			in := diagnose.Input{Metrics: m, Profile: &llmdiagv1.Profile{KvOffload: tc.declared}}
			if tc.history {
				in.History = kvHistory(10, 0.99)
			}
			d := diagnose.Diagnose(in, diagnose.DefaultThresholds(), en)
			if d.GetRootCause() != tc.want || d.GetRoutable() != tc.routable {
				t.Fatalf("cause %v routable %v, want %v %v: %s", d.GetRootCause(), d.GetRoutable(), tc.want, tc.routable, d.GetSummary())
			}
			kv := d.GetFindings()[0]
			says := strings.HasPrefix(kv.GetConclusion(), "GPU KV full by design")
			ruled := slices.ContainsFunc(d.GetRuledOut(), func(s string) bool {
				return strings.HasPrefix(s, "not memory: GPU KV full by design: offload tier")
			})
			if says != tc.byDesign || ruled != tc.byDesign {
				t.Errorf("KV row %q (%v), ruled out %q: want full by design %v", kv.GetConclusion(), kv.GetStatus(), d.GetRuledOut(), tc.byDesign)
			}
			if tc.byDesign && (kv.GetStatus() != llmdiagv1.Status_STATUS_OK || d.GetLoadScore() > 1) {
				t.Errorf("KV row %v, load score %v: want OK and a score of at most 1", kv.GetStatus(), d.GetLoadScore())
			}
		})
	}
}

// effectsInputs are the golden cases of the cache and decoding effects:
// a node an LMCache tier keeps full, with a warm prefix cache and LoRA
// adapters; and a decode-bound node whose speculative decoding accepts
// few draft tokens.
func effectsInputs() map[string]diagnose.Input {
	off := healthyMetrics()
	off.Node = "vllm-lmcache-01"
	off.KvPressure, off.KvCapacityTokens, off.KvOffload = f64(0.99), f64(95088), "lmcache"
	off.PrefixCacheHitRate = f64(0.72)
	off.LoraAdaptersRunning, off.LoraAdaptersWaiting = f64(2), f64(0)

	spec := healthyMetrics()
	spec.Node = "sglang-eagle-01"
	spec.Engine = llmdiagv1.Engine_ENGINE_SGLANG
	spec.GenerationTokensPerSecond = f64(30)
	spec.E2E = dist(60, 300)
	spec.SpecDecodeAcceptanceRate, spec.SpecDecodeAcceptLength = f64(0.18), f64(1.5)
	spec.PrefixCacheHitRate = f64(0.04)
	return map[string]diagnose.Input{
		"effects-offload": {Metrics: off, History: kvHistory(10, 0.99)},
		"effects-spec":    {Metrics: spec, History: flatHistory(10, 0, 10), Profile: &llmdiagv1.Profile{ActiveParamsBillions: 8, TensorParallel: 1}},
	}
}

// TestEffectsGolden renders the effects cases in English and Chinese.
func TestEffectsGolden(t *testing.T) {
	want := map[string]llmdiagv1.Cause{
		"effects-offload": llmdiagv1.Cause_CAUSE_HEALTHY,
		"effects-spec":    llmdiagv1.Cause_CAUSE_DECODE_BOUND,
	}
	for name, in := range effectsInputs() {
		for lang, suffix := range map[llmdiagv1.Language]string{llmdiagv1.Language_LANGUAGE_EN: "en", llmdiagv1.Language_LANGUAGE_ZH: "zh"} {
			t.Run(name+"."+suffix, func(t *testing.T) {
				d := diagnose.Diagnose(in, diagnose.DefaultThresholds(), lang)
				if d.GetRootCause() != want[name] {
					t.Errorf("cause %v, want %v", d.GetRootCause(), want[name])
				}
				var effects int
				for _, f := range d.GetFindings() {
					switch f.GetIndicator() {
					case llmdiagv1.Indicator_INDICATOR_PREFIX_CACHE_HIT_RATE, llmdiagv1.Indicator_INDICATOR_SPEC_DECODE_ACCEPTANCE,
						llmdiagv1.Indicator_INDICATOR_LORA_ADAPTERS:
						effects++
					}
				}
				if effects == 0 {
					t.Errorf("no effect row among %d findings", len(d.GetFindings()))
				}
				testkit.Golden(t, filepath.Join("testdata", name+"."+suffix+".json"), stableJSON(t, d))
			})
		}
	}
}

// TestDecodeStallsOffload: the decode-stalls rule (7′) reads a GPU KV
// cache an offload tier keeps full, with no preemptions and no queue, as
// not KV high, as rule 7 does: output stalling between tokens is then
// DECODE_BOUND; without the tier the same figures are not.
func TestDecodeStallsOffload(t *testing.T) {
	en := llmdiagv1.Language_LANGUAGE_EN
	for _, tc := range []struct {
		name string
		tier string
		want bool // DECODE_BOUND
	}{
		{"lmcache, usage 0.99", "lmcache", true},
		{"no tier, usage 0.99", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := healthyMetrics()
			m.InterToken = dist(0.2, 2.3)
			m.KvPressure, m.KvOffload = f64(0.99), tc.tier
			in := diagnose.Input{Metrics: m, History: kvHistory(10, 0.99),
				Profile: &llmdiagv1.Profile{DataParallel: 8, ExpertParallel: 8, ActiveParamsBillions: 37}}
			d := diagnose.Diagnose(in, diagnose.DefaultThresholds(), en)
			if got := d.GetRootCause() == llmdiagv1.Cause_CAUSE_DECODE_BOUND; got != tc.want {
				t.Fatalf("cause %v, want DECODE_BOUND %v: %s", d.GetRootCause(), tc.want, d.GetSummary())
			}
			t.Logf("%v: %s", d.GetRootCause(), d.GetSummary())
		})
	}
}
