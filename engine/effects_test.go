package engine

import (
	"slices"
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sample"
)

// TestExtractEffects reads the cache and decoding effects off real and
// synthetic scrapes: each is nil where the engine does not export it,
// never 0.
func TestExtractEffects(t *testing.T) {
	for _, tc := range []struct {
		file string
		want sample.Effects
	}{
		{
			// Real: vLLM V1 with LMCache; prefix-cache counters at 0 (the 66
			// prompt tokens went to the external cache); no speculative
			// decoding, no LoRA.
			file: "vllm-v1-dynamo-metrics_examples.prom",
			want: sample.Effects{PrefixCacheQueries: f(0), PrefixCacheHits: f(0), KVOffload: "lmcache"},
		},
		{
			// Synthetic: two cores summed; LoRA from each core's newest
			// series: running {sql, chat} ∪ {chat}, waiting {code} ∪ {code, math},
			// by name and sorted; max_lora 4.
			file: "vllm-effects-synthetic.prom",
			want: sample.Effects{
				PrefixCacheQueries: f(10000), PrefixCacheHits: f(7000),
				SpecDrafts: f(200), SpecDraftTokens: f(600), SpecAcceptedTokens: f(360),
				LoRAAdaptersRunning: f(2), LoRAAdaptersWaiting: f(2),
				LoRARunning: []string{"chat", "sql"}, LoRAWaiting: []string{"code", "math"}, LoRAMax: f(4),
				KVOffload: "lmcache",
			},
		},
		// Real: vLLM V0 exports none of them.
		{file: "vllm-v0.prom"},
		{
			// Real: SGLang without speculative decoding: cache_hit_rate 0.0
			// is a reading; spec_accept_length and _rate 0.0 mean "off".
			file: "sglang-dynamo-metrics_examples.prom",
			want: sample.Effects{PrefixCacheHitRate: f(0)},
		},
		// Real: SGLang of 2024 reported cache_hit_rate as a percentage, 10.61.
		{file: "sglang-2024-name.prom", want: sample.Effects{PrefixCacheHitRate: f(0.1061)}},
		{file: "tgi.prom"},
		{file: "triton-trtllm.prom"},
		{file: "trtllm-dynamo.prom"},
		{file: "dynamo-frontend.prom"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s := Extract(llmdiagv1.Engine_ENGINE_UNSPECIFIED, parseFile(t, tc.file), time.Unix(0, 0))
			if len(s.Errors) > 0 {
				t.Fatalf("errors: %q", s.Errors)
			}
			got, want := s.Effects, tc.want
			fig := testkit.Figures(t, 1e-12)
			fig("prefix_cache_queries", got.PrefixCacheQueries, want.PrefixCacheQueries)
			fig("prefix_cache_hits", got.PrefixCacheHits, want.PrefixCacheHits)
			fig("prefix_cache_hit_rate", got.PrefixCacheHitRate, want.PrefixCacheHitRate)
			fig("spec_drafts", got.SpecDrafts, want.SpecDrafts)
			fig("spec_draft_tokens", got.SpecDraftTokens, want.SpecDraftTokens)
			fig("spec_accepted_tokens", got.SpecAcceptedTokens, want.SpecAcceptedTokens)
			fig("spec_accept_rate", got.SpecAcceptRate, want.SpecAcceptRate)
			fig("spec_accept_length", got.SpecAcceptLength, want.SpecAcceptLength)
			fig("lora_running", got.LoRAAdaptersRunning, want.LoRAAdaptersRunning)
			fig("lora_waiting", got.LoRAAdaptersWaiting, want.LoRAAdaptersWaiting)
			fig("max_lora", got.LoRAMax, want.LoRAMax)
			if !slices.Equal(got.LoRARunning, want.LoRARunning) || !slices.Equal(got.LoRAWaiting, want.LoRAWaiting) {
				t.Errorf("lora adapters running %q waiting %q, want %q and %q", got.LoRARunning, got.LoRAWaiting, want.LoRARunning, want.LoRAWaiting)
			}
			if got.KVOffload != want.KVOffload {
				t.Errorf("kv offload = %q, want %q", got.KVOffload, want.KVOffload)
			}
		})
	}
}

// TestExtractSpecGauges: SGLang's speculative gauges are read when
// speculative decoding is on, averaged over replicas.
func TestExtractSpecGauges(t *testing.T) {
	body := `# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0",model_name="m",tp_rank="0"} 2.5
sglang:spec_accept_length{dp_rank="1",model_name="m",tp_rank="0"} 3.5
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{dp_rank="0",model_name="m",tp_rank="0"} 0.5
sglang:spec_accept_rate{dp_rank="1",model_name="m",tp_rank="0"} 0.7
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="0"} 1
`
	s := Extract(llmdiagv1.Engine_ENGINE_SGLANG, parseString(t, body), time.Unix(0, 0))
	if !samePtr(s.Effects.SpecAcceptLength, f(3)) || !samePtr(s.Effects.SpecAcceptRate, f(0.6)) {
		t.Errorf("accept length %s rate %s, want 3 and 0.6", testkit.Show(s.Effects.SpecAcceptLength), testkit.Show(s.Effects.SpecAcceptRate))
	}
	if s.Effects.PrefixCacheHitRate != nil || s.Effects.KVOffload != "" {
		t.Errorf("hit rate %s, offload %q: want absent", testkit.Show(s.Effects.PrefixCacheHitRate), s.Effects.KVOffload)
	}
}

// TestReadLoRA names the adapters over the replicas' lists, each once and
// sorted, and reads max_lora as the largest positive value given.
func TestReadLoRA(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lists     []LoRALists
		run, wait []string
		maxLoRA   *float64
	}{
		{name: "none"},
		{name: "one replica", lists: []LoRALists{{Running: "b,a", Waiting: "c", Max: "2"}},
			run: []string{"a", "b"}, wait: []string{"c"}, maxLoRA: f(2)},
		{name: "replicas merged, the largest max", lists: []LoRALists{{Running: "a", Waiting: "b", Max: "1"}, {Running: " b ,a", Waiting: "", Max: "3"}},
			run: []string{"a", "b"}, wait: []string{"b"}, maxLoRA: f(3)},
		{name: "max absent or not a positive number", lists: []LoRALists{{Running: "a", Max: ""}, {Waiting: "b", Max: "x"}, {Max: "0"}},
			run: []string{"a"}, wait: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, wait, m := ReadLoRA(tc.lists)
			if !slices.Equal(run, tc.run) || !slices.Equal(wait, tc.wait) {
				t.Errorf("running %q waiting %q, want %q and %q", run, wait, tc.run, tc.wait)
			}
			testkit.Figures(t, 0)("max_lora", m, tc.maxLoRA)
		})
	}
}
