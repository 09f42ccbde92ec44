package sim_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sim"
)

// The engines' bucket lists, as docs/engine-metrics.md gives them.
var (
	refTTFT    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	refITL     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	refLatency = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}

	refSGLangTTFT  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	refSGLangITL   = []float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8}
	refSGLangE2E   = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
	refSGLangQueue = []float64{0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
		200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}
)

// refTGIDuration is 0.0001·1.5^k for k = 1..35.
func refTGIDuration() []float64 {
	b := make([]float64, 35)
	for k := range b {
		b[k] = 0.0001 * math.Pow(1.5, float64(k+1))
	}
	return b
}

// refLinear is TGI's token-count bounds: max/100·k for k = 1..100.
func refLinear(max int) []float64 {
	b := make([]float64, 100)
	for k := range b {
		b[k] = float64(max) * float64(k+1) / 100
	}
	return b
}

// ref125 is vLLM's 1-2-5 series up to max.
func ref125(max int) []float64 {
	var b []float64
	for e := 1; ; e *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*e > max {
				return b
			}
			b = append(b, float64(m*e))
		}
	}
}

// family is what an exposition must declare for one metric family.
type family struct {
	typ     dto.MetricType
	labels  []string  // label names, sorted
	buckets []float64 // for histograms
	model   string    // value of the model label (model_name, name or model)
	approx  bool      // buckets compared with a relative tolerance
	lazy    bool      // appears with its first event: may be missing
}

