package engine

import (
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sample"
)

var inf = math.Inf(+1)

// unmapped is an engine value llmdiag has no mapping for.
const unmapped = llmdiagv1.Engine(99)

// Bucket layouts, as listed in the files.
var (
	vllmTTFTBounds = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560, inf}
	vllmITLBounds  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, inf}
	vllmReqBounds  = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680, inf}
	sgTTFTBounds   = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, inf}
	sgITLBounds    = []float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, inf}
	sgE2EBounds    = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400, inf}
	sgQueueBounds  = []float64{0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000, inf}
	// SGLang of 2024 (production_metrics.md of the time).
	sg24TTFTBounds = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 15, 20, 25, 30, inf}
	sg24TPOTBounds = []float64{0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, inf}
	sg24B125Bounds = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, inf}
	// Dynamo frontend defaults (2 significant figures, log-spaced, from 0).
	dynTTFTBounds = []float64{0, 0.0022, 0.0047, 0.01, 0.022, 0.047, 0.1, 0.22, 0.47, 1, 2.2, 4.7, 10, 22, 48, 100, 220, 480, inf}
	dynReqBounds  = []float64{0, 1.9, 3.4, 6.3, 12, 22, 40, 75, 140, 260, inf}
	dynITLBounds  = []float64{0, 0.0019, 0.0035, 0.0067, 0.013, 0.024, 0.045, 0.084, 0.16, 0.3, 0.56, 1.1, 2, inf}
	// TGI: 0.0001·1.5^k, k = 1..35, computed as the router does (repeated
	// multiplication), then +Inf.
	tgiDurBounds = func() []float64 {
		var b []float64
		v := 0.0001
		for range 35 {
			v *= 1.5
			b = append(b, v)
		}
		return append(b, inf)
	}()
)

// rep returns n copies of v.
func rep(n int, v float64) []float64 { return slices.Repeat([]float64{v}, n) }

func hist(sum, count float64, bounds []float64, counts ...[]float64) *sample.Histogram {
	return &sample.Histogram{Bounds: bounds, Counts: slices.Concat(counts...), Sum: sum, Count: count}
}

type want struct {
	engine                         llmdiagv1.Engine
	model                          string
	queue, running, kv, kvCap      *float64
	prompt, gen, preempt, finished *float64
	// aborted: requests aborted or failed; nil where the engine does not
	// count them apart (or, lazily created, has not seen one yet).
	aborted *float64
	created time.Time
	dp, tp  int
	pp, ep  int
	hists   [sample.NumHists]*sample.Histogram
	totals  [sample.NumHists]*sample.Total
	errs    []string // each a substring of one error, in order
	// warnings: each a substring of one of Parse's warnings, in order.
	warnings []string
}

func f(v float64) *float64 { return &v }

