package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
)

// Engine is the inference server a node imitates: it decides the metric
// names, labels and buckets on /metrics (the schema) and, unless
// Node.Scheduler says otherwise, the scheduling policy: SGLang's for SGLang
// and SGLangLegacy, vLLM's for the others. Whatever the schema, the
// simulated physics is the same; only the exposition differs.
type Engine string

const (
	// VLLM is vLLM V1: chunked prefill mixed with decode in one step,
	// preemption of the newest request when KV runs out, one series set per
	// data-parallel engine core (label engine="0","1",…).
	VLLM Engine = "vllm"
	// VLLMOTel is vLLM's metrics as routed through OpenTelemetry to
	// Prometheus: the vllm_ prefix instead of vllm:, and counters without
	// the _total suffix (vllm_prompt_tokens); labels and buckets as VLLM.
	VLLMOTel Engine = "vllm-otel"
	// SGLang runs prefill batches ahead of decode batches, admits requests
	// only with KV headroom for their future tokens, and retracts the newest
	// request when decode runs out of KV.
	SGLang Engine = "sglang"
	// SGLangLegacy is SGLang with its 2024 label scheme: the model in label
	// name instead of model_name; names and other labels as SGLang.
	SGLangLegacy Engine = "sglang-legacy"
	// TRTLLM is TensorRT-LLM's trtllm-serve: trtllm_ families with labels
	// model_name and engine_type="trtllm", vLLM's bucket lists, one series
	// per node.
	TRTLLM Engine = "trtllm"
	// Triton is Triton Inference Server with the TensorRT-LLM backend:
	// nv_trt_llm_* gauges and nv_inference_* cumulative counters (no
	// histograms), labels model and version, one series per node.
	Triton Engine = "triton"
	// TGI is Hugging Face Text Generation Inference: tgi_* families without
	// labels, duration histograms with buckets 0.0001·1.5^k (k = 1..35).
	TGI Engine = "tgi"
	// Dynamo is NVIDIA Dynamo's HTTP frontend: dynamo_frontend_* families
	// with label model (lower-cased on request metrics), one series per
	// node.
	Dynamo Engine = "dynamo"
)

// engines lists every Engine in the order Engines returns them, with the
// fleet-file engine name of each.
var engines = []struct {
	e     Engine
	fleet string
}{
	{VLLM, "vllm"}, {VLLMOTel, "vllm"}, {SGLang, "sglang"}, {SGLangLegacy, "sglang"},
	{TRTLLM, "trtllm"}, {Triton, "triton"}, {TGI, "tgi"}, {Dynamo, "dynamo"},
}

// Engines lists every engine (schema) the simulator can expose.
func Engines() []Engine {
	out := make([]Engine, len(engines))
	for i, e := range engines {
		out[i] = e.e
	}
	return out
}

// FleetName is the engine's name in a fleet file (see fleet.ParseEngine):
// "vllm" for VLLM and VLLMOTel, "sglang" for SGLang and SGLangLegacy, the
// engine itself otherwise; "" for an unknown engine.
func (e Engine) FleetName() string {
	for _, x := range engines {
		if x.e == e {
			return x.fleet
		}
	}
	return ""
}

func (e Engine) known() bool { return e.FleetName() != "" }

// showsOffload reports whether e's exposition shows a KV offload tier
// (Node.KVOffload): vLLM's, with LMCache's lmcache: families beside its
// own. Through OpenTelemetry (VLLMOTel) they would be renamed, and the
// other engines have none.
func (e Engine) showsOffload() bool { return e == VLLM }

// Scheduler is the batching policy of a node's engine cores.
type Scheduler string

const (
	// SchedulerDefault is the engine's own policy: SchedulerSGLang for
	// SGLang and SGLangLegacy, SchedulerVLLM for the others.
	SchedulerDefault Scheduler = ""
	// SchedulerVLLM mixes prefill chunks with decode in one step and
	// preempts the newest request when KV runs out.
	SchedulerVLLM Scheduler = "vllm"
	// SchedulerSGLang runs prefill batches ahead of decode, admits with KV
	// headroom for future tokens and retracts the newest request when
	// decode runs out of KV.
	SchedulerSGLang Scheduler = "sglang"
)

