package sim

import "strings"

// The schemas of this file have no per-core label: each family has one
// series per node, its gauges summed over the data-parallel cores.

// nodeState sums the cores' gauges into node figures.
type nodeState struct {
	cores    []gauges
	sum      gauges // kv unused
	capacity int    // KV tokens of all cores
}

func newNodeState(n Node) nodeState {
	return nodeState{cores: make([]gauges, n.cores()), capacity: n.cores() * n.kvBlocks() * n.blockSize()}
}

// update records core c's gauges and returns the node's.
func (s *nodeState) update(c int, g gauges) gauges {
	o := &s.cores[c]
	s.sum.waiting += g.waiting - o.waiting
	s.sum.running += g.running - o.running
	s.sum.fresh += g.fresh - o.fresh
	s.sum.prefilling += g.prefilling - o.prefilling
	s.sum.usedTokens += g.usedTokens - o.usedTokens
	*o = g
	s.sum.kv = float64(s.sum.usedTokens) / float64(s.capacity)
	return s.sum
}

// tgiDurationBuckets are TGI's bounds for every *_duration histogram: a
// geometric series 0.0001·1.5^k, k = 1..35, computed as TGI's router does.
var tgiDurationBuckets = func() []float64 {
	b := make([]float64, 0, 35)
	v := 0.0001
	for range 35 {
		v *= 1.5
		b = append(b, v)
	}
	return b
}()

// linearBuckets are TGI's token-count bounds: max/100·k, k = 1..100.
func linearBuckets(max int) []float64 {
	b := make([]float64, 100)
	for i := range b {
		b[i] = float64(max) / 100 * float64(i+1)
	}
	return b
}

// succeeded reports whether a finished request counts as a success: it
// stopped or hit its length limit (an abort is a failure).
func succeeded(r *request) bool { return r.reason == reasonStop || r.reason == reasonLength }

// trtllmMetrics is trtllm-serve's exposition (TensorRT-LLM): labels
// model_name and engine_type="trtllm", vLLM's bucket lists. It has no token
// counters and no preemption counter.
type trtllmMetrics struct {
	nodeState
	waiting, running, kv   *series
	success                [numReasons]*series
	ttft, e2e, tpot, queue *series
}

var _ recorder = (*trtllmMetrics)(nil)

func newTRTLLMMetrics(m *metricSet, n Node) *trtllmMetrics {
	l, lv := []string{"model_name", "engine_type"}, []string{n.Model, "trtllm"}
	t := &trtllmMetrics{
		nodeState: newNodeState(n),
		waiting:   m.gauge("trtllm_num_requests_waiting", "Number of requests waiting to be processed.", l...).with(lv...),
		running:   m.gauge("trtllm_num_requests_running", "Number of requests currently running.", l...).with(lv...),
		kv:        m.gauge("trtllm_kv_cache_utilization", "KV cache utilization, 0 to 1.", l...).with(lv...),
		ttft:      m.histogram("trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.", vllmTTFTBuckets, l...).with(lv...),
		e2e:       m.histogram("trtllm_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", vllmLatencyBuckets, l...).with(lv...),
		tpot:      m.histogram("trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.", vllmITLBuckets, l...).with(lv...),
		queue:     m.histogram("trtllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", vllmLatencyBuckets, l...).with(lv...),
	}
	m.gauge("trtllm_kv_cache_max_blocks", "Maximum number of KV cache blocks.", l...).with(lv...).set(float64(n.cores() * n.kvBlocks()))
	m.gauge("trtllm_kv_cache_tokens_per_block", "Number of tokens per KV cache block.", l...).with(lv...).set(float64(n.blockSize()))
	success := m.counter("trtllm_request_success_total", "Count of successfully processed requests.", "model_name", "engine_type", "finished_reason")
	for r := range numReasons {
		t.success[r] = success.with(n.Model, "trtllm", r.String())
	}
	omitFailures(n, t.success)
	return t
}