// families is every family a node of engine e exposes, keyed by name.
func families(e sim.Engine, n sim.Node) map[string]family {
	const (
		G = dto.MetricType_GAUGE
		C = dto.MetricType_COUNTER
		H = dto.MetricType_HISTOGRAM
	)
	out := map[string]family{}
	add := func(name string, typ dto.MetricType, buckets []float64, model string, labels ...string) {
		slices.Sort(labels)
		out[name] = family{typ: typ, labels: labels, buckets: buckets, model: model}
	}
	maxLen := n.Perf.MaxModelLen
	switch e {
	case sim.VLLM, sim.VLLMOTel:
		nm := func(s string) string { return "vllm:" + s }
		if e == sim.VLLMOTel {
			nm = func(s string) string { return "vllm_" + strings.TrimSuffix(s, "_total") }
		}
		l := []string{"model_name", "engine"}
		for _, g := range []string{"num_requests_waiting", "num_requests_running", "kv_cache_usage_perc"} {
			add(nm(g), G, nil, n.Model, l...)
		}
		for _, c := range []string{"prefix_cache_queries_total", "prefix_cache_hits_total", "num_preemptions_total",
			"prompt_tokens_total", "generation_tokens_total"} {
			add(nm(c), C, nil, n.Model, l...)
		}
		add(nm("request_success_total"), C, nil, n.Model, "model_name", "engine", "finished_reason")
		add(nm("request_prompt_tokens"), H, ref125(maxLen), n.Model, l...)
		add(nm("request_generation_tokens"), H, ref125(maxLen), n.Model, l...)
		add(nm("time_to_first_token_seconds"), H, refTTFT, n.Model, l...)
		add(nm("inter_token_latency_seconds"), H, refITL, n.Model, l...)
		add(nm("request_time_per_output_token_seconds"), H, refITL, n.Model, l...)
		for _, h := range []string{"e2e_request_latency_seconds", "request_queue_time_seconds",
			"request_inference_time_seconds", "request_prefill_time_seconds", "request_decode_time_seconds"} {
			add(nm(h), H, refLatency, n.Model, l...)
		}
		add(nm("cache_config_info"), G, nil, "", "block_size", "cache_dtype", "enable_prefix_caching", "engine",
			"gpu_memory_utilization", "num_gpu_blocks")
	case sim.SGLang, sim.SGLangLegacy:
		m := "model_name"
		if e == sim.SGLangLegacy {
			m = "name"
		}
		sched := []string{"engine_type", m, "moe_ep_rank", "pp_rank", "tp_rank"}
		if n.Profile.DataParallel > 1 {
			sched = []string{"dp_rank", "engine_type", m, "moe_ep_rank", "pp_rank", "tp_rank"}
		}
		for _, g := range []string{"num_queue_reqs", "num_running_reqs", "token_usage", "num_used_tokens",
			"max_total_num_tokens", "gen_throughput"} {
			add("sglang:"+g, G, nil, n.Model, sched...)
		}
		add("sglang:num_retracted_requests_total", C, nil, n.Model, sched...)
		add("sglang:queue_time_seconds", H, refSGLangQueue, n.Model, sched...)
		for _, c := range []string{"prompt_tokens_total", "generation_tokens_total", "num_requests_total", "num_aborted_requests_total"} {
			add("sglang:"+c, C, nil, n.Model, m)
		}
		add("sglang:time_to_first_token_seconds", H, refSGLangTTFT, n.Model, m)
		add("sglang:inter_token_latency_seconds", H, refSGLangITL, n.Model, m)
		add("sglang:e2e_request_latency_seconds", H, refSGLangE2E, n.Model, m)
	case sim.TRTLLM:
		l := []string{"model_name", "engine_type"}
		for _, g := range []string{"num_requests_waiting", "num_requests_running", "kv_cache_utilization",
			"kv_cache_max_blocks", "kv_cache_tokens_per_block"} {
			add("trtllm_"+g, G, nil, n.Model, l...)
		}
		add("trtllm_time_to_first_token_seconds", H, refTTFT, n.Model, l...)
		add("trtllm_e2e_request_latency_seconds", H, refLatency, n.Model, l...)
		add("trtllm_time_per_output_token_seconds", H, refITL, n.Model, l...)
		add("trtllm_request_queue_time_seconds", H, refLatency, n.Model, l...)
		add("trtllm_request_success_total", C, nil, n.Model, "model_name", "engine_type", "finished_reason")
	case sim.Triton:
		add("nv_trt_llm_request_metrics", G, nil, n.Model, "model", "version", "request_type")
		add("nv_trt_llm_kv_cache_block_metrics", G, nil, n.Model, "model", "version", "kv_cache_block_type")
		for _, c := range []string{"nv_inference_request_success", "nv_inference_count",
			"nv_inference_request_duration_us", "nv_inference_queue_duration_us"} {
			add(c, C, nil, n.Model, "model", "version")
		}
		add("nv_inference_request_failure", C, nil, n.Model, "model", "reason", "version")
	case sim.TGI:
		add("tgi_queue_size", G, nil, "")
		add("tgi_batch_current_size", G, nil, "")
		add("tgi_request_success", C, nil, "")
		add("tgi_request_failure", C, nil, "", "err")
		f := out["tgi_request_failure"]
		f.lazy = true
		out["tgi_request_failure"] = f
		for _, h := range []string{"tgi_request_duration", "tgi_request_queue_duration", "tgi_request_mean_time_per_token_duration"} {
			add(h, H, refTGIDuration(), "")
		}
		add("tgi_request_input_length", H, refLinear(maxLen-1), "")
		add("tgi_request_generated_tokens", H, refLinear(maxLen), "")
		for name, f := range out {
			if f.typ == H {
				f.approx = true // computed in floating point
				out[name] = f
			}
		}
	case sim.Dynamo:
		lower := strings.ToLower(n.Model)
		add("dynamo_frontend_queued_requests", G, nil, lower, "model")
		add("dynamo_frontend_inflight_requests", G, nil, lower, "model")
		add("dynamo_frontend_time_to_first_token_seconds", H, refTTFT, lower, "model")
		add("dynamo_frontend_request_duration_seconds", H, refLatency, lower, "model")
		add("dynamo_frontend_inter_token_latency_seconds", H, refITL, lower, "model")
		add("dynamo_frontend_input_sequence_tokens", H, ref125(maxLen), lower, "model")
		add("dynamo_frontend_output_tokens_total", C, nil, lower, "model")
		add("dynamo_frontend_requests_total", C, nil, lower, "endpoint", "model", "request_type", "status")
		add("dynamo_frontend_model_total_kv_blocks", G, nil, n.Model, "model")
		add("dynamo_frontend_model_kv_cache_block_size", G, nil, n.Model, "model")
	}
	return out
}

// checkSchema checks that mfs has exactly the families of engine e, with
// their types, label names, model label values and buckets.
func checkSchema(t *testing.T, e sim.Engine, n sim.Node, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	checkFamilies(t, e, families(e, n), mfs)
}