func TestExtract(t *testing.T) {
	tests := []struct {
		file   string
		engine llmdiagv1.Engine // passed to Extract; unspecified detects
		want   want
	}{
		{
			// Real scrape of vLLM V1 behind Dynamo: one engine core
			// (engine="0"), Qwen/Qwen3-0.6B, idle after 2 requests.
			file: "vllm-v1-dynamo-metrics_examples.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_VLLM,
				model:  "Qwen/Qwen3-0.6B",
				// num_requests_waiting 0.0, num_requests_running 0.0.
				queue: f(0), running: f(0),
				// kv_cache_usage_perc 0.0; capacity from cache_config_info:
				// num_gpu_blocks 5943 × block_size 16 = 95088 tokens.
				kv: f(0), kvCap: f(95088),
				// prompt_tokens_total 66, generation_tokens_total 600,
				// num_preemptions_total 0.
				prompt: f(66), gen: f(600), preempt: f(0),
				// request_success_total: stop 0 + length 2 + abort 0 + error 0;
				// aborted: abort 0 + error 0 (V1 creates every reason).
				finished: f(2), aborted: f(0),
				// min(prompt_tokens_created 1.768264339889982e+09,
				//     generation_tokens_created 1.7682643398899963e+09).
				created: time.Unix(1768264339, 889982000),
				// one distinct engine label; vLLM has no TP label.
				dp: 1, tp: 0,
				hists: [sample.NumHists]*sample.Histogram{
					// TTFT: first observation in le=0.02, second in le=0.5.
					sample.TTFT: hist(0.4143967628479004, 2, vllmTTFTBounds, rep(3, 0), rep(6, 1), rep(14, 2)),
					// E2E: both in le=2.0.
					sample.E2E: hist(3.5736520290374756, 2, vllmReqBounds, rep(5, 0), rep(17, 2)),
					// ITL: 597 gaps ≤ 10 ms, one more ≤ 50 ms.
					sample.ITL: hist(3.1598554495722055, 598, vllmITLBounds, rep(2, 597), rep(18, 598)),
					// request_time_per_output_token: both ≤ 10 ms.
					sample.TPOT: hist(0.010568078426662894, 2, vllmITLBounds, rep(20, 2)),
					// request_queue_time: both ≤ 0.3 s (sum 1.88e-05 s).
					sample.QueueTime: hist(1.883227378129959e-05, 2, vllmReqBounds, rep(22, 2)),
				},
			},
		},
		{
			// Real scrape of SGLang behind Dynamo (multiprocess mode: _sum
			// first, no _created), tp_rank 0 only, after 1 request.
			file: "sglang-dynamo-metrics_examples.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_SGLANG,
				model:  "Qwen/Qwen3-0.6B",
				// num_queue_reqs 0.0, num_running_reqs 0.0.
				queue: f(0), running: f(0),
				// num_used_tokens 0 / max_total_num_tokens 92962.
				kv: f(0), kvCap: f(92962),
				// prompt_tokens_total 33, generation_tokens_total 300.
				prompt: f(33), gen: f(300),
				// No num_retracted_requests_total: num_retractions_sum 0.0.
				preempt: f(0),
				// num_requests_total 1.0. No num_aborted_requests_total
				// (created with the first abort): aborted UNKNOWN.
				finished: f(1),
				// no dp_rank label; one tp_rank ("0").
				dp: 0, tp: 1, pp: 1, ep: 1,
				hists: [sample.NumHists]*sample.Histogram{
					// TTFT 1.557 s: in le=2.0.
					sample.TTFT: hist(1.5573770999908447, 1, sgTTFTBounds, rep(6, 0), rep(13, 1)),
					// E2E 2.17 s: in le=4.0.
					sample.E2E: hist(2.171226978302002, 1, sgE2EBounds, rep(7, 0), rep(16, 1)),
					// ITL: 57 gaps ≤ 2 ms, all 299 ≤ 4 ms.
					sample.ITL: hist(0.6138594150543213, 299, sgITLBounds, []float64{57}, rep(23, 299)),
					// queue_time starts with le="0.0" (count 0); 1.8 ms ≤ 0.1 s.
					sample.QueueTime: hist(0.0018392642959952354, 1, sgQueueBounds, []float64{0}, rep(36, 1)),
				},
			},
		},
		{
			// Two vLLM engine cores: gauges, counters and buckets add up.
			file: "vllm-dp2.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_VLLM,
				model:  "deepseek-ai/DeepSeek-V3",
				// waiting 1+4, running 3+5.
				queue: f(5), running: f(8),
				// capacity 1000×16 + 3000×16 = 64000; usage weighted by it:
				// (0.5×16000 + 0.25×48000) / 64000 = 0.3125 (plain mean 0.375).
				kv: f(0.3125), kvCap: f(64000),
				// 1000+2500, 400+600, preemptions 2+3.
				prompt: f(3500), gen: f(1000), preempt: f(5),
				// (10+2+1+0) + (20+0+0+1).
				finished: f(34),
				// abort 1 (engine 0) + error 1 (engine 1).
				aborted: f(2),
				// min of 1700000100.5, 1700000050.25, 1700000100.75, 1700000060.
				created: time.Unix(1700000050, 250000000),
				dp:      2,
				hists: [sample.NumHists]*sample.Histogram{
					// le=0.1: 2+1, le=1: 5+1, +Inf: 6+4; sum 3.5+20.25.
					sample.TTFT: hist(23.75, 10, []float64{0.1, 1, inf}, []float64{3, 6, 10}),
				},
			},
		},
		{
			// vLLM V0 names: gpu_cache_usage_perc, time_per_output_token_seconds.
			file: "vllm-v0.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_VLLM,
				model:  "meta-llama/Llama-3.1-8B",
				queue:  f(0), running: f(2),
				// No cache_config_info: usage as exposed, capacity unknown.
				kv:     f(0.42),
				prompt: f(123), gen: f(456),
				hists: [sample.NumHists]*sample.Histogram{
					sample.ITL: hist(0.2, 10, []float64{0.01, 0.025, inf}, []float64{5, 9, 10}),
				},
			},
		},
		{
			// Families present but unusable: only those concepts are lost.
			file: "vllm-inconsistent.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_VLLM,
				model:  "m",
				queue:  f(7),
				// Capacity unknown (num_gpu_blocks="None"): plain mean of
				// 0.2 and 0.4.
				kv:     f(0.3),
				prompt: f(12),
				dp:     2,
				errs: []string{
					"vllm:num_requests_running (running): value is NaN",
					`vllm:cache_config_info (kv_capacity_tokens): label num_gpu_blocks="None" is not a number`,
					"vllm:inter_token_latency_seconds (inter_token): family is a summary, want a histogram",
					"vllm:request_queue_time_seconds (queue_time): histogram bucket layouts differ: bucket 0 is le=0.3 vs le=0.5",
				},
				// Invalid histograms never reach Extract: Parse leaves
				// them out.
				warnings: []string{
					`family vllm:e2e_request_latency_seconds left out: histogram series {engine="0",model_name="m"}: bucket le=1 has count NaN`,
					`family vllm:time_to_first_token_seconds left out: histogram series {engine="0",model_name="m"}: no +Inf bucket`,
				},
			},
		},
		{
			// SGLang DP attention, 2 dp ranks × 2 tp ranks, all exporting:
			// per dp_rank the lowest tp_rank is read, dp ranks are summed.
			file: "sglang-dp2-tp2.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_SGLANG,
				model:  "m",
				// queue 3 (dp0) + 4 (dp1); running 10 + 6.
				queue: f(7), running: f(16),
				// used (1000 + 3000) / capacity (10000 + 10000).
				kv: f(0.2), kvCap: f(20000),
				prompt: f(500), gen: f(900),
				// num_retracted_requests_total 2 + 5.
				preempt: f(7),
				// No num_requests_total: e2e_request_latency_seconds_count 9.
				finished: f(9),
				// dp_rank 0,1; tp_rank 0..3; moe_ep_rank 0..3; pp_rank 0.
				dp: 2, tp: 4, pp: 1, ep: 4,
				hists: [sample.NumHists]*sample.Histogram{
					sample.E2E: hist(45, 9, []float64{1, 10, inf}, []float64{2, 8, 9}),
					// dp0 (0: 1, 1: 3, +Inf: 4) + dp1 (0: 0, 1: 2, +Inf: 2).
					sample.QueueTime: hist(3.25, 6, []float64{0, 1, inf}, []float64{1, 5, 6}),
				},
			},
		},
		{
			// SGLang TP 2 × PP 2: one replica, read at tp_rank 0, pp_rank 0.
			file: "sglang-tp2-pp2.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_SGLANG,
				model:  "m",
				queue:  f(5), running: f(8),
				// token_usage of the one replica, capacity 4096.
				kv: f(0.75), kvCap: f(4096),
				tp: 2, pp: 2, ep: 2,
			},
		},
		{
			// vLLM through an OpenTelemetry Collector: vllm_ names, counters
			// without _total, extra job/instance labels, no _created.
			file: "vllm-otel.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_VLLM,
				model:  "Qwen/Qwen2.5-7B-Instruct",
				// waiting 2+3, running 7+9.
				queue: f(5), running: f(16),
				// capacity 2000×16 per engine = 64000; usage weighted:
				// (0.6×32000 + 0.8×32000) / 64000 = 0.7.
				kv: f(0.7), kvCap: f(64000),
				// vllm_prompt_tokens 12000+8000, vllm_generation_tokens
				// 3000+4500, vllm_num_preemptions 1+0.
				prompt: f(20000), gen: f(7500), preempt: f(1),
				// vllm_request_success: 2+40 + 3+30.
				finished: f(75),
				// finished_reason length and stop only: aborted UNKNOWN.
				// engine "0" and "1".
				dp: 2,
				hists: [sample.NumHists]*sample.Histogram{
					// Bucket sums: le=0.04 5+2, 0.06 12+6, 0.08 20+10, 0.1 26+15,
					// 0.25 35+25, 0.5 40+31, 0.75 41+33, 1 and up 42+33;
					// sum 4.25+6.5.
					sample.TTFT: hist(10.75, 75, vllmTTFTBounds, rep(4, 0), []float64{7, 18, 30, 41, 60, 71, 74}, rep(12, 75)),
					// le=2.5 3+1, 5 20+10, 10 38+25, 15 42+31, 20 and up 42+33;
					// sum 250.5+240.25.
					sample.E2E: hist(490.75, 75, vllmReqBounds, rep(6, 0), []float64{4, 30, 63, 73}, rep(12, 75)),
				},
			},
		},
		{
			// SGLang of 2024: model in label name, older gauge names.
			file: "sglang-2024-name.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_SGLANG,
				// name="…": no series has model_name.
				model: "meta-llama/Llama-3.1-8B-Instruct",
				// num_requests_waiting 3 is preferred to queue_req 4;
				// num_requests_running 12.
				queue: f(3), running: f(12),
				// No num_used_tokens: token_usage 0.42; max_total_num_tokens.
				kv: f(0.42), kvCap: f(180000),
				prompt: f(250000), gen: f(120000),
				// No num_requests_total: e2e_request_latency_seconds_count.
				finished: f(500),
				hists: [sample.NumHists]*sample.Histogram{
					// le=0.04 10, 0.06 40, 0.08 80, 0.1 120, 0.25 300, 0.5 450,
					// 0.75 480, 1 495, 2.5 and up 500.
					sample.TTFT: hist(95.5, 500, sg24TTFTBounds, rep(4, 0), []float64{10, 40, 80, 120, 300, 450, 480, 495}, rep(9, 500)),
					// le=1 2, 2 10, 5 60, 10 200, 20 400, 50 490, 100 and up 500.
					sample.E2E: hist(7200.5, 500, sg24B125Bounds, []float64{2, 10, 60, 200, 400, 490}, rep(11, 500)),
					// time_per_output_token_seconds: le=0.02 1000 … 0.1 and up 30000.
					sample.TPOT: hist(1020, 30000, sg24TPOTBounds, rep(3, 0), []float64{1000, 5000, 9000, 20000, 26000, 29000}, rep(10, 30000)),
					// waiting_request_latency_seconds: le=1 300, 2 380, 5 450,
					// 10 490, 20 498, 50 and up 500.
					sample.QueueTime: hist(410.25, 500, sg24B125Bounds, []float64{300, 380, 450, 490, 498}, rep(12, 500)),
				},
			},
		},
		{
			// TensorRT-LLM behind Dynamo: trtllm_ families next to the
			// worker's dynamo_component_ ones.
			file: "trtllm-dynamo.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_TRTLLM,
				model:  "Qwen/Qwen3-0.6B",
				queue:  f(4), running: f(6),
				// kv_cache_utilization 0.35; capacity max_blocks 4096 ×
				// tokens_per_block 32 = 131072.
				kv: f(0.35), kvCap: f(131072),
				// No token counters, no preemptions: UNKNOWN.
				// request_success_total: length 8 + stop 12.
				finished: f(20),
				// finished_reason length and stop only: no abort seen,
				// aborted UNKNOWN.
				// min(request_success_created 1.7682648369328544e+09,
				//     1.7682650001e+09).
				created: time.Unix(1768264836, 932854400),
				hists: [sample.NumHists]*sample.Histogram{
					// le=0.04 3, 0.06 9, 0.08 14, 0.1 17, 0.25 and up 20.
					sample.TTFT: hist(1.25, 20, vllmTTFTBounds, rep(4, 0), []float64{3, 9, 14, 17}, rep(15, 20)),
					// le=0.8 2, 1 5, 1.5 11, 2 16, 2.5 19, 5 and up 20.
					sample.E2E: hist(29.5, 20, vllmReqBounds, rep(2, 0), []float64{2, 5, 11, 16, 19}, rep(15, 20)),
					// time_per_output_token: le=0.01 18, 0.025 and up 20.
					sample.TPOT: hist(0.145, 20, vllmITLBounds, []float64{18}, rep(19, 20)),
					// le=0.3 17, 0.5 19, 0.8 and up 20.
					sample.QueueTime: hist(1.75, 20, vllmReqBounds, []float64{17, 19}, rep(20, 20)),
				},
			},
		},
		{
			// Triton TRT-LLM backend, ensemble pipeline: batch-manager gauges
			// by label value, request counters without histograms.
			file: "triton-trtllm.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_TRITON,
				// model label of nv_trt_llm_request_metrics.
				model: "tensorrt_llm",
				// request_type="waiting" 2, "scheduled" 5.
				queue: f(2), running: f(5),
				// kv_cache_block_type="fraction" 0.25; "max" 4000 ×
				// "tokens_per" 64 = 256000.
				kv: f(0.25), kvCap: f(256000),
				// nv_inference_request_success, largest model:
				// preprocessing 122 (two requests still downstream).
				finished: f(122),
				// nv_inference_request_failure: ensemble 1, tensorrt_llm 1,
				// the others 0: the largest model.
				aborted: f(1),
				// No histograms at all: every percentile UNKNOWN.
				totals: [sample.NumHists]*sample.Total{
					// Sum and count each from the largest model:
					// nv_inference_request_duration_us ensemble 363000000 µs
					// = 363 s; nv_inference_request_success preprocessing
					// 122 (ensemble 120: the two in-flight requests bias
					// the mean by 2/122 until they finish).
					sample.E2E: {Sum: 363, Count: 122},
					// nv_inference_queue_duration_us ensemble 66650 µs.
					sample.QueueTime: {Sum: 0.06665, Count: 122},
				},
			},
		},
		{
			// TGI: unlabelled families, token counts from histogram sums.
			file: "tgi.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_TGI,
				// TGI labels no model.
				model: "",
				// tgi_queue_size 6, tgi_batch_current_size 24.
				queue: f(6), running: f(24),
				// No KV gauges: usage and capacity UNKNOWN.
				// tgi_request_input_length_sum, tgi_request_generated_tokens_sum.
				prompt: f(98765), gen: f(31000),
				// tgi_request_success (not tgi_request_count 130).
				finished: f(128),
				// tgi_request_failure{err="validation"} 2.
				aborted: f(2),
				hists: [sample.NumHists]*sample.Histogram{
					// Buckets k=24 (1.68 s) 10, k=25 40, k=26 90, k=27 120,
					// k=28 (8.52 s) and up 128.
					sample.E2E: hist(480, 128, tgiDurBounds, rep(23, 0), []float64{10, 40, 90, 120}, rep(9, 128)),
					// mean_time_per_token: k=14 (29 ms) 30, k=15 110, k=16 and up 128.
					sample.TPOT: hist(4.8, 128, tgiDurBounds, rep(13, 0), []float64{30, 110}, rep(21, 128)),
					// queue: k=5..9 50, k=10..16 100, k=17..21 120, k=22 and up 128.
					sample.QueueTime: hist(2.5, 128, tgiDurBounds, rep(4, 0), rep(5, 50), rep(7, 100), rep(5, 120), rep(15, 128)),
				},
			},
		},
		{
			// Dynamo frontend: queue and running from the two request
			// gauges, tokens from a histogram sum and a counter.
			file: "dynamo-frontend.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_DYNAMO,
				// Lower-cased, from queued_requests (the first concept).
				model: "deepseek-ai/deepseek-r1-distill-llama-8b",
				// queued_requests 4; running = inflight 14 − queued 4.
				queue: f(4), running: f(10),
				// No KV usage at the frontend; capacity model_total_kv_blocks
				// 8192 × model_kv_cache_block_size 16 = 131072.
				kvCap: f(131072),
				// input_sequence_tokens_sum 21000; output_tokens_total 12050.
				prompt: f(21000), gen: f(12050),
				// requests_total: error 2 + success 44.
				finished: f(46),
				// requests_total{status="error"} 2.
				aborted: f(2),
				hists: [sample.NumHists]*sample.Histogram{
					// le=0.1 3, 0.22 12, 0.47 30, 1 48, 2.2 55, 4.7 and up 56.
					sample.TTFT: hist(30.8, 56, dynTTFTBounds, rep(6, 0), []float64{3, 12, 30, 48, 55}, rep(8, 56)),
					// le=3.4 5, 6.3 20, 12 40, 22 and up 46.
					sample.E2E: hist(420.5, 46, dynReqBounds, rep(2, 0), []float64{5, 20, 40}, rep(6, 46)),
					// le=0.0067 500, 0.013 9000, 0.024 11800, 0.045 11950,
					// 0.084 and up 12000.
					sample.ITL: hist(180.5, 12000, dynITLBounds, rep(3, 0), []float64{500, 9000, 11800, 11950}, rep(7, 12000)),
				},
			},
		},
		{
			// Newer Dynamo frontend: active_requests − queued_requests.
			file: "dynamo-frontend-active.prom",
			want: want{
				engine: llmdiagv1.Engine_ENGINE_DYNAMO,
				model:  "qwen/qwen3-0.6b",
				// queued 3; active 9 − queued 3.
				queue: f(3), running: f(6),
				gen: f(900),
			},
		},
		{
			// The engine given wins over detection.
			file:   "vllm-v0.prom",
			engine: llmdiagv1.Engine_ENGINE_SGLANG,
			want:   want{engine: llmdiagv1.Engine_ENGINE_SGLANG},
		},
		{
			// An engine of another schema reads nothing, and says nothing
			// is wrong: its families are simply absent.
			file:   "vllm-v0.prom",
			engine: llmdiagv1.Engine_ENGINE_TGI,
			want:   want{engine: llmdiagv1.Engine_ENGINE_TGI},
		},
		{
			file:   "vllm-v0.prom",
			engine: unmapped,
			want: want{
				engine: unmapped,
				errs:   []string{"no metric mapping for engine 99"},
			},
		},
	}
	at := time.Date(2026, 1, 13, 0, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.file+"/"+tc.engine.String(), func(t *testing.T) {
			exp := parseFileWarn(t, tc.file)
			got := Extract(tc.engine, exp.Families, at)
			w := tc.want
			if len(exp.Warnings) != len(w.warnings) {
				t.Fatalf("warnings = %q, want %d matching %q", exp.Warnings, len(w.warnings), w.warnings)
			}
			for i, e := range w.warnings {
				if !strings.Contains(exp.Warnings[i], e) {
					t.Errorf("warning %d = %q, want it to contain %q", i, exp.Warnings[i], e)
				}
			}
			if !got.At.Equal(at) || !got.Up {
				t.Errorf("At %v Up %v, want %v true", got.At, got.Up, at)
			}
			if got.Engine != w.engine || got.Model != w.model {
				t.Errorf("engine %v model %q, want %v %q", got.Engine, got.Model, w.engine, w.model)
			}
			fig := testkit.Figures(t, 1e-12)
			fig("queue", got.Queue, w.queue)
			fig("running", got.Running, w.running)
			fig("kv usage", got.KVUsage, w.kv)
			fig("kv capacity", got.KVCapacityTokens, w.kvCap)
			fig("prompt tokens", got.PromptTokens, w.prompt)
			fig("generation tokens", got.GenerationTokens, w.gen)
			fig("preemptions", got.Preemptions, w.preempt)
			fig("requests finished", got.RequestsFinished, w.finished)
			fig("requests aborted", got.RequestsAborted, w.aborted)
			if d := got.CountersCreated.Sub(w.created); d < -time.Microsecond || d > time.Microsecond || got.CountersCreated.IsZero() != w.created.IsZero() {
				t.Errorf("CountersCreated = %v, want %v", got.CountersCreated, w.created)
			}
			if got.DataParallel != w.dp || got.TensorParallel != w.tp || got.PipelineParallel != w.pp || got.ExpertParallel != w.ep {
				t.Errorf("DP %d TP %d PP %d EP %d, want %d %d %d %d", got.DataParallel, got.TensorParallel, got.PipelineParallel, got.ExpertParallel, w.dp, w.tp, w.pp, w.ep)
			}
			for i := range sample.NumHists {
				if !reflect.DeepEqual(got.Hists[i], w.hists[i]) {
					t.Errorf("%s histogram = %+v\nwant %+v", i, got.Hists[i], w.hists[i])
				}
				if g, w := got.Totals[i], w.totals[i]; (g == nil) != (w == nil) || g != nil && (!samePtr(&g.Sum, &w.Sum) || !samePtr(&g.Count, &w.Count)) {
					t.Errorf("%s total = %+v, want %+v", i, g, w)
				}
			}
			if len(got.Errors) != len(w.errs) {
				t.Fatalf("errors = %q, want %d matching %q", got.Errors, len(w.errs), w.errs)
			}
			for i, e := range w.errs {
				if !strings.Contains(got.Errors[i], e) {
					t.Errorf("error %d = %q, want it to contain %q", i, got.Errors[i], e)
				}
			}
		})
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		file string
		want llmdiagv1.Engine
	}{
		{"vllm-v1-dynamo-metrics_examples.prom", llmdiagv1.Engine_ENGINE_VLLM},
		{"sglang-dynamo-metrics_examples.prom", llmdiagv1.Engine_ENGINE_SGLANG},
		{"vllm-v0.prom", llmdiagv1.Engine_ENGINE_VLLM},
		{"sglang-tp2-pp2.prom", llmdiagv1.Engine_ENGINE_SGLANG},
		// 8 vllm_ families, 1 target_info.
		{"vllm-otel.prom", llmdiagv1.Engine_ENGINE_VLLM},
		{"sglang-2024-name.prom", llmdiagv1.Engine_ENGINE_SGLANG},
		// 13 trtllm_ families (with _created) beat 0: the 5
		// dynamo_component_ families count for no engine.
		{"trtllm-dynamo.prom", llmdiagv1.Engine_ENGINE_TRTLLM},
		// 5 nv_trt_llm_ families; nv_inference_, nv_gpu_ do not count.
		{"triton-trtllm.prom", llmdiagv1.Engine_ENGINE_TRITON},
		{"tgi.prom", llmdiagv1.Engine_ENGINE_TGI},
		{"dynamo-frontend.prom", llmdiagv1.Engine_ENGINE_DYNAMO},
		{"dynamo-frontend-active.prom", llmdiagv1.Engine_ENGINE_DYNAMO},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			if got := Detect(parseFile(t, tc.file)); got != tc.want {
				t.Errorf("Detect = %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, body string
		want       llmdiagv1.Engine
	}{
		{
			// A Dynamo worker's runtime families make no engine.
			name: "other exporters only",
			body: "# TYPE dynamo_component_uptime_seconds gauge\ndynamo_component_uptime_seconds 110.2\nlmcache:local_cache_usage 0\n",
			want: llmdiagv1.Engine_ENGINE_UNSPECIFIED,
		},
		{
			// Triton serving no TRT-LLM model: generic families only.
			name: "triton without trtllm",
			body: "# TYPE nv_inference_request_success counter\nnv_inference_request_success{model=\"bert\",version=\"1\"} 5\n# TYPE nv_gpu_utilization gauge\nnv_gpu_utilization{gpu_uuid=\"x\"} 0.5\n",
			want: llmdiagv1.Engine_ENGINE_UNSPECIFIED,
		},
		{
			// One vllm_ family next to two dynamo_component_ ones.
			name: "vllm otel beside dynamo runtime",
			body: "# TYPE dynamo_component_uptime_seconds gauge\ndynamo_component_uptime_seconds 1\n# TYPE dynamo_component_requests_total counter\ndynamo_component_requests_total 3\n# TYPE vllm_num_requests_waiting gauge\nvllm_num_requests_waiting{engine=\"0\"} 1\n",
			want: llmdiagv1.Engine_ENGINE_VLLM,
		},
		{
			// A single frontend family marks a Dynamo frontend.
			name: "dynamo frontend beside its runtime",
			body: "# TYPE dynamo_component_uptime_seconds gauge\ndynamo_component_uptime_seconds 1\n# TYPE dynamo_frontend_queued_requests gauge\ndynamo_frontend_queued_requests{model=\"m\"} 0\n",
			want: llmdiagv1.Engine_ENGINE_DYNAMO,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			families := parseString(t, tc.body)
			if got := Detect(families); got != tc.want {
				t.Errorf("Detect = %v, want %v", got, tc.want)
			}
			if tc.want != llmdiagv1.Engine_ENGINE_UNSPECIFIED {
				return
			}
			s := Extract(llmdiagv1.Engine_ENGINE_UNSPECIFIED, families, time.Time{})
			if len(s.Errors) != 1 || s.Queue != nil {
				t.Errorf("Extract of no engine: errors %q queue %v", s.Errors, s.Queue)
			}
		})
	}
}