func (m *trtllmMetrics) state(c int, g gauges) {
	s := m.update(c, g)
	m.waiting.set(float64(s.waiting))
	m.running.set(float64(s.running))
	m.kv.set(s.kv)
}

func (m *trtllmMetrics) scheduled(_ int, q float64, _, _ int)  { m.queue.observe(q) }
func (m *trtllmMetrics) firstToken(_ int, ttft float64, _ int) { m.ttft.observe(ttft) }
func (m *trtllmMetrics) interToken(int, float64)               {}
func (m *trtllmMetrics) generated(int, int, float64)           {}
func (m *trtllmMetrics) aborted(int)                           { m.success[reasonAbort].inc(1) }
func (m *trtllmMetrics) preempted(int)                         {}

func (m *trtllmMetrics) finished(_ int, r *request, now float64) {
	m.success[r.reason].inc(1)
	m.e2e.observe(now - r.arrival)
	if r.generated > 1 {
		m.tpot.observe((now - r.firstTok) / float64(r.generated-1))
	}
}

// tritonMetrics is Triton Inference Server's exposition with the
// TensorRT-LLM backend: labels model and version. The backend's gauges give
// requests by request_type (waiting: queued; scheduled and active: in the
// batch; context: in the batch without their first token; max: batch slots)
// and KV blocks by kv_cache_block_type; Triton's own nv_inference_* are
// cumulative counters, durations in microseconds summed over successful
// requests when they end (mean E2E = request_duration_us / success).
type tritonMetrics struct {
	nodeState
	waiting, inBatch, active, context *series
	fraction, free, used              *series
	duration, queue                   *series
	count, success                    *series
	rejected, backend                 *series // nv_inference_request_failure by reason
	bs, blocks                        int
}

var _ recorder = (*tritonMetrics)(nil)