// checkFamilies checks that mfs has exactly the families of want (the lazy
// ones may be missing), with their types, label names, model label values
// and buckets.
func checkFamilies(t *testing.T, e sim.Engine, want map[string]family, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("no schema for engine %q", e)
	}
	for _, name := range sortedKeys(mfs) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: unexpected family %s", e, name)
		}
	}
	for _, name := range sortedKeys(want) {
		w, mf := want[name], mfs[name]
		if mf == nil {
			if !w.lazy {
				t.Errorf("%s: %s missing", e, name)
			}
			continue
		}
		if mf.GetType() != w.typ {
			t.Errorf("%s: %s is a %v, want a %v", e, name, mf.GetType(), w.typ)
		}
		if len(mf.GetMetric()) == 0 {
			t.Errorf("%s: %s has no series", e, name)
		}
		for _, m := range mf.GetMetric() {
			l := labelsOf(m)
			if got := sortedKeys(l); !slices.Equal(got, w.labels) {
				t.Errorf("%s: %s labels %v, want %v", e, name, got, w.labels)
			}
			for _, k := range []string{"model_name", "name", "model"} {
				if v, ok := l[k]; ok && v != w.model {
					t.Errorf("%s: %s %s=%q, want %q", e, name, k, v, w.model)
				}
			}
			if w.typ != dto.MetricType_HISTOGRAM {
				continue
			}
			got := bounds(m)
			ok := slices.Equal(got, w.buckets)
			if w.approx && len(got) == len(w.buckets) {
				ok = true
				for i := range got {
					ok = ok && math.Abs(got[i]-w.buckets[i]) <= 1e-12*w.buckets[i]
				}
			}
			if !ok {
				t.Errorf("%s: %s buckets %v, want %v", e, name, got, w.buckets)
			}
		}
	}
}

