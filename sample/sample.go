package sample

import (
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Hist names a latency histogram concept.
type Hist int

// The latency histograms llmdiag reads. Not every engine exposes every one.
const (
	TTFT      Hist = iota // time to first token
	E2E                   // end-to-end request latency
	ITL                   // inter-token latency (gap between tokens)
	TPOT                  // per-request mean time per output token
	QueueTime             // time waiting before scheduling
	NumHists              // number of histogram concepts
)

// String returns the concept's short name.
func (h Hist) String() string {
	switch h {
	case TTFT:
		return "ttft"
	case E2E:
		return "e2e"
	case ITL:
		return "inter_token"
	case TPOT:
		return "time_per_output_token"
	case QueueTime:
		return "queue_time"
	}
	return "unknown"
}

// Histogram is a cumulative Prometheus histogram: Counts[i] observations were
// <= Bounds[i]. Bounds ascend and the last is +Inf.
type Histogram struct {
	Bounds []float64
	Counts []float64
	Sum    float64
	Count  float64
}

// Total is a latency exposed only as two cumulative counters: Sum seconds
// over Count observations (requests). Like a histogram's _sum and _count, it
// resets when the engine restarts.
type Total struct {
	Sum   float64 // seconds
	Count float64
}

// Sample is one read of one node: cumulative counters, gauges and histograms,
// each already aggregated over the node's engine cores and ranks. A nil
// pointer or nil histogram means the engine does not expose the concept, or it
// could not be read: UNKNOWN, never zero.
type Sample struct {
	// At is when the read completed.
	At time.Time
	// Up is false when the target could not be reached at all.
	Up     bool
	Engine llmdiagv1.Engine
	// Model as the engine labels it (model_name), when it does.
	Model string

	// Gauges.
	Queue            *float64 // requests waiting
	Running          *float64 // requests being decoded
	KVUsage          *float64 // 0..1, used / capacity
	KVCapacityTokens *float64 // capacity in tokens

	// Cumulative counters.
	PromptTokens     *float64
	GenerationTokens *float64
	Preemptions      *float64
	RequestsFinished *float64
	// RequestsAborted counts the requests that ended aborted or failed,
	// where the engine tells them apart (vLLM's finished_reason abort and
	// error, Triton's and TGI's failure counters, …).
	RequestsAborted *float64
	// CountersCreated is when the counters started (the earliest _created
	// timestamp exposed); zero when unknown. It lets one sample give lifetime
	// rates.
	CountersCreated time.Time

	Hists [NumHists]*Histogram
	// Totals holds, for a latency whose histogram the engine does not
	// expose (Hists[h] nil), its cumulative sum and count when the engine
	// exposes those as plain counters (Triton: nv_inference_request_duration_us
	// and nv_inference_queue_duration_us over nv_inference_request_success).
	// They give a mean over a window, ΔSum/ΔCount, and never a percentile.
	// Nil where Hists[h] is set (its Sum and Count say the same) and where
	// the engine exposes neither.
	Totals [NumHists]*Total

	// Effects holds the cache and decoding effects the engine exports; the
	// zero value (every field nil or empty) when it exports none.
	Effects Effects

	// DataParallel is the number of engine cores seen (vLLM's engine label);
	// 0 when the engine does not say.
	DataParallel int
	// TensorParallel is the number of tensor-parallel ranks seen (SGLang's
	// tp_rank); 0 when the engine does not say.
	TensorParallel int
	// PipelineParallel and ExpertParallel are the numbers of pipeline stages
	// and expert-parallel ranks seen (SGLang's pp_rank, moe_ep_rank); 0 when
	// the engine does not say.
	PipelineParallel, ExpertParallel int

	// GPU is the node's GPUs as its DCGM exporter reported them at the
	// same refresh (engine.ExtractGPU); nil when no exporter is read for
	// the node or it could not be: UNKNOWN, never zero. Never changed once
	// the sample is recorded.
	GPU *llmdiagv1.GPUMetrics
	// Role is the node's role as its engine says it: SGLang's engine_type
	// label, a Dynamo worker's dynamo_component; ROLE_UNSPECIFIED when the
	// metrics do not say. RoleSource names the label it was read from.
	Role       llmdiagv1.Role
	RoleSource string
	// KVTransfer holds the cumulative counters of the KV-cache transfers
	// between prefill and decode workers, each nil where the engine does
	// not expose it.
	KVTransfer KVTransfer

	// Errors are problems met while reading: transport, parse, truncated or
	// inconsistent families. A concept touched by an error is left nil.
	Errors []string
	// Warnings are problems of the exposition that left a family out (a
	// line Prometheus refuses, an invalid histogram; see engine.Parse):
	// the concepts it held are nil, the others are read.
	Warnings []string
}

// KVTransfer is the cumulative KV-cache transfer counters of a node in a
// deployment that disaggregates prefill and decode (vLLM's NIXL connector,
// SGLang's disaggregation). Each is nil when not exposed: UNKNOWN, never 0.
type KVTransfer struct {
	Count    *float64 // transfers completed
	Seconds  *float64 // their summed duration, in seconds
	Bytes    *float64 // bytes transferred
	Failures *float64 // transfers that failed
}

// F returns a pointer to v, for filling optional fields.
func F(v float64) *float64 { return &v }

// Effects are the cache and decoding effects of one read: what explains a
// fast prefill (prefix-cache hits), a faster or slower decode (speculative
// decoding), requests waiting for a LoRA adapter, and a GPU KV cache full
// by design (an offload tier). A nil field is one the engine does not
// export: UNKNOWN, never 0.
type Effects struct {
	// Cumulative counters (vLLM): prompt tokens looked up in the prefix
	// cache and those found there.
	PrefixCacheQueries, PrefixCacheHits *float64
	// PrefixCacheHitRate is the engine's own hit rate, 0..1 (SGLang).
	PrefixCacheHitRate *float64
	// Cumulative counters (vLLM): drafts proposed, draft tokens proposed
	// and draft tokens accepted.
	SpecDrafts, SpecDraftTokens, SpecAcceptedTokens *float64
	// SpecAcceptRate (accepted / draft tokens, 0..1) and SpecAcceptLength
	// (tokens emitted per step and request) as the engine reports them
	// (SGLang); nil, not 0, without speculative decoding.
	SpecAcceptRate, SpecAcceptLength *float64
	// LoRAAdaptersRunning and LoRAAdaptersWaiting count the distinct
	// adapters with requests running, and those requests wait for.
	LoRAAdaptersRunning, LoRAAdaptersWaiting *float64
	// LoRARunning and LoRAWaiting name those adapters, sorted; LoRAMax is
	// the most adapters one engine core's running batch may hold (vLLM's
	// max_lora label), nil when not exported.
	LoRARunning, LoRAWaiting []string
	LoRAMax                  *float64
	// KVOffload names the KV offload tier the metrics show ("lmcache");
	// empty when they show none.
	KVOffload string
}