func newTritonMetrics(m *metricSet, n Node) *tritonMetrics {
	const version = "1"
	reqs := m.gauge("nv_trt_llm_request_metrics", "TRT LLM request metrics", "model", "version", "request_type")
	kv := m.gauge("nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics", "model", "version", "kv_cache_block_type")
	counter := func(name, help string) *series {
		return m.counter(name, help, "model", "version").with(n.Model, version)
	}
	t := &tritonMetrics{
		nodeState: newNodeState(n),
		bs:        n.blockSize(),
		blocks:    n.cores() * n.kvBlocks(),
		success:   counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
		count:     counter("nv_inference_count", "Number of inferences performed (does not include cached requests)"),
		duration:  counter("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)"),
		queue:     counter("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached requests)"),
	}
	// Triton creates a failure series per reason when it loads the model.
	failure := m.counter("nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "model", "reason", "version")
	t.rejected = failure.with(n.Model, "REJECTED", version)
	failure.with(n.Model, "CANCELED", version)
	t.backend = failure.with(n.Model, "BACKEND", version)
	failure.with(n.Model, "OTHER", version)
	if n.Quirks.NoFailureCounters {
		failure.omit()
	}
	t.waiting = reqs.with(n.Model, version, "waiting")
	t.inBatch = reqs.with(n.Model, version, "scheduled")
	t.active = reqs.with(n.Model, version, "active")
	t.context = reqs.with(n.Model, version, "context")
	reqs.with(n.Model, version, "max").set(float64(n.cores() * n.Perf.MaxNumSeqs))
	t.fraction = kv.with(n.Model, version, "fraction")
	kv.with(n.Model, version, "max").set(float64(t.blocks))
	t.free = kv.with(n.Model, version, "free")
	t.used = kv.with(n.Model, version, "used")
	kv.with(n.Model, version, "tokens_per").set(float64(t.bs))
	return t
}

func (m *tritonMetrics) state(c int, g gauges) {
	s := m.update(c, g)
	m.waiting.set(float64(s.waiting))
	m.inBatch.set(float64(s.running))
	m.active.set(float64(s.running))
	m.context.set(float64(s.prefilling))
	used := s.usedTokens / m.bs
	m.used.set(float64(used))
	m.free.set(float64(m.blocks - used))
	m.fraction.set(s.kv)
}

func (m *tritonMetrics) scheduled(int, float64, int, int) {}
func (m *tritonMetrics) firstToken(int, float64, int)     {}
func (m *tritonMetrics) interToken(int, float64)          {}
func (m *tritonMetrics) generated(int, int, float64)      {}
func (m *tritonMetrics) aborted(int)                      { m.rejected.inc(1) } // queue timeout
func (m *tritonMetrics) preempted(int)                    {}

func (m *tritonMetrics) finished(_ int, r *request, now float64) {
	if !succeeded(r) {
		m.backend.inc(1)
		return
	}
	m.success.inc(1)
	m.count.inc(1)
	m.duration.inc(1e6 * (now - r.arrival))
	m.queue.inc(1e6 * (r.scheduled - r.arrival))
}

// tgiMetrics is TGI's exposition: no labels. The router records a request's
// durations and generated tokens when it ends; tgi_request_input_length is
// observed here when the prompt has been processed (TGI records it at
// validation, on arrival), so its _sum is the prompt-token counter of the
// other engines.
type tgiMetrics struct {
	nodeState
	queueSize, batchSize         *series
	duration, queue, perToken    *series
	inputLength, generatedTokens *series
	success                      *series
	failure                      *tgiFailures
}

// tgiFailures is tgi_request_failure by err. The Rust metrics crate
// creates a series, and so the family, with its first failure.
type tgiFailures struct {
	family *family
	byErr  map[string]*series
}

func (f *tgiFailures) inc(err string) {
	s, ok := f.byErr[err]
	if !ok {
		s = f.family.with(err)
		f.byErr[err] = s
	}
	s.inc(1)
}

var _ recorder = (*tgiMetrics)(nil)

func newTGIMetrics(m *metricSet, n Node) *tgiMetrics {
	maxLen := n.maxModelLen()
	failure := m.counter("tgi_request_failure", "Number of failed requests", "err")
	if n.Quirks.NoFailureCounters {
		failure.omit()
	}
	return &tgiMetrics{
		nodeState:       newNodeState(n),
		queueSize:       m.gauge("tgi_queue_size", "Number of requests waiting in the queue").with(),
		batchSize:       m.gauge("tgi_batch_current_size", "Current batch size").with(),
		duration:        m.histogram("tgi_request_duration", "Request duration", tgiDurationBuckets).with(),
		queue:           m.histogram("tgi_request_queue_duration", "Request queue duration", tgiDurationBuckets).with(),
		perToken:        m.histogram("tgi_request_mean_time_per_token_duration", "Mean time per token per request", tgiDurationBuckets).with(),
		inputLength:     m.histogram("tgi_request_input_length", "Input tokens per request", linearBuckets(maxLen-1)).with(),
		generatedTokens: m.histogram("tgi_request_generated_tokens", "Generated tokens per request", linearBuckets(maxLen)).with(),
		success:         m.counter("tgi_request_success", "Number of successful requests").with(),
		failure: &tgiFailures{
			family: failure,
			byErr:  map[string]*series{},
		},
	}
}

func (m *tgiMetrics) state(c int, g gauges) {
	s := m.update(c, g)
	m.queueSize.set(float64(s.waiting))
	m.batchSize.set(float64(s.running))
}

func (m *tgiMetrics) scheduled(int, float64, int, int)        {}
func (m *tgiMetrics) firstToken(_ int, _ float64, prompt int) { m.inputLength.observe(float64(prompt)) }
func (m *tgiMetrics) interToken(int, float64)                 {}
func (m *tgiMetrics) generated(int, int, float64)             {}
func (m *tgiMetrics) aborted(int)                             { m.failure.inc("overloaded") }
func (m *tgiMetrics) preempted(int)                           {}

func (m *tgiMetrics) finished(_ int, r *request, now float64) {
	if !succeeded(r) {
		m.failure.inc("generation")
		return
	}
	m.success.inc(1)
	m.duration.observe(now - r.arrival)
	m.queue.observe(r.scheduled - r.arrival)
	// TGI divides the time since the request entered a batch by its tokens.
	m.perToken.observe((now - r.scheduled) / float64(r.generated))
	m.generatedTokens.observe(float64(r.generated))
}

// dynamoMetrics is the exposition of Dynamo's HTTP frontend: label model,
// lower-cased on the request metrics, in the served model's own case on the
// model_* (deployment) gauges. The frontend sees requests, not the engine's
// scheduler: queued_requests are those still awaiting their first token
// (waiting or in prefill), inflight_requests all it has not answered yet
// (waiting and running).
type dynamoMetrics struct {
	nodeState
	queued, inflight       *series
	ttft, duration, itl    *series
	inputTokens, output    *series
	successReqs, errorReqs *series
}

var _ recorder = (*dynamoMetrics)(nil)

func newDynamoMetrics(m *metricSet, n Node) *dynamoMetrics {
	model := strings.ToLower(n.Model)
	requests := m.counter("dynamo_frontend_requests_total", "Total number of LLM requests processed",
		"endpoint", "model", "request_type", "status")
	d := &dynamoMetrics{
		nodeState:   newNodeState(n),
		queued:      m.gauge("dynamo_frontend_queued_requests", "Number of requests in HTTP processing queue", "model").with(model),
		inflight:    m.gauge("dynamo_frontend_inflight_requests", "Number of inflight requests", "model").with(model),
		ttft:        m.histogram("dynamo_frontend_time_to_first_token_seconds", "Time to first token in seconds", vllmTTFTBuckets, "model").with(model),
		duration:    m.histogram("dynamo_frontend_request_duration_seconds", "Duration of LLM requests", vllmLatencyBuckets, "model").with(model),
		itl:         m.histogram("dynamo_frontend_inter_token_latency_seconds", "Inter-token latency in seconds", vllmITLBuckets, "model").with(model),
		inputTokens: m.histogram("dynamo_frontend_input_sequence_tokens", "Input sequence length in tokens", buckets125(n.maxModelLen()), "model").with(model),
		output:      m.counter("dynamo_frontend_output_tokens_total", "Total number of output tokens generated", "model").with(model),
		successReqs: requests.with("chat_completions", model, "stream", "success"),
		errorReqs:   requests.with("chat_completions", model, "stream", "error"),
	}
	if n.Quirks.NoFailureCounters {
		d.errorReqs.omit()
	}
	m.gauge("dynamo_frontend_model_total_kv_blocks", "Total KV blocks available for a worker serving the model", "model").with(n.Model).
		set(float64(n.cores() * n.kvBlocks()))
	m.gauge("dynamo_frontend_model_kv_cache_block_size", "KV cache block size for a worker serving the model", "model").with(n.Model).
		set(float64(n.blockSize()))
	return d
}

func (m *dynamoMetrics) state(c int, g gauges) {
	s := m.update(c, g)
	m.queued.set(float64(s.fresh))
	m.inflight.set(float64(s.waiting + s.running))
}

func (m *dynamoMetrics) scheduled(int, float64, int, int) {}

func (m *dynamoMetrics) firstToken(_ int, ttft float64, prompt int) {
	m.ttft.observe(ttft)
	m.inputTokens.observe(float64(prompt))
}

func (m *dynamoMetrics) interToken(_ int, gap float64) { m.itl.observe(gap) }
func (m *dynamoMetrics) generated(_, n int, _ float64) { m.output.inc(float64(n)) }
func (m *dynamoMetrics) aborted(int)                   { m.errorReqs.inc(1) }
func (m *dynamoMetrics) preempted(int)                 {}

func (m *dynamoMetrics) finished(_ int, r *request, now float64) {
	if !succeeded(r) {
		m.errorReqs.inc(1)
		return
	}
	m.successReqs.inc(1)
	m.duration.observe(now - r.arrival)
}