// value sums a gauge or counter family's series whose labels include match
// (label=value pairs).
func value(mfs map[string]*dto.MetricFamily, name string, match ...string) float64 {
	var v float64
next:
	for _, m := range mfs[name].GetMetric() {
		l := labelsOf(m)
		for i := 0; i+1 < len(match); i += 2 {
			if l[match[i]] != match[i+1] {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			v += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v += m.GetGauge().GetValue()
		default:
			v += m.GetUntyped().GetValue()
		}
	}
	return v
}

func blockSize(n sim.Node) int {
	switch {
	case n.Perf.BlockSize > 0:
		return n.Perf.BlockSize
	case n.Engine == sim.SGLang || n.Engine == sim.SGLangLegacy:
		return 1
	}
	return 16
}

// capacity is the node's KV capacity in tokens, whole blocks.
func capacity(n sim.Node) float64 {
	bs := blockSize(n)
	return float64(max(int(n.Profile.DataParallel), 1) * (n.Perf.KVCapacityTokens / bs * bs))
}

// checkValues checks that the exposition of engine e agrees with the
// node's simulated state.
func checkValues(t *testing.T, e sim.Engine, n sim.Node, mfs map[string]*dto.MetricFamily, st sim.NodeStats) {
	t.Helper()
	eq := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
			t.Errorf("%s %s: %s = %v, want %v", e, n.ID, what, got, want)
		}
	}
	in := func(what string, got, lo, hi float64) {
		t.Helper()
		if got < lo || got > hi {
			t.Errorf("%s %s: %s = %v, want in [%v, %v]", e, n.ID, what, got, lo, hi)
		}
	}
	h := func(name string) hist { return histOf(mfs, name) }
	fin, wait, run := float64(st.Finished), float64(st.Waiting), float64(st.Running)
	// Every finished request had a first token; so may have the running
	// ones and preempted ones back in the queue.
	firstTokens := func(what string, got float64) { t.Helper(); in(what, got, fin, fin+run+wait) }
	cores := float64(max(int(n.Profile.DataParallel), 1))
	switch e {
	case sim.VLLM, sim.VLLMOTel:
		nm := func(s string) string { return "vllm:" + s }
		if e == sim.VLLMOTel {
			nm = func(s string) string { return "vllm_" + strings.TrimSuffix(s, "_total") }
		}
		eq("waiting", value(mfs, nm("num_requests_waiting")), wait)
		eq("running", value(mfs, nm("num_requests_running")), run)
		eq("KV usage (mean over engines)", value(mfs, nm("kv_cache_usage_perc"))/cores, st.KVUsage)
		eq("prompt tokens", value(mfs, nm("prompt_tokens_total")), float64(st.PromptTokens))
		eq("generation tokens", value(mfs, nm("generation_tokens_total")), float64(st.GenerationTokens))
		eq("preemptions", value(mfs, nm("num_preemptions_total")), float64(st.Preemptions))
		s := nm("request_success_total")
		eq("success stop+length", value(mfs, s, "finished_reason", "stop")+value(mfs, s, "finished_reason", "length"), fin)
		eq("success abort", value(mfs, s, "finished_reason", "abort"), float64(st.Aborted))
		eq("E2E count", h(nm("e2e_request_latency_seconds")).count, fin)
		firstTokens("TTFT count", h(nm("time_to_first_token_seconds")).count)
		in("queue time count", h(nm("request_queue_time_seconds")).count, h(nm("time_to_first_token_seconds")).count, math.Inf(1))
	case sim.SGLang, sim.SGLangLegacy:
		eq("waiting", value(mfs, "sglang:num_queue_reqs"), wait)
		eq("running", value(mfs, "sglang:num_running_reqs"), run)
		eq("KV used/capacity", value(mfs, "sglang:num_used_tokens")/value(mfs, "sglang:max_total_num_tokens"), st.KVUsage)
		eq("KV capacity", value(mfs, "sglang:max_total_num_tokens"), capacity(n))
		eq("prompt tokens", value(mfs, "sglang:prompt_tokens_total"), float64(st.PromptTokens))
		eq("generation tokens", value(mfs, "sglang:generation_tokens_total"), float64(st.GenerationTokens))
		eq("retractions", value(mfs, "sglang:num_retracted_requests_total"), float64(st.Preemptions))
		eq("requests", value(mfs, "sglang:num_requests_total"), fin)
		eq("aborted", value(mfs, "sglang:num_aborted_requests_total"), float64(st.Aborted))
		eq("E2E count", h("sglang:e2e_request_latency_seconds").count, fin)
		firstTokens("TTFT count", h("sglang:time_to_first_token_seconds").count)
	case sim.TRTLLM:
		eq("waiting", value(mfs, "trtllm_num_requests_waiting"), wait)
		eq("running", value(mfs, "trtllm_num_requests_running"), run)
		eq("KV utilization", value(mfs, "trtllm_kv_cache_utilization"), st.KVUsage)
		eq("KV capacity", value(mfs, "trtllm_kv_cache_max_blocks")*value(mfs, "trtllm_kv_cache_tokens_per_block"), capacity(n))
		s := "trtllm_request_success_total"
		eq("success stop+length", value(mfs, s, "finished_reason", "stop")+value(mfs, s, "finished_reason", "length"), fin)
		eq("success abort", value(mfs, s, "finished_reason", "abort"), float64(st.Aborted))
		eq("E2E count", h("trtllm_e2e_request_latency_seconds").count, fin)
		in("TPOT count", h("trtllm_time_per_output_token_seconds").count, 0, fin)
		firstTokens("TTFT count", h("trtllm_time_to_first_token_seconds").count)
		in("queue time count", h("trtllm_request_queue_time_seconds").count, h("trtllm_time_to_first_token_seconds").count, math.Inf(1))
	case sim.Triton:
		r := func(typ string) float64 { return value(mfs, "nv_trt_llm_request_metrics", "request_type", typ) }
		k := func(typ string) float64 {
			return value(mfs, "nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", typ)
		}
		eq("waiting", r("waiting"), wait)
		eq("scheduled", r("scheduled"), run)
		eq("active", r("active"), run)
		in("context", r("context"), 0, run)
		eq("max", r("max"), cores*float64(n.Perf.MaxNumSeqs))
		eq("KV fraction", k("fraction"), st.KVUsage)
		eq("KV used/max", k("used")/k("max"), st.KVUsage)
		eq("KV free+used", k("free")+k("used"), k("max"))
		eq("KV capacity", k("max")*k("tokens_per"), capacity(n))
		eq("success", value(mfs, "nv_inference_request_success"), fin)
		eq("count", value(mfs, "nv_inference_count"), fin)
		eq("failure", value(mfs, "nv_inference_request_failure"), float64(st.Aborted))
		d, q := value(mfs, "nv_inference_request_duration_us"), value(mfs, "nv_inference_queue_duration_us")
		in("queue duration µs", q, 0, d)
		if fin > 0 {
			in("mean request duration s", d/1e6/fin, 0.01, 3600)
		}
	case sim.TGI:
		eq("queue size", value(mfs, "tgi_queue_size"), wait)
		eq("batch size", value(mfs, "tgi_batch_current_size"), run)
		eq("success", value(mfs, "tgi_request_success"), fin)
		eq("failure", value(mfs, "tgi_request_failure"), float64(st.Aborted))
		for _, name := range []string{"tgi_request_duration", "tgi_request_queue_duration",
			"tgi_request_mean_time_per_token_duration", "tgi_request_generated_tokens"} {
			eq(name+" count", h(name).count, fin)
		}
		in("generated tokens sum", h("tgi_request_generated_tokens").sum, 0, float64(st.GenerationTokens))
		eq("input length sum", h("tgi_request_input_length").sum, float64(st.PromptTokens))
		firstTokens("input length count", h("tgi_request_input_length").count)
	case sim.Dynamo:
		eq("inflight", value(mfs, "dynamo_frontend_inflight_requests"), wait+run)
		in("queued", value(mfs, "dynamo_frontend_queued_requests"), max(0, wait-float64(st.Preemptions)), wait+run)
		eq("output tokens", value(mfs, "dynamo_frontend_output_tokens_total"), float64(st.GenerationTokens))
		eq("input tokens sum", h("dynamo_frontend_input_sequence_tokens").sum, float64(st.PromptTokens))
		eq("requests success", value(mfs, "dynamo_frontend_requests_total", "status", "success"), fin)
		eq("requests error", value(mfs, "dynamo_frontend_requests_total", "status", "error"), float64(st.Aborted))
		eq("duration count", h("dynamo_frontend_request_duration_seconds").count, fin)
		firstTokens("TTFT count", h("dynamo_frontend_time_to_first_token_seconds").count)
		eq("KV capacity", value(mfs, "dynamo_frontend_model_total_kv_blocks")*value(mfs, "dynamo_frontend_model_kv_cache_block_size"), capacity(n))
	default:
		t.Fatalf("no value checks for engine %q", e)
	}
}