// TestCombinedSources covers label matching, products, differences and
// per-model totals beyond the fixture files.
func TestCombinedSources(t *testing.T) {
	triton := func(extra string) string {
		return "# TYPE nv_trt_llm_kv_cache_block_metrics gauge\n" +
			"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"max\",model=\"a\",version=\"1\"} 100\n" +
			"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"max\",model=\"b\",version=\"1\"} 300\n" +
			"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"a\",version=\"1\"} 0.5\n" +
			"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"b\",version=\"1\"} 0.1\n" + extra
	}
	tests := []struct {
		name   string
		engine llmdiagv1.Engine
		body   string
		check  func(t *testing.T, s *sample.Sample)
	}{
		{
			// Two TRT-LLM models: capacity and usage joined per model.
			name:   "triton two models",
			engine: llmdiagv1.Engine_ENGINE_TRITON,
			body: triton("nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"tokens_per\",model=\"a\",version=\"1\"} 32\n" +
				"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"tokens_per\",model=\"b\",version=\"1\"} 64\n"),
			check: func(t *testing.T, s *sample.Sample) {
				// 100×32 + 300×64 = 3200 + 19200; usage
				// (0.5×3200 + 0.1×19200) / 22400 = 3520/22400.
				if !samePtr(s.KVCapacityTokens, f(22400)) || !samePtr(s.KVUsage, f(3520.0/22400)) {
					t.Errorf("capacity %s usage %s, want 22400 0.15714…", testkit.Show(s.KVCapacityTokens), testkit.Show(s.KVUsage))
				}
				// No "waiting"/"scheduled" series: absent, not zero.
				if s.Queue != nil || s.Running != nil || len(s.Errors) != 0 {
					t.Errorf("queue %s running %s errors %q", testkit.Show(s.Queue), testkit.Show(s.Running), s.Errors)
				}
			},
		},
		{
			// A block size for one model only: the other's capacity is not
			// guessed, the product is unusable.
			name:   "triton one block size",
			engine: llmdiagv1.Engine_ENGINE_TRITON,
			body:   triton("nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"tokens_per\",model=\"a\",version=\"1\"} 64\n"),
			check: func(t *testing.T, s *sample.Sample) {
				if s.KVCapacityTokens != nil || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "no series matches") {
					t.Errorf("capacity %s errors %q, want nil [no series matches]", testkit.Show(s.KVCapacityTokens), s.Errors)
				}
			},
		},
		{
			// tokens_per of other models: the product is unusable, usage
			// falls back to the plain mean.
			name:   "triton unmatched operand",
			engine: llmdiagv1.Engine_ENGINE_TRITON,
			body: triton("nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"tokens_per\",model=\"c\",version=\"1\"} 32\n" +
				"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"tokens_per\",model=\"d\",version=\"1\"} 64\n"),
			check: func(t *testing.T, s *sample.Sample) {
				want := "nv_trt_llm_kv_cache_block_metrics × nv_trt_llm_kv_cache_block_metrics (kv_capacity_tokens): nv_trt_llm_kv_cache_block_metrics: no series matches"
				if s.KVCapacityTokens != nil || !samePtr(s.KVUsage, f(0.3)) || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], want) {
					t.Errorf("capacity %s usage %s errors %q, want nil 0.3 [%q]", testkit.Show(s.KVCapacityTokens), testkit.Show(s.KVUsage), s.Errors, want)
				}
			},
		},
		{
			// Durations without request counts: no mean, no error.
			name:   "triton duration only",
			engine: llmdiagv1.Engine_ENGINE_TRITON,
			body:   "# TYPE nv_inference_request_duration_us counter\nnv_inference_request_duration_us{model=\"m\",version=\"1\"} 5e6\n",
			check: func(t *testing.T, s *sample.Sample) {
				if s.Totals[sample.E2E] != nil || s.Hists[sample.E2E] != nil || len(s.Errors) != 0 {
					t.Errorf("E2E total %v hist %v errors %q, want nil nil none", s.Totals[sample.E2E], s.Hists[sample.E2E], s.Errors)
				}
			},
		},
		{
			// Gauges read at slightly different moments: queued above in
			// flight gives 0 decoding, never a negative count.
			name:   "dynamo difference clamped",
			engine: llmdiagv1.Engine_ENGINE_DYNAMO,
			body:   "# TYPE dynamo_frontend_inflight_requests gauge\ndynamo_frontend_inflight_requests{model=\"m\"} 1\n# TYPE dynamo_frontend_queued_requests gauge\ndynamo_frontend_queued_requests{model=\"m\"} 2\n",
			check: func(t *testing.T, s *sample.Sample) {
				if !samePtr(s.Running, f(0)) || !samePtr(s.Queue, f(2)) {
					t.Errorf("running %s queue %s, want 0 2", testkit.Show(s.Running), testkit.Show(s.Queue))
				}
			},
		},
		{
			// In flight without the queue gauge: running UNKNOWN, not the
			// in-flight count.
			name:   "dynamo difference operand missing",
			engine: llmdiagv1.Engine_ENGINE_DYNAMO,
			body:   "# TYPE dynamo_frontend_inflight_requests gauge\ndynamo_frontend_inflight_requests{model=\"m\"} 7\n",
			check: func(t *testing.T, s *sample.Sample) {
				if s.Running != nil || s.Queue != nil || len(s.Errors) != 0 {
					t.Errorf("running %s queue %s errors %q, want nil nil none", testkit.Show(s.Running), testkit.Show(s.Queue), s.Errors)
				}
			},
		},
		{
			// A histogram where a gauge operand is expected.
			name:   "dynamo operand of wrong type",
			engine: llmdiagv1.Engine_ENGINE_DYNAMO,
			body:   "# TYPE dynamo_frontend_model_total_kv_blocks histogram\ndynamo_frontend_model_total_kv_blocks_bucket{le=\"+Inf\"} 1\ndynamo_frontend_model_total_kv_blocks_sum 1\ndynamo_frontend_model_total_kv_blocks_count 1\n# TYPE dynamo_frontend_model_kv_cache_block_size gauge\ndynamo_frontend_model_kv_cache_block_size 16\n",
			check: func(t *testing.T, s *sample.Sample) {
				want := "(kv_capacity_tokens): dynamo_frontend_model_total_kv_blocks: family is a histogram, want a gauge or counter"
				if s.KVCapacityTokens != nil || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], want) {
					t.Errorf("capacity %s errors %q, want nil [%q]", testkit.Show(s.KVCapacityTokens), s.Errors, want)
				}
			},
		},
		{
			// vLLM through OpenTelemetry (no _total): abort and error are
			// aborted; other reasons, near misses and series without the
			// label are not.
			name:   "vllm otel aborted",
			engine: llmdiagv1.Engine_ENGINE_VLLM,
			body: "# TYPE vllm_request_success counter\n" +
				"vllm_request_success{engine=\"0\",finished_reason=\"abort\"} 3\n" +
				"vllm_request_success{engine=\"1\",finished_reason=\"error\"} 1\n" +
				"vllm_request_success{engine=\"0\",finished_reason=\"stop\"} 10\n" +
				"vllm_request_success{engine=\"0\",finished_reason=\"aborted\"} 100\n" +
				"vllm_request_success{engine=\"0\"} 1000\n",
			check: func(t *testing.T, s *sample.Sample) {
				if !samePtr(s.RequestsAborted, f(4)) || !samePtr(s.RequestsFinished, f(1114)) || len(s.Errors) != 0 {
					t.Errorf("aborted %s finished %s errors %q, want 4 1114 none", testkit.Show(s.RequestsAborted), testkit.Show(s.RequestsFinished), s.Errors)
				}
			},
		},
		{
			// vLLM V0 creates a reason's series with its first request: no
			// abort yet reads as UNKNOWN, not 0.
			name:   "vllm v0 no abort yet",
			engine: llmdiagv1.Engine_ENGINE_VLLM,
			body:   "# TYPE vllm:request_success_total counter\nvllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 7\n",
			check: func(t *testing.T, s *sample.Sample) {
				if s.RequestsAborted != nil || !samePtr(s.RequestsFinished, f(7)) {
					t.Errorf("aborted %s finished %s, want nil 7", testkit.Show(s.RequestsAborted), testkit.Show(s.RequestsFinished))
				}
			},
		},
		{
			// Triton failures by reason: summed per model, then the
			// largest model (the ensemble counts its stages' failures
			// again).
			name:   "triton failures by reason",
			engine: llmdiagv1.Engine_ENGINE_TRITON,
			body: "# TYPE nv_inference_request_failure counter\n" +
				"nv_inference_request_failure{model=\"ensemble\",reason=\"REJECTED\",version=\"1\"} 2\n" +
				"nv_inference_request_failure{model=\"ensemble\",reason=\"BACKEND\",version=\"1\"} 1\n" +
				"nv_inference_request_failure{model=\"tensorrt_llm\",reason=\"REJECTED\",version=\"1\"} 0\n" +
				"nv_inference_request_failure{model=\"tensorrt_llm\",reason=\"BACKEND\",version=\"1\"} 1\n" +
				"nv_inference_request_failure{model=\"preprocessing\",reason=\"CANCELED\",version=\"1\"} 2\n",
			check: func(t *testing.T, s *sample.Sample) {
				if !samePtr(s.RequestsAborted, f(3)) {
					t.Errorf("aborted %s, want 3 (ensemble: 2 + 1)", testkit.Show(s.RequestsAborted))
				}
			},
		},
		{
			// SGLang's tokenizer-side abort counter.
			name:   "sglang aborted",
			engine: llmdiagv1.Engine_ENGINE_SGLANG,
			body:   "# TYPE sglang:num_aborted_requests_total counter\nsglang:num_aborted_requests_total{model_name=\"m\"} 5\n",
			check: func(t *testing.T, s *sample.Sample) {
				if !samePtr(s.RequestsAborted, f(5)) {
					t.Errorf("aborted %s, want 5", testkit.Show(s.RequestsAborted))
				}
			},
		},
		{
			// TRT-LLM: cancelled requests are aborted; timeouts are not.
			name:   "trtllm cancelled",
			engine: llmdiagv1.Engine_ENGINE_TRTLLM,
			body: "# TYPE trtllm_request_success_total counter\n" +
				"trtllm_request_success_total{engine_type=\"trtllm\",finished_reason=\"cancelled\",model_name=\"m\"} 2\n" +
				"trtllm_request_success_total{engine_type=\"trtllm\",finished_reason=\"timeout\",model_name=\"m\"} 4\n" +
				"trtllm_request_success_total{engine_type=\"trtllm\",finished_reason=\"stop\",model_name=\"m\"} 5\n",
			check: func(t *testing.T, s *sample.Sample) {
				if !samePtr(s.RequestsAborted, f(2)) || !samePtr(s.RequestsFinished, f(11)) {
					t.Errorf("aborted %s finished %s, want 2 11", testkit.Show(s.RequestsAborted), testkit.Show(s.RequestsFinished))
				}
			},
		},
		{
			// Dynamo before its first error: no status="error" series,
			// aborted UNKNOWN.
			name:   "dynamo no error yet",
			engine: llmdiagv1.Engine_ENGINE_DYNAMO,
			body:   "# TYPE dynamo_frontend_requests_total counter\ndynamo_frontend_requests_total{model=\"m\",status=\"success\"} 9\n",
			check: func(t *testing.T, s *sample.Sample) {
				if s.RequestsAborted != nil || !samePtr(s.RequestsFinished, f(9)) {
					t.Errorf("aborted %s finished %s, want nil 9", testkit.Show(s.RequestsAborted), testkit.Show(s.RequestsFinished))
				}
			},
		},
		{
			// SGLang: model_name wins over the old name label.
			name:   "sglang model label preference",
			engine: llmdiagv1.Engine_ENGINE_SGLANG,
			body:   "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{name=\"old\"} 1\n# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"new\"} 2\n",
			check: func(t *testing.T, s *sample.Sample) {
				if s.Model != "new" {
					t.Errorf("model %q, want new", s.Model)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			families := parseString(t, tc.body)
			tc.check(t, Extract(tc.engine, families, time.Time{}))
		})
	}
}

