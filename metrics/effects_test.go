package metrics

import (
	"slices"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sample"
)

// TestEffects: counters give ratios of their window increases, gauges are
// read from the newest sample, and what the engine does not export, or
// what did not move, stays absent.
func TestEffects(t *testing.T) {
	t0 := time.Unix(1000, 0)
	f := sample.F
	vllm := func(at time.Time, q, h, drafts, drafted, acc float64) *sample.Sample {
		return &sample.Sample{At: at, Up: true, Effects: sample.Effects{
			PrefixCacheQueries: f(q), PrefixCacheHits: f(h),
			SpecDrafts: f(drafts), SpecDraftTokens: f(drafted), SpecAcceptedTokens: f(acc),
			LoRAAdaptersRunning: f(2), LoRAAdaptersWaiting: f(1), KVOffload: "lmcache",
			LoRARunning: []string{"chat", "sql"}, LoRAWaiting: []string{"code"}, LoRAMax: f(2),
		}}
	}
	type want struct{ hit, acc, length, loraRun, loraWait *float64 }
	for _, tc := range []struct {
		name         string
		newest, base *sample.Sample
		want         want
		offload      string
	}{
		{
			// Window: hits 900 of 1000 queried tokens; 120 of 300 drafted
			// tokens accepted over 100 drafts: 1 + 1.2 tokens per step.
			name:    "vllm window",
			newest:  vllm(t0.Add(time.Minute), 2000, 1400, 200, 600, 220),
			base:    vllm(t0, 1000, 500, 100, 300, 100),
			want:    want{hit: f(0.9), acc: f(0.4), length: f(2.2), loraRun: f(2), loraWait: f(1)},
			offload: "lmcache",
		},
		{
			name:    "vllm lifetime",
			newest:  vllm(t0, 1000, 500, 100, 300, 100),
			want:    want{hit: f(0.5), acc: f(1.0 / 3), length: f(2), loraRun: f(2), loraWait: f(1)},
			offload: "lmcache",
		},
		{
			// Nothing looked up, nothing drafted in the window: absent, not 0.
			name:    "vllm idle window",
			newest:  vllm(t0.Add(time.Minute), 1000, 500, 100, 300, 100),
			base:    vllm(t0, 1000, 500, 100, 300, 100),
			want:    want{loraRun: f(2), loraWait: f(1)},
			offload: "lmcache",
		},
		{
			name: "sglang gauges",
			newest: &sample.Sample{At: t0, Up: true, Effects: sample.Effects{
				PrefixCacheHitRate: f(0.3), SpecAcceptRate: f(0.7), SpecAcceptLength: f(3.1),
			}},
			base: &sample.Sample{At: t0.Add(-time.Minute), Up: true},
			want: want{hit: f(0.3), acc: f(0.7), length: f(3.1)},
		},
		{
			name:   "none exported",
			newest: &sample.Sample{At: t0, Up: true},
			base:   &sample.Sample{At: t0.Add(-time.Minute), Up: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := Compute(tc.newest, tc.base, "1m", nil, tc.newest.At, time.Hour)
			fig := testkit.FiguresAbs(t, 1e-9)
			fig("prefix_cache_hit_rate", nm.PrefixCacheHitRate, tc.want.hit)
			fig("spec_decode_acceptance_rate", nm.SpecDecodeAcceptanceRate, tc.want.acc)
			fig("spec_decode_accept_length", nm.SpecDecodeAcceptLength, tc.want.length)
			fig("lora_adapters_running", nm.LoraAdaptersRunning, tc.want.loraRun)
			fig("lora_adapters_waiting", nm.LoraAdaptersWaiting, tc.want.loraWait)
			// The adapters by name and max_lora come with the counts.
			if tc.want.loraRun != nil {
				fig("max_lora", nm.MaxLora, f(2))
				if !slices.Equal(nm.GetLoraRunningAdapters(), []string{"chat", "sql"}) || !slices.Equal(nm.GetLoraWaitingAdapters(), []string{"code"}) {
					t.Errorf("lora adapters running %q waiting %q", nm.GetLoraRunningAdapters(), nm.GetLoraWaitingAdapters())
				}
			} else if nm.MaxLora != nil || len(nm.GetLoraRunningAdapters())+len(nm.GetLoraWaitingAdapters()) > 0 {
				t.Errorf("lora adapters set without lora_requests_info: %v %q %q", nm.GetMaxLora(), nm.GetLoraRunningAdapters(), nm.GetLoraWaitingAdapters())
			}
			if nm.GetKvOffload() != tc.offload {
				t.Errorf("kv_offload = %q, want %q", nm.GetKvOffload(), tc.offload)
			}
		})
	}
}