// TestSchemas runs the schemas scenario: one node per engine, each exposing
// its engine's families, labels and buckets, with values that agree with
// the simulated state, and listed in the fleet file under the engine's
// fleet name.
func TestSchemas(t *testing.T) {
	cfg := simtest.Scenario(t, "schemas", 1)
	engines := sim.Engines()
	if len(cfg.Nodes) != len(engines) {
		t.Fatalf("schemas has %d nodes, want one per engine (%d)", len(cfg.Nodes), len(engines))
	}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(time.Minute)
	for i, n := range cfg.Nodes {
		if n.Engine != engines[i] || n.ID != string(n.Engine)+"-0" {
			t.Errorf("node %d: %s engine %s, want %s-0 with engine %s", i, n.ID, n.Engine, engines[i], engines[i])
		}
		mfs := scrape(t, f, n.ID)
		checkSchema(t, n.Engine, n, mfs)
		st, _ := f.Stats(n.ID)
		if st.Finished < 20 || st.Waiting > 2 || st.KVUsage > 0.5 || st.Preemptions > 0 || st.Aborted > 0 {
			t.Errorf("%s: not a healthy node after a minute: %+v", n.ID, st)
		}
		checkValues(t, n.Engine, n, mfs, st)
	}
	wantFleet := map[sim.Engine]string{
		sim.VLLM: "vllm", sim.VLLMOTel: "vllm", sim.SGLang: "sglang", sim.SGLangLegacy: "sglang",
		sim.TRTLLM: "trtllm", sim.Triton: "triton", sim.TGI: "tgi", sim.Dynamo: "dynamo",
	}
	for i, fn := range f.FleetFile().Nodes {
		e := cfg.Nodes[i].Engine
		if fn.Engine != wantFleet[e] || e.FleetName() != wantFleet[e] {
			t.Errorf("%s: fleet engine %q (FleetName %q), want %q", fn.ID, fn.Engine, e.FleetName(), wantFleet[e])
		}
		if _, err := fleet.ParseEngine(fn.Engine); err != nil {
			t.Errorf("%s: %v", fn.ID, err)
		}
		if fn.Model != sim.ModelQwen {
			t.Errorf("%s: fleet model %q", fn.ID, fn.Model)
		}
	}
	if sim.Engine("llama.cpp").FleetName() != "" {
		t.Error("unknown engine has a fleet name")
	}
}

