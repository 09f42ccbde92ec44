package engine

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

var inf = math.Inf(+1)

// Bucket layouts, as listed in the files.
var (
	vllmTTFTBounds = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560, inf}
	vllmITLBounds  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, inf}
	vllmReqBounds  = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680, inf}
	sgTTFTBounds   = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, inf}
	sgITLBounds    = []float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, inf}
	sgE2EBounds    = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400, inf}
	sgQueueBounds  = []float64{0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000, inf}
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
	created                        time.Time
	dp, tp                         int
	hists                          [sample.NumHists]*sample.Histogram
	errs                           []string // each a substring of one error, in order
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
				// request_success_total: stop 0 + length 2 + abort 0 + error 0.
				finished: f(2),
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
				// num_requests_total 1.0.
				finished: f(1),
				// no dp_rank label; one tp_rank ("0").
				dp: 0, tp: 1,
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
					"vllm:time_to_first_token_seconds (ttft): invalid histogram: no +Inf bucket",
					"vllm:e2e_request_latency_seconds (e2e): invalid histogram: bucket le=1 has count NaN",
					"vllm:inter_token_latency_seconds (inter_token): family is a summary, want a histogram",
					"vllm:request_queue_time_seconds (queue_time): histogram bucket layouts differ: bucket 0 is le=0.3 vs le=0.5",
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
				// dp_rank 0,1; tp_rank 0..3.
				dp: 2, tp: 4,
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
				tp: 2,
			},
		},
		{
			// The engine given wins over detection.
			file:   "vllm-v0.prom",
			engine: llmdiagv1.Engine_ENGINE_SGLANG,
			want:   want{engine: llmdiagv1.Engine_ENGINE_SGLANG},
		},
		{
			file:   "vllm-v0.prom",
			engine: llmdiagv1.Engine_ENGINE_TGI,
			want: want{
				engine: llmdiagv1.Engine_ENGINE_TGI,
				errs:   []string{"no metric mapping for engine ENGINE_TGI"},
			},
		},
	}
	at := time.Date(2026, 1, 13, 0, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.file+"/"+tc.engine.String(), func(t *testing.T) {
			families := parseFile(t, tc.file)
			got := Extract(tc.engine, families, at)
			w := tc.want
			if !got.At.Equal(at) || !got.Up {
				t.Errorf("At %v Up %v, want %v true", got.At, got.Up, at)
			}
			if got.Engine != w.engine || got.Model != w.model {
				t.Errorf("engine %v model %q, want %v %q", got.Engine, got.Model, w.engine, w.model)
			}
			for _, c := range []struct {
				name      string
				got, want *float64
			}{
				{"queue", got.Queue, w.queue},
				{"running", got.Running, w.running},
				{"kv usage", got.KVUsage, w.kv},
				{"kv capacity", got.KVCapacityTokens, w.kvCap},
				{"prompt tokens", got.PromptTokens, w.prompt},
				{"generation tokens", got.GenerationTokens, w.gen},
				{"preemptions", got.Preemptions, w.preempt},
				{"requests finished", got.RequestsFinished, w.finished},
			} {
				if !samePtr(c.got, c.want) {
					t.Errorf("%s = %s, want %s", c.name, show(c.got), show(c.want))
				}
			}
			if d := got.CountersCreated.Sub(w.created); d < -time.Microsecond || d > time.Microsecond || got.CountersCreated.IsZero() != w.created.IsZero() {
				t.Errorf("CountersCreated = %v, want %v", got.CountersCreated, w.created)
			}
			if got.DataParallel != w.dp || got.TensorParallel != w.tp {
				t.Errorf("DP %d TP %d, want %d %d", got.DataParallel, got.TensorParallel, w.dp, w.tp)
			}
			for i := range sample.NumHists {
				if !reflect.DeepEqual(got.Hists[i], w.hists[i]) {
					t.Errorf("%s histogram = %+v\nwant %+v", i, got.Hists[i], w.hists[i])
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
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			if got := Detect(parseFile(t, tc.file)); got != tc.want {
				t.Errorf("Detect = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("other exporters only", func(t *testing.T) {
		families, err := Parse(strings.NewReader("# TYPE dynamo_component_uptime_seconds gauge\ndynamo_component_uptime_seconds 110.2\nlmcache:local_cache_usage 0\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := Detect(families); got != llmdiagv1.Engine_ENGINE_UNSPECIFIED {
			t.Errorf("Detect = %v, want unspecified", got)
		}
		s := Extract(llmdiagv1.Engine_ENGINE_UNSPECIFIED, families, time.Time{})
		if len(s.Errors) != 1 || s.Queue != nil {
			t.Errorf("Extract of no engine: errors %q queue %v", s.Errors, s.Queue)
		}
	})
}

func TestTableConsistent(t *testing.T) {
	for _, e := range Engines() {
		m, ok := Lookup(e)
		if !ok {
			t.Fatalf("Lookup(%v) failed", e)
		}
		for c, srcs := range m.Concepts {
			_, isHist := c.Hist()
			for _, s := range srcs {
				if !strings.HasPrefix(s.Family, m.Prefix) {
					t.Errorf("%v %v: family %q lacks prefix %q", e, c, s.Family, m.Prefix)
				}
				if (s.Kind == Histogram) != isHist {
					t.Errorf("%v %v: family %q has kind %d", e, c, s.Family, s.Kind)
				}
			}
		}
	}
	if _, ok := Lookup(llmdiagv1.Engine_ENGINE_UNSPECIFIED); ok {
		t.Errorf("Lookup(unspecified) succeeded")
	}
}

func parseFile(t testing.TB, name string) map[string]*dto.MetricFamily {
	t.Helper()
	r, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	families, err := Parse(r)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return families
}

func samePtr(got, want *float64) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return math.Abs(*got-*want) <= 1e-12*math.Max(1, math.Abs(*want))
}

func show(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
