package engine

import (
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
	numConcepts
)

var conceptNames = [numConcepts]string{
	"queue", "running", "kv_usage", "kv_capacity_tokens", "kv_used_tokens",
	"prompt_tokens", "generation_tokens", "preemptions", "requests_finished",
	"ttft", "e2e", "inter_token", "time_per_output_token", "queue_time",
}

// String returns the concept's short name.
func (c Concept) String() string {
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
)

// Source is one metric family that exposes a concept.
type Source struct {
	// Family is the family name as the text format declares it: counters keep
	// their _total suffix, histograms have none.
	Family string
	Kind   Kind
	Agg    Agg
	// Labels, for Kind Info, are multiplied into the value.
	Labels []string
}

// Mapping is what llmdiag knows about one engine's metrics. A Mapping returned
// by Lookup is shared and must not be modified.
type Mapping struct {
	Engine llmdiagv1.Engine
	// Prefix starts every family name of the engine; Detect counts them.
	Prefix string
	// ModelLabel carries the served model name.
	ModelLabel string
	// DPLabel's distinct values count data-parallel replicas ("" if none).
	DPLabel string
	// TPLabel's distinct values count tensor-parallel ranks ("" if none).
	TPLabel string
	// RankLabels tell apart ranks of one replica that report the same
	// scheduler state. Per replica (series equal in every other label) only
	// the series with the lowest ranks, compared in this order, is read.
	RankLabels []string
	// ReplicaLabels identify one replica across families; KV usage and
	// capacity are joined on them.
	ReplicaLabels []string
	// Created are gauge families holding the start of the token counters, in
	// Unix seconds; the earliest value becomes Sample.CountersCreated.
	Created []string
	// Concepts lists, per concept, the families that expose it, in order of
	// preference: the first one present is read.
	Concepts map[Concept][]Source
}

// table is the mapping of every supported engine.
var table = []Mapping{
	{
		// vLLM V1 (vllm/v1/metrics/loggers.py), with V0 and early-V1 aliases.
		// Every series has model_name and, from V1, engine (one per
		// data-parallel engine core): everything sums over engine.
		Engine:        llmdiagv1.Engine_ENGINE_VLLM,
		Prefix:        "vllm:",
		ModelLabel:    "model_name",
		DPLabel:       "engine",
		ReplicaLabels: []string{"engine"},
		Created:       []string{"vllm:prompt_tokens_created", "vllm:generation_tokens_created"},
		Concepts: map[Concept][]Source{
			Queue:   {{Family: "vllm:num_requests_waiting", Kind: Gauge}},
			Running: {{Family: "vllm:num_requests_running", Kind: Gauge}},
			KVUsage: {
				{Family: "vllm:kv_cache_usage_perc", Kind: Gauge, Agg: CapacityWeighted},
				{Family: "vllm:gpu_cache_usage_perc", Kind: Gauge, Agg: CapacityWeighted}, // V0
			},
			KVCapacityTokens: {{Family: "vllm:cache_config_info", Kind: Info, Labels: []string{"num_gpu_blocks", "block_size"}}},
			PromptTokens:     {{Family: "vllm:prompt_tokens_total", Kind: Counter}},
			GenerationTokens: {{Family: "vllm:generation_tokens_total", Kind: Counter}},
			Preemptions:      {{Family: "vllm:num_preemptions_total", Kind: Counter}},
			// Summed over finished_reason (stop, length, abort, error).
			RequestsFinished: {{Family: "vllm:request_success_total", Kind: Counter}},
			TTFT:             {{Family: "vllm:time_to_first_token_seconds", Kind: Histogram}},
			E2E:              {{Family: "vllm:e2e_request_latency_seconds", Kind: Histogram}},
			ITL: {
				{Family: "vllm:inter_token_latency_seconds", Kind: Histogram},
				// Deprecated name of the same per-token gap histogram (V0, V1 < 0.11).
				{Family: "vllm:time_per_output_token_seconds", Kind: Histogram},
			},
			TPOT:      {{Family: "vllm:request_time_per_output_token_seconds", Kind: Histogram}},
			QueueTime: {{Family: "vllm:request_queue_time_seconds", Kind: Histogram}},
		},
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
		Engine:        llmdiagv1.Engine_ENGINE_SGLANG,
		Prefix:        "sglang:",
		ModelLabel:    "model_name",
		DPLabel:       "dp_rank",
		TPLabel:       "tp_rank",
		RankLabels:    []string{"tp_rank", "pp_rank", "moe_ep_rank", "pid"},
		ReplicaLabels: []string{"dp_rank", "engine_type"},
		Concepts: map[Concept][]Source{
			Queue:   {{Family: "sglang:num_queue_reqs", Kind: Gauge}},
			Running: {{Family: "sglang:num_running_reqs", Kind: Gauge}},
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
			TTFT: {{Family: "sglang:time_to_first_token_seconds", Kind: Histogram}},
			E2E:  {{Family: "sglang:e2e_request_latency_seconds", Kind: Histogram}},
			ITL:  {{Family: "sglang:inter_token_latency_seconds", Kind: Histogram}},
			// Older SGLang observed per-request time per output token.
			TPOT:      {{Family: "sglang:time_per_output_token_seconds", Kind: Histogram}},
			QueueTime: {{Family: "sglang:queue_time_seconds", Kind: Histogram}},
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