// TestSchemasServe serves the schemas scenario on loopback and scrapes
// every node over HTTP.
func TestSchemasServe(t *testing.T) {
	cfg := simtest.Scenario(t, "schemas", 1)
	cfg.Warmup = 20 * time.Second
	// The clock never advances: the state stays that of the end of warm-up.
	f, ff := listen(t, cfg, testkit.NewClock(time.Unix(0, 0)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	for i, fn := range ff.Nodes {
		var (
			body []byte
			err  error
		)
		testkit.Eventually(t, time.Minute, fn.ID+" to answer", func() bool {
			body, err = get(t, fn.URL)
			return err == nil
		})
		n := cfg.Nodes[i]
		checkSchema(t, n.Engine, n, parse(t, body))
		want, err := f.Metrics(n.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, want) {
			t.Errorf("%s: HTTP body differs from Metrics", n.ID)
		}
	}
}

// TestWithEngine runs scenarios in every schema: the simulated state is the
// same as in the scenario's own engines (only the exposition changes), each
// exposition has its schema and agrees with the state, and its latency and
// token figures are those the vLLM schema shows for the same requests.
func TestWithEngine(t *testing.T) {
	t.Parallel()
	for _, name := range sim.Scenarios() {
		cfg := simtest.Scenario(t, name, 1)
		orig := slices.Clone(cfg.Nodes)
		for _, e := range sim.Engines() {
			w := sim.WithEngine(cfg, e)
			if err := w.Validate(); err != nil {
				t.Errorf("%s in %s: %v", name, e, err)
			}
			for _, n := range w.Nodes {
				if n.Engine != e {
					t.Errorf("%s in %s: node %s has engine %s", name, e, n.ID, n.Engine)
				}
			}
		}
		if !slices.EqualFunc(cfg.Nodes, orig, func(a, b sim.Node) bool { return a.Engine == b.Engine && a.Perf == b.Perf }) {
			t.Errorf("WithEngine modified scenario %s", name)
		}
	}

	// Two nodes from the scenarios: vLLM with 8 data-parallel cores in
	// lockstep (seed's DeepSeek) and SGLang with a growing queue
	// (overloaded's GLM). A node's random draws depend on its id and the
	// seed only, so each behaves as in its scenario.
	seed := simtest.Scenario(t, "seed", 1)
	over := simtest.Scenario(t, "overloaded", 1)
	cfg := sim.Config{Seed: 1, Nodes: []sim.Node{seed.Nodes[0], over.Nodes[0]}}
	run := func(cfg sim.Config) *sim.Fleet {
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Step(30 * time.Second)
		return f
	}
	base := run(cfg)
	if sim.Engines()[0] != sim.VLLM {
		t.Fatal("Engines() does not list VLLM first")
	}
	ref := map[string]map[string]*dto.MetricFamily{} // the vLLM schema's, by node
	for _, e := range sim.Engines() {
		w := sim.WithEngine(cfg, e)
		f := run(w)
		for _, n := range w.Nodes {
			st, _ := f.Stats(n.ID)
			want, _ := base.Stats(n.ID)
			if st != want {
				t.Errorf("%s in %s: state %+v, want %+v as in the scenario's engines", n.ID, e, st, want)
			}
			mfs := scrape(t, f, n.ID)
			checkSchema(t, e, n, mfs)
			checkValues(t, e, n, mfs, st)
			if e == sim.VLLM {
				ref[n.ID] = mfs
				continue
			}
			crossCheck(t, e, n.ID, mfs, ref[n.ID])
		}
	}
	for _, id := range base.Nodes() {
		if s, _ := base.Stats(id); s.Finished == 0 {
			t.Errorf("%s: no request finished: the cross-checks compare nothing", id)
		}
	}
	if s, _ := base.Stats("glm-4.6-0"); s.Waiting < 20 {
		t.Errorf("overloaded node: queue %d after 30s, want it growing", s.Waiting)
	}
}

// crossCheck compares the latency and token figures of engine e's
// exposition with those of the vLLM schema for the same simulated requests.
func crossCheck(t *testing.T, e sim.Engine, id string, mfs, vm map[string]*dto.MetricFamily) {
	t.Helper()
	what := fmt.Sprintf("%s in %s", id, e)
	near := func(f string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
			t.Errorf("%s: %s = %v, vLLM schema says %v", what, f, got, want)
		}
	}
	// same compares count and sum and, with the same bounds, every bucket.
	same := func(name string, got hist, vllmName string) {
		t.Helper()
		want := histOf(vm, "vllm:"+vllmName)
		near(name+" count", got.count, want.count)
		near(name+" sum", got.sum, want.sum)
		if slices.Equal(got.bounds, want.bounds) && !slices.Equal(got.cum, want.cum) {
			t.Errorf("%s: %s buckets %v, vLLM schema has %v", what, name, got.cum, want.cum)
		}
	}
	h := func(name string) hist { return histOf(mfs, name) }
	vh := func(name string) hist { return histOf(vm, "vllm:"+name) }
	// Queue time of the finished requests: E2E minus time since scheduled.
	finishedQueue := vh("e2e_request_latency_seconds").sum - vh("request_inference_time_seconds").sum
	switch e {
	case sim.VLLMOTel:
		for name, mf := range vm {
			otel := "vllm_" + strings.TrimPrefix(name, "vllm:")
			if mf.GetType() == dto.MetricType_COUNTER {
				otel = strings.TrimSuffix(otel, "_total")
			}
			got := proto.Clone(mfs[otel]).(*dto.MetricFamily)
			if got.Name = mf.Name; !proto.Equal(mf, got) {
				t.Errorf("%s: %s differs from %s", what, otel, name)
			}
		}
	case sim.SGLang, sim.SGLangLegacy:
		same("TTFT", h("sglang:time_to_first_token_seconds"), "time_to_first_token_seconds")
		same("E2E", h("sglang:e2e_request_latency_seconds"), "e2e_request_latency_seconds")
		same("ITL", h("sglang:inter_token_latency_seconds"), "inter_token_latency_seconds")
		same("queue time", h("sglang:queue_time_seconds"), "request_queue_time_seconds")
	case sim.TRTLLM:
		same("TTFT", h("trtllm_time_to_first_token_seconds"), "time_to_first_token_seconds")
		same("E2E", h("trtllm_e2e_request_latency_seconds"), "e2e_request_latency_seconds")
		same("TPOT", h("trtllm_time_per_output_token_seconds"), "request_time_per_output_token_seconds")
		same("queue time", h("trtllm_request_queue_time_seconds"), "request_queue_time_seconds")
	case sim.Triton:
		near("request duration s", value(mfs, "nv_inference_request_duration_us")/1e6, vh("e2e_request_latency_seconds").sum)
		near("queue duration s", value(mfs, "nv_inference_queue_duration_us")/1e6, finishedQueue)
	case sim.TGI:
		same("request duration", h("tgi_request_duration"), "e2e_request_latency_seconds")
		near("queue duration sum", h("tgi_request_queue_duration").sum, finishedQueue)
		same("generated tokens", h("tgi_request_generated_tokens"), "request_generation_tokens")
		near("input length count", h("tgi_request_input_length").count, vh("time_to_first_token_seconds").count)
	case sim.Dynamo:
		same("TTFT", h("dynamo_frontend_time_to_first_token_seconds"), "time_to_first_token_seconds")
		same("request duration", h("dynamo_frontend_request_duration_seconds"), "e2e_request_latency_seconds")
		same("ITL", h("dynamo_frontend_inter_token_latency_seconds"), "inter_token_latency_seconds")
		near("output tokens", value(mfs, "dynamo_frontend_output_tokens_total"), value(vm, "vllm:generation_tokens_total"))
	}
}