func TestTableConsistent(t *testing.T) {
	// Families an engine reads but does not own (Detect does not count them).
	shared := []string{"nv_inference_"}
	seen := map[string]llmdiagv1.Engine{}
	for _, e := range Engines() {
		m, ok := Lookup(e)
		if !ok {
			t.Fatalf("Lookup(%v) failed", e)
		}
		for _, p := range m.Prefixes() {
			if other, dup := seen[p]; dup || p == "" {
				t.Errorf("%v: prefix %q empty or also %v's", e, p, other)
			}
			seen[p] = e
		}
		for c, srcs := range m.Concepts {
			_, isHist := c.Hist()
			for _, s := range srcs {
				if (s.Kind == Histogram) != isHist {
					t.Errorf("%v %v: family %q has kind %d", e, c, s.Family, s.Kind)
				}
				combined := s.Kind == Product || s.Kind == Difference
				if combined != (len(s.Operands) > 0) || combined != (s.Family == "") || combined && len(s.Operands) < 2 {
					t.Errorf("%v %v: kind %d with family %q and %d operands", e, c, s.Kind, s.Family, len(s.Operands))
				}
				for _, o := range s.Operands {
					if o.Kind != Gauge && o.Kind != Counter && o.Kind != Info {
						t.Errorf("%v %v: operand %q has kind %d", e, c, o.Family, o.Kind)
					}
				}
				for label, values := range s.MatchAny {
					if len(values) == 0 {
						t.Errorf("%v %v: family %q matches label %s against no value", e, c, s.Family, label)
					}
				}
				for _, name := range s.Families() {
					if !hasAnyPrefix(name, m.Prefixes()) && !hasAnyPrefix(name, shared) {
						t.Errorf("%v %v: family %q lacks prefix %q", e, c, name, m.Prefixes())
					}
				}
			}
		}
	}
	if _, ok := Lookup(llmdiagv1.Engine_ENGINE_UNSPECIFIED); ok {
		t.Errorf("Lookup(unspecified) succeeded")
	}
	// Every engine of the API has a mapping.
	for v := range llmdiagv1.Engine_name {
		if e := llmdiagv1.Engine(v); e != llmdiagv1.Engine_ENGINE_UNSPECIFIED {
			if _, ok := Lookup(e); !ok {
				t.Errorf("no mapping for %v", e)
			}
		}
	}
}

// parseFile parses testdata/name, failing t on an error or a warning.
func parseFile(t testing.TB, name string) map[string]*dto.MetricFamily {
	t.Helper()
	exp := parseFileWarn(t, name)
	if len(exp.Warnings) > 0 {
		t.Fatalf("Parse(%s) warns: %q", name, exp.Warnings)
	}
	return exp.Families
}

// parseFileWarn parses testdata/name, failing t on an error.
func parseFileWarn(t testing.TB, name string) *Exposition {
	t.Helper()
	r, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	exp, err := Parse(r, Limits{})
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return exp
}

// parseString parses body, failing t on an error or a warning.
func parseString(t testing.TB, body string) map[string]*dto.MetricFamily {
	t.Helper()
	exp, err := Parse(strings.NewReader(body), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.Warnings) > 0 {
		t.Fatalf("Parse warns: %q", exp.Warnings)
	}
	return exp.Families
}

// samePtr reports whether two optional figures are the same up to float
// rounding.
func samePtr(got, want *float64) bool { return testkit.NearPtr(got, want, 1e-12) }