// Garbage is what a node's /metrics serves instead of its exposition.
type Garbage int

const (
	// GarbageNone serves the real exposition.
	GarbageNone Garbage = iota
	// GarbageTruncated cuts the exposition off in the middle of a histogram
	// bucket line, as a crashed or timed-out exporter would.
	GarbageTruncated
	// GarbageJunk serves an HTML error page with status 200.
	GarbageJunk
)

// Config describes a simulated fleet.
type Config struct {
	// Name is the scenario name, informational.
	Name string
	// Seed fixes every random draw; the same Config gives the same metrics.
	Seed int64
	// Nodes of the fleet; ids must be unique and valid fleet ids.
	Nodes []Node
	// Speed is simulated seconds per wall-clock second when Start drives the
	// simulation; 0 means 1 (real time).
	Speed float64
	// Warmup is simulated time fast-forwarded by Start before serving, so
	// histograms and counters are populated at once.
	Warmup time.Duration
	// Tick is the simulated time Start advances per wake-up at Speed 1; 0
	// means 20ms. Wake-ups are never more frequent than every 10ms of wall
	// time. Results do not depend on Tick: the simulation is event-driven.
	Tick time.Duration
	// BasePort, when not 0, puts node i on 127.0.0.1:BasePort+i; 0 picks free
	// ports.
	BasePort int
	// MaxConcurrent bounds the completion requests each node's HTTP server
	// holds at once (see Handler); beyond it a request is refused with 429.
	// 0 means DefaultMaxConcurrent.
	MaxConcurrent int
	// MaxBodyBytes bounds a completion request's body; a larger one is
	// refused with 413. 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// ExternalOnly returns cfg with every node's built-in arrival process off
// (no Rate, Sessions, Burst or Phases): only the completion requests the
// nodes receive over HTTP load them (`llmdiag sim --load external`).
func ExternalOnly(cfg Config) Config {
	cfg.Nodes = slices.Clone(cfg.Nodes)
	for i := range cfg.Nodes {
		w := &cfg.Nodes[i].Workload
		w.Rate, w.Sessions, w.Think, w.Burst, w.Phases = 0, 0, 0, nil, nil
	}
	return cfg
}

// Node is one simulated inference server.
type Node struct {
	// ID names the node (e.g. "deepseek-v4-0").
	ID string
	// Model is the served model name: the model_name label, or the model
	// label of the schema (see Engine).
	Model string
	// Engine chooses the metric schema and, by default, the scheduling
	// policy.
	Engine Engine
	// Scheduler overrides the engine's scheduling policy; WithEngine sets
	// it so that changing the schema leaves the physics alone.
	Scheduler Scheduler
	// Profile is the deployment, reported in the fleet file. Its
	// DataParallel is the number of engine cores (0 means 1).
	Profile fleet.Profile
	// Perf is the per-core performance model; see EstimatePerf.
	Perf Perf
	// Workload is the traffic sent to the node.
	Workload Workload
	// Down lists intervals during which the node's listener is closed.
	Down []Window
	// Hang lists intervals during which the engine hangs while its process
	// stays up: an iteration that would end in a hang is held until the
	// hang ends (for good when its End is 0), and none starts, so no token
	// is sampled, no request finishes or is abandoned and the counters and
	// histograms stand still; arrivals keep coming and /metrics keeps
	// answering, its gauges showing the queue grow behind a batch that
	// does not move.
	Hang []Window
	// Garbage makes /metrics serve a broken body.
	Garbage Garbage
	// Quirks make the node's exposition depart from its engine's as some
	// servers in the field do; the zero value is the engine's own.
	Quirks Quirks
	// KVOffload, when set, gives the node a KV offload tier (CPU memory
	// through LMCache): blocks freed by finished requests stay resident on
	// the GPU, a copy in the tier, until their room is needed, so GPU KV
	// usage climbs to ~0.99 and stays there by design while nothing is
	// preempted for it. vLLM schemas show the tier (lmcache: families);
	// for the other engines the fleet file declares it (profile.kv_offload).
	KVOffload string
	// SpecDecode, when set, runs speculative decoding on the node's cores
	// (vLLM schemas export its spec_decode counters, SGLang schemas its
	// spec_accept_rate and spec_accept_length gauges).
	SpecDecode *SpecDecode
	// LoRA, when set, makes every request name one of the node's LoRA
	// adapters, and limits those in the running batch (vLLM schemas
	// export lora_requests_info).
	LoRA *LoRA
	// GPUFault is a hardware problem of some of its GPUs, seen in its
	// DCGM exporter (and, when throttled, in its speed).
	GPUFault GPUFault
	// Role is "prefill" or "decode" for a worker of a deployment that
	// disaggregates them (see disagg.go), empty (both) otherwise; the
	// fleet file carries it.
	Role string
	// KVTransfer is the path KV caches take between prefill and decode
	// workers; needed with a Role.
	KVTransfer KVLink
}

// offloadResident is the share of the GPU KV blocks an offload tier keeps
// resident: all but the ~1% the engine keeps free for the next step.
const offloadResident = 0.99

// Quirks are departures from an engine's reference exposition, as seen on
// servers in the field (a third-party vLLM-compatible server had all
// three). Each applies to every schema; where a schema lacks the thing
// anyway (Triton has no TTFT, TGI no preemption counter), it changes
// nothing. The simulated physics is the same with or without them.
type Quirks struct {
	// LazySeries makes every counter and histogram series absent from the
	// exposition until it is first incremented or observed (an increment by
	// 0 counts), each labelled child on its own: vllm:request_success_total
	// shows finished_reason="stop" with the first request that stops and
	// "length" only with the first one cut at max_tokens. That is what a
	// prometheus_client server does when it calls .labels() on first use
	// instead of at start-up, as vLLM V1 does for all its series, and what
	// SGLang does for its abort counter. Gauges stay present from the start,
	// as vLLM's are (it creates every series at start-up and sets the
	// gauges at each scheduler step) and as an unlabelled prometheus_client
	// gauge is (exposed at 0): a fresh node shows its queue, batch and KV
	// but no counter and no histogram.
	LazySeries bool
	// TTFTExcludesQueue measures time to first token from the request's
	// first scheduling instead of its arrival, so a queued request's TTFT
	// is its prefill alone: the mean TTFT stays below the mean queue time
	// however long the queue. E2E still counts from arrival.
	TTFTExcludesQueue bool
	// NoFailureCounters removes the preemption (retraction) counter and
	// every series counting aborted or failed requests: vLLM's and
	// trtllm-serve's finished_reason="abort" and "error", SGLang's
	// num_aborted_requests_total, Triton's nv_inference_request_failure,
	// TGI's tgi_request_failure, Dynamo's status="error". The events still
	// happen (NodeStats counts them); the exposition does not show them.
	NoFailureCounters bool
}

// FieldQuirks is every quirk at once: the vLLM-compatible server of a field
// test, whose series appeared on first use, whose TTFT left out the queue
// and which had no preemption or abort counters.
func FieldQuirks() Quirks {
	return Quirks{LazySeries: true, TTFTExcludesQueue: true, NoFailureCounters: true}
}

// Perf is the performance model of one engine core (one data-parallel rank,
// spanning TensorParallel×PipelineParallel GPUs).
type Perf struct {
	// StepBase is the cost of one forward pass independent of the batch:
	// reading the weights once, kernel launches, collective communication.
	StepBase time.Duration
	// StepPerSeq is added per decoding sequence in the batch (compute).
	StepPerSeq time.Duration
	// StepPerKContext is added per 1000 context tokens of the decoding
	// sequences (attention reads the KV cache).
	StepPerKContext time.Duration
	// PrefillTokensPerSec is the prompt throughput of a core when it does
	// nothing else; a prefill chunk of n tokens adds n/PrefillTokensPerSec.
	PrefillTokensPerSec float64
	// PrefillPerKContext is the attention compute of prefill: a chunk of n
	// tokens whose mean position (prefix included) is p adds
	// n·p/1000·PrefillPerKContext. It is quadratic in the prompt and runs
	// on the request's own core (with Lockstep, DP attention: the other
	// ranks wait for it). EstimatePerf leaves it 0: attention FLOPs depend
	// on the architecture (layers, heads), which a profile does not carry.
	PrefillPerKContext time.Duration
	// MaxBatchedTokens is the token budget of one step
	// (max_num_batched_tokens / chunked_prefill_size).
	MaxBatchedTokens int
	// MaxNumSeqs is the number of batch slots (max_num_seqs /
	// max_running_requests).
	MaxNumSeqs int
	// KVCapacityTokens is the KV cache of one core in tokens.
	KVCapacityTokens int
	// BlockSize is the KV block (page) size in tokens; 0 means 1 for SGLang
	// and SGLangLegacy, 16 for the other engines.
	BlockSize int
	// MaxModelLen bounds prompt+output of one request; 0 means
	// KVCapacityTokens. It must not exceed the KV capacity.
	MaxModelLen int
	// Lockstep makes all cores of a node step together (DP attention with
	// expert-parallel MoE): a step lasts as long as the slowest core's pass
	// (its prefill attention included) plus all cores' prefill tokens at the
	// pooled rate of the node, so a prefill on one rank stalls decode on
	// every rank.
	Lockstep bool
	// ReserveRatio is SGLang's new_token_ratio: admission keeps
	// ReserveRatio×min(max_tokens-generated, 4096) tokens free per running
	// request. 0 means 0.3. Ignored by the vLLM scheduler.
	ReserveRatio float64
	// KVBytesPerToken is the KV cache's footprint per token, which decode
	// attention reads every step; 0 means 70 kB, an MLA-class model (as
	// EstimatePerf assumes). Only the DCGM figures read it: they count
	// that much of StepPerKContext as memory reads and the rest as
	// compute, so a caller that sets it sets StepPerKContext to match
	// (KVReadPerK).
	KVBytesPerToken float64
}

// Workload is the traffic offered to one node.
type Workload struct {
	// Rate is the mean arrival rate in requests per second (Poisson, open
	// loop: arrivals do not wait for answers).
	Rate float64
	// Sessions, instead of Rate, makes the traffic closed-loop, as agents
	// generate it: each of Sessions clients sends a request, waits for its
	// end (or abandonment), works for an exponential time of mean Think
	// (runs the tools it called), then sends the next. Concurrency is then
	// bounded by Sessions and fluctuates far less than with Poisson
	// arrivals; the arrival rate is Sessions / (mean E2E + Think).
	Sessions int
	// Think is the mean time between a session's answer and its next
	// request; it must be positive with Sessions.
	Think time.Duration
	// Prompt is the prompt length distribution in tokens, after the
	// shared prefix.
	Prompt Lengths
	// SharedPrefix is a prefix of every prompt common to all requests
	// (agent system prompt, tool definitions), in tokens, rounded down to
	// whole KV blocks. Each core keeps it in its prefix cache and the
	// running requests share its KV blocks, held once while any of them
	// runs: it costs neither prefill compute nor KV per request. It counts
	// in prompt_tokens_total and as prefix-cache hits.
	SharedPrefix int
	// Output is the length the model would generate if not capped.
	Output Lengths
	// PrefixCacheHit is the fraction of each prompt after the shared
	// prefix found in the prefix cache (multi-turn history): those tokens
	// need KV of their own but no prefill compute. vLLM still counts them
	// in prompt_tokens_total. Rounded down to whole KV blocks.
	PrefixCacheHit float64
	// MaxTokens is the client's max_tokens: longer outputs stop there with
	// finished_reason "length". 0 means no cap besides MaxModelLen.
	MaxTokens int
	// QueueTimeout aborts requests still waiting (never scheduled) after it,
	// as clients give up; 0 means 10 minutes.
	QueueTimeout time.Duration
	// Burst, when set, multiplies Rate periodically (open loop only).
	Burst *Burst
	// Phases change the offered load at given times; before the first,
	// Rate, Sessions and Think above apply.
	Phases []Phase
}

// Phase is the offered load of a node from At on, simulated time measured
// from the end of warm-up as a Window's: an open-loop Rate (a Burst keeps
// multiplying it), closed-loop Sessions with their Think time, or neither
// (no traffic). Requests already sent are served whatever the phase.
// Entering a phase with more sessions starts the new ones as a node's first
// sessions start, each after a think time; with fewer, the sessions thinking
// whose next request is due last stop at once, and if that is not enough,
// the next ones whose request ends stop then. Open-loop arrivals, being
// memoryless, are redrawn from At.
type Phase struct {
	At       time.Duration
	Rate     float64
	Sessions int
	Think    time.Duration
}

// Lengths is a mixture of log-normal classes, e.g. many short chat replies
// and a few long reasoning traces.
type Lengths []Class

// Class is one log-normal component of a length mixture.
type Class struct {
	// Weight is the relative probability of the class.
	Weight float64
	// Median length in tokens.
	Median float64
	// Sigma is the log-space standard deviation (0 = always Median).
	Sigma float64
}

// LogNormal is a one-class length distribution.
func LogNormal(median, sigma float64) Lengths {
	return Lengths{{Weight: 1, Median: median, Sigma: sigma}}
}

// Mean is the expected length before clamping.
func (l Lengths) Mean() float64 {
	var sum, w float64
	for _, c := range l {
		sum += c.Weight * c.Median * math.Exp(c.Sigma*c.Sigma/2)
		w += c.Weight
	}
	if w == 0 {
		return 0
	}
	return sum / w
}

// Burst multiplies the arrival rate by Factor for Length at the start of
// every Every of simulated time.
type Burst struct {
	Every  time.Duration
	Length time.Duration
	Factor float64
}

// Window is an interval of simulated time measured from the end of warm-up
// (the moment the fleet starts serving). End 0 means forever.
type Window struct {
	Start, End time.Duration
}

func (w Window) contains(d time.Duration) bool {
	return d >= w.Start && (w.End == 0 || d < w.End)
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if len(c.Nodes) == 0 {
		errs = append(errs, errors.New("no nodes"))
	}
	if c.Speed < 0 || c.Warmup < 0 || c.Tick < 0 {
		errs = append(errs, errors.New("speed, warmup and tick must not be negative"))
	}
	if c.MaxConcurrent < 0 || c.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("max concurrent and max body bytes must not be negative"))
	}
	if c.BasePort < 0 || c.BasePort+len(c.Nodes) > 65536 {
		errs = append(errs, fmt.Errorf("base port %d out of range", c.BasePort))
	}
	seen := make(map[string]bool, len(c.Nodes))
	for i, n := range c.Nodes {
		if !fleet.ValidID(n.ID) {
			errs = append(errs, fmt.Errorf("nodes[%d]: invalid id %q", i, n.ID))
		}
		if seen[n.ID] {
			errs = append(errs, fmt.Errorf("nodes[%d]: duplicate id %q", i, n.ID))
		}
		seen[n.ID] = true
		if err := n.validate(); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (n Node) validate() error {
	var errs []error
	if !n.Engine.known() {
		errs = append(errs, fmt.Errorf("engine %q: want one of %v", n.Engine, Engines()))
	}
	if s := n.Scheduler; s != SchedulerDefault && s != SchedulerVLLM && s != SchedulerSGLang {
		errs = append(errs, fmt.Errorf("scheduler %q: want %q, %q or empty", s, SchedulerVLLM, SchedulerSGLang))
	}
	if n.Model == "" {
		errs = append(errs, errors.New("empty model"))
	}
	p := n.Perf
	if p.StepBase <= 0 || p.StepPerSeq < 0 || p.StepPerKContext < 0 || p.PrefillPerKContext < 0 {
		errs = append(errs, errors.New("perf: step base must be positive, per-seq and per-context costs not negative"))
	}
	if !(p.PrefillTokensPerSec > 0) || p.MaxBatchedTokens <= 0 || p.MaxNumSeqs <= 0 || p.KVCapacityTokens <= 0 {
		errs = append(errs, errors.New("perf: prefill rate, batched tokens, num seqs and KV capacity must be positive"))
	}
	if p.BlockSize < 0 || p.MaxModelLen < 0 || p.ReserveRatio < 0 || p.KVBytesPerToken < 0 {
		errs = append(errs, errors.New("perf: block size, max model len, reserve ratio and KV bytes per token must not be negative"))
	}
	if bs := n.blockSize(); p.KVCapacityTokens > 0 && n.maxModelLen() > p.KVCapacityTokens/bs*bs {
		errs = append(errs, fmt.Errorf("perf: max model len %d exceeds KV capacity %d", n.maxModelLen(), p.KVCapacityTokens/bs*bs))
	}
	w := n.Workload
	if err := w.Prompt.validate(); err != nil {
		errs = append(errs, fmt.Errorf("workload prompt: %w", err))
	}
	if err := w.Output.validate(); err != nil {
		errs = append(errs, fmt.Errorf("workload output: %w", err))
	}
	if !(w.PrefixCacheHit >= 0 && w.PrefixCacheHit < 1) {
		errs = append(errs, errors.New("workload: prefix cache hit must be in [0, 1)"))
	}
	if err := w.load(w.Rate, w.Sessions, w.Think); err != nil {
		errs = append(errs, fmt.Errorf("workload: %w", err))
	}
	for i, ph := range w.Phases {
		if ph.At < 0 || (i > 0 && ph.At <= w.Phases[i-1].At) {
			errs = append(errs, fmt.Errorf("workload phase %d: at %v, want phases at increasing times from 0", i, ph.At))
		}
		if err := w.load(ph.Rate, ph.Sessions, ph.Think); err != nil {
			errs = append(errs, fmt.Errorf("workload phase %d: %w", i, err))
		}
	}
	if w.MaxTokens < 0 || w.QueueTimeout < 0 || w.SharedPrefix < 0 {
		errs = append(errs, errors.New("workload: max tokens, queue timeout and shared prefix must not be negative"))
	}
	if w.SharedPrefix > 0 && n.sharedPrefix() >= n.maxModelLen() {
		errs = append(errs, fmt.Errorf("workload: shared prefix %d leaves no room in max model len %d", w.SharedPrefix, n.maxModelLen()))
	}
	if b := w.Burst; b != nil && (b.Every <= 0 || b.Length <= 0 || b.Length > b.Every || b.Factor <= 0) {
		errs = append(errs, errors.New("workload burst: want 0 < length <= every and factor > 0"))
	}
	for _, d := range n.Down {
		if d.Start < 0 || (d.End != 0 && d.End <= d.Start) {
			errs = append(errs, fmt.Errorf("down window %v-%v: want 0 <= start < end (or end 0)", d.Start, d.End))
		}
	}
	if n.SpecDecode != nil {
		if err := n.SpecDecode.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.LoRA != nil {
		if err := n.LoRA.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range n.Hang {
		if h.Start < 0 || (h.End != 0 && h.End <= h.Start) {
			errs = append(errs, fmt.Errorf("hang window %v-%v: want 0 <= start < end (or end 0)", h.Start, h.End))
		}
	}
	if f := n.GPUFault; f.XID < 0 || (f.Throttle != ThrottleNone && f.Throttle != ThrottleThermal && f.Throttle != ThrottlePower) {
		errs = append(errs, fmt.Errorf("gpu fault: throttle %q, XID %d: want %q, %q or none and an XID >= 0", f.Throttle, f.XID, ThrottleThermal, ThrottlePower))
	}
	for _, g := range n.GPUFault.GPUs {
		if g < 0 || g >= n.cores()*n.gpusPerCore() {
			errs = append(errs, fmt.Errorf("gpu fault: GPU %d: the node has GPUs 0-%d", g, n.cores()*n.gpusPerCore()-1))
		}
	}
	if err := n.validateRole(); err != nil {
		errs = append(errs, err)
	}
	if n.Garbage < GarbageNone || n.Garbage > GarbageJunk {
		errs = append(errs, fmt.Errorf("garbage mode %d unknown", n.Garbage))
	}
	return errors.Join(errs...)
}

// load checks one offered load: a rate or sessions, as Rate, Sessions and
// Think say.
func (w Workload) load(rate float64, sessions int, think time.Duration) error {
	switch {
	case rate < 0 || math.IsInf(rate, 0) || math.IsNaN(rate):
		return errors.New("rate must be finite and not negative")
	case sessions < 0 || think < 0:
		return errors.New("sessions and think time must not be negative")
	case sessions > 0 && (rate > 0 || w.Burst != nil || think <= 0):
		return errors.New("sessions need a positive think time, and no rate or burst")
	}
	return nil
}

func (l Lengths) validate() error {
	if len(l) == 0 {
		return errors.New("no classes")
	}
	var w float64
	for _, c := range l {
		if c.Weight < 0 || !(c.Median >= 1) || c.Sigma < 0 {
			return fmt.Errorf("class %+v: want weight >= 0, median >= 1, sigma >= 0", c)
		}
		w += c.Weight
	}
	if !(w > 0) {
		return errors.New("weights sum to 0")
	}
	return nil
}

// cores is the number of engine cores (data-parallel ranks).
func (n Node) cores() int { return max(int(n.Profile.DataParallel), 1) }

// kvBlocks is the KV capacity of one core in blocks.
func (n Node) kvBlocks() int { return n.Perf.KVCapacityTokens / n.blockSize() }

func (n Node) blockSize() int {
	switch {
	case n.Perf.BlockSize > 0:
		return n.Perf.BlockSize
	case n.Engine == SGLang || n.Engine == SGLangLegacy:
		return 1
	}
	return 16
}

// scheduler is the node's effective scheduling policy.
func (n Node) scheduler() Scheduler {
	switch {
	case n.Scheduler != SchedulerDefault:
		return n.Scheduler
	case n.Engine == SGLang || n.Engine == SGLangLegacy:
		return SchedulerSGLang
	}
	return SchedulerVLLM
}

// WithEngine returns cfg with every node exposing engine e's schema. The
// physics stays the same: each node keeps its scheduling policy and KV block
// size (both pinned in the returned nodes), so the simulated state, seed for
// seed, does not depend on e; only the metric names, labels and buckets do.
// cfg itself is not modified.
func WithEngine(cfg Config, e Engine) Config {
	cfg.Nodes = append([]Node(nil), cfg.Nodes...)
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		n.Scheduler = n.scheduler()
		n.Perf.BlockSize = n.blockSize()
		n.Engine = e
	}
	return cfg
}

// sharedPrefix is the shared prefix in whole KV blocks' tokens.
func (n Node) sharedPrefix() int {
	bs := n.blockSize()
	return max(n.Workload.SharedPrefix, 0) / bs * bs
}

func (n Node) maxModelLen() int {
	if n.Perf.MaxModelLen > 0 {
		return n.Perf.MaxModelLen
	}
	return n.Perf.KVCapacityTokens / n.blockSize() * n.blockSize()
}

func (n Node) queueTimeout() time.Duration {
	if n.Workload.QueueTimeout > 0 {
		return n.Workload.QueueTimeout
	}
	return 10 * time.Minute
}

func (n Node) reserveRatio() float64 {
	if n.Perf.ReserveRatio > 0 {
		return n.Perf.ReserveRatio
	}
	return 0.3
}
