package engine

import (
	"strings"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// Concept is one thing llmdiag reads off an engine, whatever the engine calls it.
type Concept int

// The concepts. The histogram concepts come in the order of sample.Hist.
const (
	Queue            Concept = iota // requests waiting (gauge)
	Running                         // requests being decoded (gauge)
	KVUsage                         // KV-cache usage 0..1 (gauge)
	KVCapacityTokens                // KV-cache capacity in tokens
	KVUsedTokens                    // KV-cache tokens in use
	PromptTokens                    // prompt tokens processed (counter)
	GenerationTokens                // generation tokens produced (counter)
	Preemptions                     // preempted / retracted requests (counter)
	RequestsFinished                // finished requests (counter)
	TTFT                            // time to first token (histogram)
	E2E                             // end-to-end latency (histogram)
	ITL                             // inter-token latency (histogram)
	TPOT                            // per-request time per output token (histogram)
	QueueTime                       // time queued (histogram)
	// The next four are latencies an engine exposes only as a cumulative
	// sum and count, without buckets (Triton): a mean, never a percentile.
	// They fill sample.Sample.Totals, and only where the histogram of the
	// same latency is absent.
	E2ESum         // end-to-end latency, cumulative seconds (counter)
	E2ECount       // requests E2ESum adds over (counter)
	QueueTimeSum   // time queued, cumulative seconds (counter)
	QueueTimeCount // requests QueueTimeSum adds over (counter)
	// RequestsAborted counts requests that ended aborted (the client went
	// away, the engine gave up on them) or failed (counter). Only engines
	// that tell such requests apart expose it.
	RequestsAborted
	// The cache and decoding effects (Mapping.Effects), read by Extract
	// and, in one query per engine, by the Prometheus source.
	PrefixCacheQueries // prompt tokens looked up in the prefix cache (counter)
	PrefixCacheHits    // of which found there (counter)
	PrefixCacheHitRate // hits / queries as the engine reports it, 0..1 (gauge)
	SpecDrafts         // speculative drafts proposed (counter)
	SpecDraftTokens    // draft tokens proposed (counter)
	SpecAcceptedTokens // of which accepted (counter)
	SpecAcceptRate     // accepted / draft tokens as the engine reports it (gauge)
	SpecAcceptLength   // tokens emitted per decode step and request (gauge)
	numConcepts
)

var conceptNames = [numConcepts]string{
	"queue", "running", "kv_usage", "kv_capacity_tokens", "kv_used_tokens",
	"prompt_tokens", "generation_tokens", "preemptions", "requests_finished",
	"ttft", "e2e", "inter_token", "time_per_output_token", "queue_time",
	"e2e_sum", "e2e_count", "queue_time_sum", "queue_time_count",
	"requests_aborted",
	"prefix_cache_queries", "prefix_cache_hits", "prefix_cache_hit_rate",
	"spec_drafts", "spec_draft_tokens", "spec_accepted_tokens", "spec_accept_rate", "spec_accept_length",
}

// String returns the concept's short name.
func (c Concept) String() string {
	if c >= numConcepts && c < numDisaggConcepts {
		return disaggConceptNames[c-numConcepts]
	}
	if c < 0 || c >= numConcepts {
		return "unknown"
	}
	return conceptNames[c]
}

// Hist returns the sample histogram a histogram concept fills, and false for
// the other concepts.
func (c Concept) Hist() (sample.Hist, bool) {
	if c < TTFT || c > QueueTime {
		return 0, false
	}
	return sample.Hist(c - TTFT), true
}

// totals pairs the sum and count concepts of a latency exposed without
// buckets with the histogram they stand in for.
var totals = []struct {
	hist       sample.Hist
	sum, count Concept
}{
	{sample.E2E, E2ESum, E2ECount},
	{sample.QueueTime, QueueTimeSum, QueueTimeCount},
}

// Kind says how a family's value is read.
type Kind int

// The kinds of source.
const (
	// Gauge is a gauge (or untyped) value.
	Gauge Kind = iota
	// Counter is a cumulative counter (or untyped) value.
	Counter
	// Histogram is a classic histogram: buckets, sum and count.
	Histogram
	// HistogramCount is the _count of a histogram, read as a counter.
	HistogramCount
	// HistogramSum is the _sum of a histogram, read as a counter.
	HistogramSum
	// Info is an info gauge (value 1) whose value is the product of the
	// numeric values of Source.Labels.
	Info
	// Product multiplies the values of Source.Operands (KV capacity =
	// blocks × tokens per block). Family is empty. The series of the
	// operands are matched one to one on all their labels except the
	// operands' Match labels (PromQL: a * ignoring(match labels) b); a
	// series without its match makes the source unusable (an error, the
	// concept nil). The products are then aggregated as Agg says.
	Product
	// Difference is the sum of the first of Source.Operands minus the sums
	// of the others, clamped at 0 (Dynamo: requests in flight − requests
	// still waiting for their first token = requests decoding). Family is
	// empty; Agg is not used.
	Difference
)

// Agg says how the sub-series of a family combine into one node value. Ranks
// that report the same scheduler state (Mapping.RankLabels) are collapsed
// first, so each replica counts once.
type Agg int

// The aggregations.
const (
	// Sum adds the sub-series: requests, tokens and histogram buckets of
	// data-parallel replicas add up.
	Sum Agg = iota
	// Mean averages the sub-series.
	Mean
	// CapacityWeighted averages the sub-series weighted by each replica's
	// KV capacity (KVCapacityTokens joined on Mapping.ReplicaLabels), and
	// falls back to Mean when the capacity of any replica is unknown.
	CapacityWeighted
	// Max sums the sub-series of each replica (Mapping.ReplicaLabels:
	// Triton's failure counter has one series per reason) and takes the
	// largest replica. Triton reports request counters per model, and an
	// ensemble or BLS model counts again every request of the models it
	// calls (preprocessing, tensorrt_llm, postprocessing): summing would
	// count each request several times, and the outermost model, whose
	// cumulative time is the largest, is the one a client sees. The sum
	// and the count of a latency are each maximised on their own, so the
	// count may come from a stage the in-flight requests have already
	// left: mean = sum/count is low by (requests between stages) / count.
	// PromQL: max by (node) (sum by (node, replica labels) (…)).
	Max
)

// Source is one metric family that exposes a concept.
type Source struct {
	// Family is the family name as the text format declares it: counters keep
	// their _total suffix, histograms have none. Empty for Product and
	// Difference, which read Operands.
	Family string
	Kind   Kind
	Agg    Agg
	// Labels, for Kind Info, are multiplied into the value.
	Labels []string
	// Match, when set, keeps only the series whose labels have these
	// values (Triton: request_type="waiting"); a family without such a
	// series counts as absent. PromQL: family{k="v",…}.
	Match map[string]string
	// MatchAny, when set, keeps only the series whose label has one of
	// the listed values, for every label listed (vLLM:
	// finished_reason abort or error); it applies together with Match,
	// and a family without such a series counts as absent. PromQL:
	// family{k=~"v1|v2",…}, each value quoted with regexp.QuoteMeta.
	MatchAny map[string][]string
	// Scale multiplies every value read, before aggregation (Triton's
	// microseconds → seconds: 1e-6); 0 means 1.
	Scale float64
	// Operands, for Kind Product and Difference, are the families combined,
	// each with its own Family, Kind (Gauge, Counter or Info) and Match. The
	// source is present only when every operand is.
	Operands []Source
}

// Families returns the names of the families src reads: Family, or the
// families of its Operands.
func (src Source) Families() []string {
	if len(src.Operands) == 0 {
		return []string{src.Family}
	}
	var out []string
	for _, o := range src.Operands {
		out = append(out, o.Families()...)
	}
	return out
}

// name is how errors call src.
func (src Source) name() string {
	switch src.Kind {
	case Product:
		return strings.Join(src.Families(), " × ")
	case Difference:
		return strings.Join(src.Families(), " − ")
	}
	return src.Family
}

// Mapping is what llmdiag knows about one engine's metrics. A Mapping returned
// by Lookup is shared and must not be modified.
type Mapping struct {
	Engine llmdiagv1.Engine
	// Prefix starts every family name of the engine; Detect counts them.
	Prefix string
	// AltPrefixes are further prefixes Detect counts as the engine's (vLLM
	// routed through OpenTelemetry: vllm_ instead of vllm:). Families of
	// the engine's server that another deployment shares (Triton's
	// nv_inference_…, also exposed for non-LLM models) are read but not
	// counted.
	AltPrefixes []string
	// ModelLabel carries the served model name ("" if none).
	ModelLabel string
	// ModelLabelFallbacks carried the model name in older versions; the
	// first found is read when no series has ModelLabel (SGLang 2024:
	// name).
	ModelLabelFallbacks []string
	// DPLabel's distinct values count data-parallel replicas ("" if none).
	DPLabel string
	// TPLabel's distinct values count tensor-parallel ranks ("" if none).
	TPLabel string
	// PPLabel's and EPLabel's distinct values count pipeline stages and
	// expert-parallel ranks ("" if none).
	PPLabel, EPLabel string
	// RankLabels tell apart ranks of one replica that report the same
	// scheduler state. Per replica (series equal in every other label) only
	// the series with the lowest ranks, compared in this order, is read.
	RankLabels []string
	// ReplicaLabels identify one replica across families; KV usage and
	// capacity are joined on them.
	ReplicaLabels []string
	// Created are gauge families holding the start of the cumulative
	// counters, in Unix seconds; the earliest value becomes
	// Sample.CountersCreated.
	Created []string
	// Concepts lists, per concept, the families that expose it, in order of
	// preference: the first one present is read.
	Concepts map[Concept][]Source
	// Effects lists, like Concepts, the families of the cache and decoding
	// effects (PrefixCacheQueries … SpecAcceptLength). They are kept apart
	// from Concepts: they do not tell that a node exists (the identity
	// query reads Concepts only), and the Prometheus source reads them,
	// with LoRAInfo and Offload, in one query per engine
	// (source/prom/query.go, builder.effects).
	Effects map[Concept][]Source
	// LoRAInfo are the info gauges whose labels list the LoRA adapters
	// with requests running and waiting (vLLM's lora_requests_info), in
	// order of preference.
	LoRAInfo []string
	// Offload maps family-name prefixes to the KV offload tier their
	// presence shows (vLLM with LMCache: lmcache: → "lmcache").
	Offload []OffloadTier
}

// OffloadTier is a KV offload tier known by the prefix of its families.
type OffloadTier struct {
	Prefix, Tier string
}

// Prefixes returns Prefix and AltPrefixes.
func (m *Mapping) Prefixes() []string {
	return append([]string{m.Prefix}, m.AltPrefixes...)
}

// vllm returns the sources of one vLLM family: the native vllm: name, then
// the name an OpenTelemetry pipeline gives it (colon → underscore). For a
// counter (name ends in _total) the OpenTelemetry name comes with and
// without _total, as OTel exporters may or may not add the suffix.
func vllm(name string, kind Kind, agg Agg) []Source {
	srcs := []Source{
		{Family: "vllm:" + name, Kind: kind, Agg: agg},
		{Family: "vllm_" + name, Kind: kind, Agg: agg},
	}
	if base, ok := strings.CutSuffix(name, "_total"); ok && kind == Counter {
		srcs = append(srcs, Source{Family: "vllm_" + base, Kind: kind, Agg: agg})
	}
	return srcs
}

// anyOf returns srcs, each restricted to the series whose label has one of
// values (Source.MatchAny).
func anyOf(srcs []Source, label string, values ...string) []Source {
	out := make([]Source, len(srcs))
	for i, src := range srcs {
		src.MatchAny = map[string][]string{label: values}
		out[i] = src
	}
	return out
}

// gauge is a Gauge source of family restricted to the series whose label
// equals value.
func gauge(family, label, value string) Source {
	return Source{Family: family, Kind: Gauge, Match: map[string]string{label: value}}
}

// table is the mapping of every supported engine.
var table = []Mapping{
	{
		// vLLM V1 (vllm/v1/metrics/loggers.py), with V0 and early-V1 aliases,
		// and the same families routed through OpenTelemetry (vllm_ prefix,
		// counters with or without _total), each after its native name.
		// Every series has model_name and, from V1, engine (one per
		// data-parallel engine core): everything sums over engine.
		Engine:        llmdiagv1.Engine_ENGINE_VLLM,
		Prefix:        "vllm:",
		AltPrefixes:   []string{"vllm_"},
		ModelLabel:    "model_name",
		DPLabel:       "engine",
		ReplicaLabels: []string{"engine"},
		Created: []string{
			"vllm:prompt_tokens_created", "vllm:generation_tokens_created",
			"vllm_prompt_tokens_created", "vllm_generation_tokens_created",
		},
		Concepts: map[Concept][]Source{
			Queue:   vllm("num_requests_waiting", Gauge, Sum),
			Running: vllm("num_requests_running", Gauge, Sum),
			KVUsage: append(
				vllm("kv_cache_usage_perc", Gauge, CapacityWeighted),
				vllm("gpu_cache_usage_perc", Gauge, CapacityWeighted)...), // V0
			KVCapacityTokens: {
				{Family: "vllm:cache_config_info", Kind: Info, Labels: []string{"num_gpu_blocks", "block_size"}},
				{Family: "vllm_cache_config_info", Kind: Info, Labels: []string{"num_gpu_blocks", "block_size"}},
			},
			PromptTokens:     vllm("prompt_tokens_total", Counter, Sum),
			GenerationTokens: vllm("generation_tokens_total", Counter, Sum),
			Preemptions:      vllm("num_preemptions_total", Counter, Sum),
			// Summed over finished_reason (stop, length, abort, error).
			RequestsFinished: vllm("request_success_total", Counter, Sum),
			// V1 creates every finished_reason series at start; V0 a
			// reason's series on its first request, so there the concept
			// stays unknown until the first abort.
			RequestsAborted: anyOf(vllm("request_success_total", Counter, Sum), "finished_reason", "abort", "error"),
			TTFT:            vllm("time_to_first_token_seconds", Histogram, Sum),
			E2E:             vllm("e2e_request_latency_seconds", Histogram, Sum),
			ITL: append(
				vllm("inter_token_latency_seconds", Histogram, Sum),
				// Deprecated name of the same per-token gap histogram (V0, V1 < 0.11).
				vllm("time_per_output_token_seconds", Histogram, Sum)...),
			TPOT:      vllm("request_time_per_output_token_seconds", Histogram, Sum),
			QueueTime: vllm("request_queue_time_seconds", Histogram, Sum),
		},
		// V1 counts prefix-cache lookups and hits in tokens; speculative
		// decoding's counters exist only with a speculative config.
		Effects: map[Concept][]Source{
			PrefixCacheQueries: vllm("prefix_cache_queries_total", Counter, Sum),
			PrefixCacheHits:    vllm("prefix_cache_hits_total", Counter, Sum),
			SpecDrafts:         vllm("spec_decode_num_drafts_total", Counter, Sum),
			SpecDraftTokens:    vllm("spec_decode_num_draft_tokens_total", Counter, Sum),
			SpecAcceptedTokens: vllm("spec_decode_num_accepted_tokens_total", Counter, Sum),
		},
		LoRAInfo: []string{"vllm:lora_requests_info", "vllm_lora_requests_info"},
		Offload:  []OffloadTier{{Prefix: "lmcache:", Tier: "lmcache"}},
	},
	{
		// SGLang (python/sglang/srt/metrics/collector.py), current label
		// scheme. Scheduler-side series carry engine_type, tp_rank, pp_rank,
		// moe_ep_rank (some also pid) and, with data parallelism, dp_rank;
		// tokenizer-side series (tokens, TTFT, ITL, E2E, num_requests) carry
		// model_name only.
		//
		// Tensor-parallel ranks of one scheduler group report the same queue,
		// batch and KV pool (by default only attention-TP rank 0 exports at
		// all), and pipeline stages work on the same requests, so summing
		// over tp_rank or pp_rank would count each request several times.
		// Per replica the lowest tp_rank, then pp_rank, is read; distinct
		// replicas (dp_rank, engine_type) are summed. With DP attention each
		// dp_rank has its own tp_rank values and stays a replica of its own.
		//
		// SGLang of 2024 (srt/metrics/metrics_collector.py) labelled every
		// series with name (the model) only and named the queue and batch
		// gauges num_requests_waiting / queue_req and num_requests_running,
		// and the queue-time histogram waiting_request_latency_seconds.
		Engine:              llmdiagv1.Engine_ENGINE_SGLANG,
		Prefix:              "sglang:",
		ModelLabel:          "model_name",
		ModelLabelFallbacks: []string{"name"},
		DPLabel:             "dp_rank",
		TPLabel:             "tp_rank",
		PPLabel:             "pp_rank",
		EPLabel:             "moe_ep_rank",
		RankLabels:          []string{"tp_rank", "pp_rank", "moe_ep_rank", "pid"},
		ReplicaLabels:       []string{"dp_rank", "engine_type"},
		Concepts: map[Concept][]Source{
			Queue: {
				{Family: "sglang:num_queue_reqs", Kind: Gauge},
				{Family: "sglang:num_requests_waiting", Kind: Gauge}, // 2024
				{Family: "sglang:queue_req", Kind: Gauge},            // 2024
			},
			Running: {
				{Family: "sglang:num_running_reqs", Kind: Gauge},
				{Family: "sglang:num_requests_running", Kind: Gauge}, // 2024
			},
			// Used when num_used_tokens or max_total_num_tokens is missing.
			KVUsage:          {{Family: "sglang:token_usage", Kind: Gauge, Agg: CapacityWeighted}},
			KVCapacityTokens: {{Family: "sglang:max_total_num_tokens", Kind: Gauge}},
			KVUsedTokens:     {{Family: "sglang:num_used_tokens", Kind: Gauge}},
			PromptTokens:     {{Family: "sglang:prompt_tokens_total", Kind: Counter}},
			GenerationTokens: {{Family: "sglang:generation_tokens_total", Kind: Counter}},
			Preemptions: {
				{Family: "sglang:num_retracted_requests_total", Kind: Counter},
				// Retractions per finished request, summed: the same events,
				// counted when the request finishes.
				{Family: "sglang:num_retractions", Kind: HistogramSum},
			},
			RequestsFinished: {
				{Family: "sglang:num_requests_total", Kind: Counter},
				{Family: "sglang:e2e_request_latency_seconds", Kind: HistogramCount},
			},
			// Tokenizer-side (model_name only), from SGLang 0.5; like every
			// labelled prometheus_client counter it appears with the first
			// abort.
			RequestsAborted: {{Family: "sglang:num_aborted_requests_total", Kind: Counter}},
			TTFT:            {{Family: "sglang:time_to_first_token_seconds", Kind: Histogram}},
			E2E:             {{Family: "sglang:e2e_request_latency_seconds", Kind: Histogram}},
			ITL:             {{Family: "sglang:inter_token_latency_seconds", Kind: Histogram}},
			// Older SGLang observed per-request time per output token.
			TPOT: {{Family: "sglang:time_per_output_token_seconds", Kind: Histogram}},
			QueueTime: {
				{Family: "sglang:queue_time_seconds", Kind: Histogram},
				{Family: "sglang:waiting_request_latency_seconds", Kind: Histogram}, // 2024
			},
		},
		// Scheduler gauges, one per replica, averaged. cache_hit_rate was a
		// percentage in 2024 (10.61 in engine/testdata/sglang-2024-name.prom):
		// Extract reads a value above 1 as one. The speculative gauges read 0
		// without speculative decoding: Extract leaves them absent then.
		Effects: map[Concept][]Source{
			PrefixCacheHitRate: {{Family: "sglang:cache_hit_rate", Kind: Gauge, Agg: Mean}},
			SpecAcceptRate:     {{Family: "sglang:spec_accept_rate", Kind: Gauge, Agg: Mean}},
			SpecAcceptLength:   {{Family: "sglang:spec_accept_length", Kind: Gauge, Agg: Mean}},
		},
	},
	{
		// TensorRT-LLM (tensorrt_llm/metrics/collector.py, served by
		// trtllm-serve or behind Dynamo, which adds the trtllm_ prefix).
		// Series carry model_name and engine_type="trtllm" (request_success
		// also finished_reason); one series per server, no parallelism
		// labels. Queue, running and KV capacity follow the model-server
		// protocol of the Gateway API Inference Extension. No token
		// counters, no preemptions.
		Engine:     llmdiagv1.Engine_ENGINE_TRTLLM,
		Prefix:     "trtllm_",
		ModelLabel: "model_name",
		Created:    []string{"trtllm_request_success_created"},
		Concepts: map[Concept][]Source{
			Queue:   {{Family: "trtllm_num_requests_waiting", Kind: Gauge}},
			Running: {{Family: "trtllm_num_requests_running", Kind: Gauge}},
			KVUsage: {{Family: "trtllm_kv_cache_utilization", Kind: Gauge, Agg: CapacityWeighted}},
			KVCapacityTokens: {{Kind: Product, Operands: []Source{
				{Family: "trtllm_kv_cache_max_blocks", Kind: Gauge},
				{Family: "trtllm_kv_cache_tokens_per_block", Kind: Gauge},
			}}},
			RequestsFinished: {
				{Family: "trtllm_request_success_total", Kind: Counter},
				{Family: "trtllm_e2e_request_latency_seconds", Kind: HistogramCount},
			},
			// finished_reason takes the request output's finish reason;
			// a reason's series appears with its first request.
			RequestsAborted: anyOf([]Source{{Family: "trtllm_request_success_total", Kind: Counter}},
				"finished_reason", "abort", "cancelled", "error"),
			TTFT: {{Family: "trtllm_time_to_first_token_seconds", Kind: Histogram}},
			E2E:  {{Family: "trtllm_e2e_request_latency_seconds", Kind: Histogram}},
			// One observation per request: (e2e − TTFT) / (output tokens − 1).
			TPOT:      {{Family: "trtllm_time_per_output_token_seconds", Kind: Histogram}},
			QueueTime: {{Family: "trtllm_request_queue_time_seconds", Kind: Histogram}},
		},
	},
	{
		// Triton Inference Server with the TensorRT-LLM backend
		// (tensorrtllm_backend README, Triton docs/user_guide/metrics.md).
		// Series carry model and version: the batch-manager gauges
		// (nv_trt_llm_…) exist for the tensorrt_llm model only and are
		// summed over models; Triton's request counters (nv_inference_…)
		// exist for every model of the pipeline and are read from the
		// largest (Max: the ensemble or BLS model a client calls).
		// Triton has no latency histograms: TTFT, E2E and queue-time
		// percentiles stay UNKNOWN, and E2E and queue time have a mean only
		// (cumulative microseconds over successful requests). No token
		// counters, no preemptions.
		Engine:        llmdiagv1.Engine_ENGINE_TRITON,
		Prefix:        "nv_trt_llm_",
		ModelLabel:    "model",
		ReplicaLabels: []string{"model", "version"},
		Concepts: map[Concept][]Source{
			Queue:   {gauge("nv_trt_llm_request_metrics", "request_type", "waiting")},
			Running: {gauge("nv_trt_llm_request_metrics", "request_type", "scheduled")},
			KVUsage: {{
				Family: "nv_trt_llm_kv_cache_block_metrics", Kind: Gauge, Agg: CapacityWeighted,
				Match: map[string]string{"kv_cache_block_type": "fraction"},
			}},
			KVCapacityTokens: {{Kind: Product, Operands: []Source{
				gauge("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "max"),
				gauge("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "tokens_per"),
			}}},
			RequestsFinished: {{Family: "nv_inference_request_success", Kind: Counter, Agg: Max}},
			E2ESum:           {{Family: "nv_inference_request_duration_us", Kind: Counter, Agg: Max, Scale: 1e-6}},
			E2ECount:         {{Family: "nv_inference_request_success", Kind: Counter, Agg: Max}},
			QueueTimeSum:     {{Family: "nv_inference_queue_duration_us", Kind: Counter, Agg: Max, Scale: 1e-6}},
			QueueTimeCount:   {{Family: "nv_inference_request_success", Kind: Counter, Agg: Max}},
			// Summed over reason (REJECTED, CANCELED, BACKEND, OTHER) per
			// model, largest model.
			RequestsAborted: {{Family: "nv_inference_request_failure", Kind: Counter, Agg: Max}},
		},
	},
	{
		// Hugging Face TGI (its router/src/server.rs and
		// docs/source/reference/metrics.md), exported by the Rust metrics
		// crate: no labels on these families, counters without _total, every
		// *duration histogram on buckets 0.0001·1.5^k (k = 1..35). Token
		// counts exist only as histograms observed when a request finishes:
		// their _sum is read as a counter. No TTFT histogram, no KV-cache
		// gauges, no preemptions.
		Engine: llmdiagv1.Engine_ENGINE_TGI,
		Prefix: "tgi_",
		Concepts: map[Concept][]Source{
			Queue:            {{Family: "tgi_queue_size", Kind: Gauge}},
			Running:          {{Family: "tgi_batch_current_size", Kind: Gauge}},
			PromptTokens:     {{Family: "tgi_request_input_length", Kind: HistogramSum}},
			GenerationTokens: {{Family: "tgi_request_generated_tokens", Kind: HistogramSum}},
			RequestsFinished: {
				{Family: "tgi_request_success", Kind: Counter},
				{Family: "tgi_request_duration", Kind: HistogramCount},
			},
			// Summed over err (validation, overloaded, generation, …); the
			// family appears with the first failure.
			RequestsAborted: {{Family: "tgi_request_failure", Kind: Counter}},
			E2E:             {{Family: "tgi_request_duration", Kind: Histogram}},
			TPOT:            {{Family: "tgi_request_mean_time_per_token_duration", Kind: Histogram}},
			QueueTime:       {{Family: "tgi_request_queue_duration", Kind: Histogram}},
		},
	},
	{
		// NVIDIA Dynamo HTTP frontend (lib/llm/src/http/service/metrics.rs,
		// docs/observability): one series per model (label model, lower-cased
		// on histograms and counters, as served on the model_* gauges).
		// queued_requests counts requests from arrival until their first
		// token (queue and prefill); inflight_requests (renamed
		// active_requests) counts them until the response ends, so the
		// requests decoding are the difference. The KV-cache size is that of
		// one worker serving the model; the frontend does not expose KV
		// usage (the workers' dynamo_component_kvstats_… do). No
		// preemptions. Workers' dynamo_component_… families do not make an
		// endpoint a Dynamo frontend: they sit next to the engine's own.
		Engine:     llmdiagv1.Engine_ENGINE_DYNAMO,
		Prefix:     "dynamo_frontend_",
		ModelLabel: "model",
		Concepts: map[Concept][]Source{
			Queue: {{Family: "dynamo_frontend_queued_requests", Kind: Gauge}},
			Running: {
				{Kind: Difference, Operands: []Source{
					{Family: "dynamo_frontend_active_requests", Kind: Gauge},
					{Family: "dynamo_frontend_queued_requests", Kind: Gauge},
				}},
				{Kind: Difference, Operands: []Source{
					{Family: "dynamo_frontend_inflight_requests", Kind: Gauge},
					{Family: "dynamo_frontend_queued_requests", Kind: Gauge},
				}},
			},
			KVCapacityTokens: {{Kind: Product, Operands: []Source{
				{Family: "dynamo_frontend_model_total_kv_blocks", Kind: Gauge},
				{Family: "dynamo_frontend_model_kv_cache_block_size", Kind: Gauge},
			}}},
			PromptTokens:     {{Family: "dynamo_frontend_input_sequence_tokens", Kind: HistogramSum}},
			GenerationTokens: {{Family: "dynamo_frontend_output_tokens_total", Kind: Counter}},
			// Summed over endpoint, request_type and status.
			RequestsFinished: {
				{Family: "dynamo_frontend_requests_total", Kind: Counter},
				{Family: "dynamo_frontend_request_duration_seconds", Kind: HistogramCount},
			},
			RequestsAborted: {{Family: "dynamo_frontend_requests_total", Kind: Counter,
				Match: map[string]string{"status": "error"}}},
			TTFT: {{Family: "dynamo_frontend_time_to_first_token_seconds", Kind: Histogram}},
			E2E:  {{Family: "dynamo_frontend_request_duration_seconds", Kind: Histogram}},
			ITL:  {{Family: "dynamo_frontend_inter_token_latency_seconds", Kind: Histogram}},
		},
	},
}

// Lookup returns the mapping of engine, and false when llmdiag has none.
func Lookup(engine llmdiagv1.Engine) (*Mapping, bool) {
	for i := range table {
		if table[i].Engine == engine {
			return &table[i], true
		}
	}
	return nil, false
}

// Engines lists the engines that have a mapping.
func Engines() []llmdiagv1.Engine {
	out := make([]llmdiagv1.Engine, len(table))
	for i, m := range table {
		out[i] = m.Engine
	}
	return out
}
