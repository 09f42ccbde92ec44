package sim

import (
	"strconv"
	"strings"
)

// recorder turns engine-core events into an engine's metrics. Times are
// simulated seconds.
type recorder interface {
	// state sets the gauges of a core.
	state(core int, g gauges)
	// scheduled records the queue time of a request first scheduled and its
	// prefix-cache lookup: prompt tokens queried, cached tokens hit.
	scheduled(core int, queue float64, queried, hit int)
	// firstToken records a first token and its request's prompt.
	firstToken(core int, ttft float64, prompt int)
	// interToken records the gap before a later token.
	interToken(core int, gap float64)
	// generated counts n tokens sampled by one iteration ending at now.
	generated(core, n int, now float64)
	// finished records a request that finished at now.
	finished(core int, r *request, now float64)
	// aborted counts a request abandoned in the queue.
	aborted(core int)
	// preempted counts a preemption (vLLM) or retraction (SGLang).
	preempted(core int)
}

// gauges is an engine core's state as gauges report it.
type gauges struct {
	waiting, running int
	// fresh are the requests, waiting or running, without their first
	// token; prefilling the running ones among them.
	fresh, prefilling int
	usedTokens        int
	kv                float64 // KV blocks in use over capacity
	// storedTokens counts the tokens ever written to KV, hence to an
	// offload tier when there is one (Node.KVOffload).
	storedTokens int
	// at is the simulated second of the reading.
	at float64
	// With LoRA adapters (lora): the adapters running and waited for,
	// comma-separated (loras.lists).
	lora                     bool
	loraRunning, loraWaiting string
}

// newRecorder creates the metrics of the node's engine in m.
func newRecorder(m *metricSet, n Node) recorder {
	switch n.Engine {
	case VLLMOTel:
		return newVLLMMetrics(m, n, true)
	case SGLang:
		return newSGLangMetrics(m, n, "model_name")
	case SGLangLegacy:
		return newSGLangMetrics(m, n, "name")
	case TRTLLM:
		return newTRTLLMMetrics(m, n)
	case Triton:
		return newTritonMetrics(m, n)
	case TGI:
		return newTGIMetrics(m, n)
	case Dynamo:
		return newDynamoMetrics(m, n)
	}
	return newVLLMMetrics(m, n, false)
}

// otelName is a vLLM metric name as OpenTelemetry's Prometheus exporter
// writes it: vllm_ instead of vllm:, counters without _total.
func otelName(name string, counter bool) string {
	name = strings.Replace(name, ":", "_", 1)
	if counter {
		name = strings.TrimSuffix(name, "_total")
	}
	return name
}

// Bucket boundaries, from vllm/v1/metrics/loggers.py and SGLang's
// collector.py (listed in docs/engine-metrics.md).
var (
	vllmTTFTBuckets    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	vllmITLBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	vllmLatencyBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}

	sglangTTFTBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	sglangITLBuckets   = []float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8}
	sglangE2EBuckets   = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
	sglangQueueBuckets = []float64{0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
		200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}
)

// buckets125 is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, … up to max.
func buckets125(max int) []float64 {
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

// omitFailures omits the finished_reason "abort" and "error" series of a
// request counter under Quirks.NoFailureCounters.
func omitFailures(n Node, s [numReasons]*series) {
	if n.Quirks.NoFailureCounters {
		s[reasonAbort].omit()
		s[reasonError].omit()
	}
}

// vllmMetrics is vLLM V1's exposition: every series carries model_name and
// engine (the data-parallel core index). With otel the names are those of
// vLLM's metrics routed through OpenTelemetry (see otelName).
type vllmMetrics struct {
	waiting, running, kv     []*series
	preemptions, prompt, gen []*series
	cacheQueries, cacheHits  []*series
	// lmcacheStored is LMCache's stored-token counter, one per core, with
	// an offload tier shown (Node.KVOffload, Engine.showsOffload).
	lmcacheStored               []*series
	success                     [][numReasons]*series
	ttft, itl, tpot, e2e        []*series
	queue, prefill, decode      []*series
	inference, promptN, outputN []*series
	// With speculative decoding (Node.SpecDecode): its counters per core.
	specDrafts, specDraftTokens, specAccepted []*series
	// With LoRA adapters (Node.LoRA): lora_requests_info, one series per
	// core and pair of adapter lists, set to the time the pair last
	// changed, kept once the pair is gone, as vLLM does; loraLast is each
	// core's last pair.
	lora     *family
	loraMax  string
	loraSeen map[[3]string]*series
	loraLast [][2]string
}

var (
	_ recorder     = (*vllmMetrics)(nil)
	_ specRecorder = (*vllmMetrics)(nil)
)

func newVLLMMetrics(m *metricSet, n Node, otel bool) *vllmMetrics {
	if otel {
		m.rename = otelName
	}
	l := []string{"model_name", "engine"}
	waiting := m.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", l...)
	running := m.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", l...)
	kv := m.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", l...)
	queries := m.counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", l...)
	hits := m.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", l...)
	preempt := m.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", l...)
	prompt := m.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", l...)
	gen := m.counter("vllm:generation_tokens_total", "Number of generation tokens processed.", l...)
	success := m.counter("vllm:request_success_total", "Count of successfully processed requests.", "model_name", "engine", "finished_reason")
	tokBuckets := buckets125(n.maxModelLen())
	promptN := m.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokBuckets, l...)
	outputN := m.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", tokBuckets, l...)
	ttft := m.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", vllmTTFTBuckets, l...)
	itl := m.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", vllmITLBuckets, l...)
	tpot := m.histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", vllmITLBuckets, l...)
	e2e := m.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", vllmLatencyBuckets, l...)
	queue := m.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", vllmLatencyBuckets, l...)
	inference := m.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", vllmLatencyBuckets, l...)
	prefill := m.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", vllmLatencyBuckets, l...)
	decode := m.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", vllmLatencyBuckets, l...)
	info := m.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
		"block_size", "cache_dtype", "enable_prefix_caching", "engine", "gpu_memory_utilization", "num_gpu_blocks")

	if n.Quirks.NoFailureCounters {
		preempt.omit()
	}
	v := &vllmMetrics{}
	if n.KVOffload != "" && n.Engine.showsOffload() {
		stored := m.counter("lmcache:num_stored_tokens_total", "Total number of tokens stored in lmcache including evicted ones",
			"model_name", "role", "served_model_name", "worker_id")
		for i := range n.cores() {
			v.lmcacheStored = append(v.lmcacheStored, stored.with(n.Model, "worker", n.Model, strconv.Itoa(i)))
		}
	}
	if n.SpecDecode != nil {
		drafts := m.counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", l...)
		draftTokens := m.counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", l...)
		accepted := m.counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", l...)
		for i := range n.cores() {
			e := strconv.Itoa(i)
			v.specDrafts = append(v.specDrafts, drafts.with(n.Model, e))
			v.specDraftTokens = append(v.specDraftTokens, draftTokens.with(n.Model, e))
			v.specAccepted = append(v.specAccepted, accepted.with(n.Model, e))
		}
	}
	if n.LoRA != nil {
		v.lora = m.gauge("vllm:lora_requests_info", "Running stats on lora requests.",
			"engine", "max_lora", "running_lora_adapters", "waiting_lora_adapters")
		v.loraMax = strconv.Itoa(n.LoRA.MaxLoaded)
		v.loraSeen = map[[3]string]*series{}
		v.loraLast = make([][2]string, n.cores())
		for i := range v.loraLast {
			v.loraLast[i] = [2]string{"\xff", ""} // no pair yet
		}
	}
	bs := n.blockSize()
	prefixCaching := "True" // vLLM V1's default
	if n.Workload.PrefixCacheHit == 0 {
		prefixCaching = "False"
	}
	for i := range n.cores() {
		e := strconv.Itoa(i)
		v.waiting = append(v.waiting, waiting.with(n.Model, e))
		v.running = append(v.running, running.with(n.Model, e))
		v.kv = append(v.kv, kv.with(n.Model, e))
		v.cacheQueries = append(v.cacheQueries, queries.with(n.Model, e))
		v.cacheHits = append(v.cacheHits, hits.with(n.Model, e))
		v.preemptions = append(v.preemptions, preempt.with(n.Model, e))
		v.prompt = append(v.prompt, prompt.with(n.Model, e))
		v.gen = append(v.gen, gen.with(n.Model, e))
		var s [numReasons]*series
		for r := range numReasons {
			s[r] = success.with(n.Model, e, r.String())
		}
		omitFailures(n, s)
		v.success = append(v.success, s)
		v.promptN = append(v.promptN, promptN.with(n.Model, e))
		v.outputN = append(v.outputN, outputN.with(n.Model, e))
		v.ttft = append(v.ttft, ttft.with(n.Model, e))
		v.itl = append(v.itl, itl.with(n.Model, e))
		v.tpot = append(v.tpot, tpot.with(n.Model, e))
		v.e2e = append(v.e2e, e2e.with(n.Model, e))
		v.queue = append(v.queue, queue.with(n.Model, e))
		v.inference = append(v.inference, inference.with(n.Model, e))
		v.prefill = append(v.prefill, prefill.with(n.Model, e))
		v.decode = append(v.decode, decode.with(n.Model, e))
		info.with(strconv.Itoa(bs), "auto", prefixCaching, e, "0.9", strconv.Itoa(n.Perf.KVCapacityTokens/bs)).set(1)
	}
	return v
}

func (m *vllmMetrics) state(c int, g gauges) {
	m.waiting[c].set(float64(g.waiting))
	m.running[c].set(float64(g.running))
	m.kv[c].set(g.kv)
	if m.lmcacheStored != nil {
		m.lmcacheStored[c].set(float64(g.storedTokens))
	}
	if m.lora != nil && g.lora {
		if pair := [2]string{g.loraRunning, g.loraWaiting}; pair != m.loraLast[c] {
			m.loraLast[c] = pair
			key := [3]string{strconv.Itoa(c), pair[0], pair[1]}
			s := m.loraSeen[key]
			if s == nil {
				s = m.lora.with(key[0], m.loraMax, pair[0], pair[1])
				m.loraSeen[key] = s
			}
			s.set(g.at)
		}
	}
}

func (m *vllmMetrics) spec(c, drafts, draftTokens, accepted int, _ float64) {
	m.specDrafts[c].inc(float64(drafts))
	m.specDraftTokens[c].inc(float64(draftTokens))
	m.specAccepted[c].inc(float64(accepted))
}

func (m *vllmMetrics) scheduled(c int, q float64, queried, hit int) {
	m.queue[c].observe(q)
	m.cacheQueries[c].inc(float64(queried))
	m.cacheHits[c].inc(float64(hit))
}

func (m *vllmMetrics) firstToken(c int, ttft float64, prompt int) {
	m.ttft[c].observe(ttft)
	m.prompt[c].inc(float64(prompt))
}

func (m *vllmMetrics) interToken(c int, gap float64) { m.itl[c].observe(gap) }
func (m *vllmMetrics) generated(c, n int, _ float64) { m.gen[c].inc(float64(n)) }
func (m *vllmMetrics) aborted(c int)                 { m.success[c][reasonAbort].inc(1) }
func (m *vllmMetrics) preempted(c int)               { m.preemptions[c].inc(1) }

func (m *vllmMetrics) finished(c int, r *request, now float64) {
	m.success[c][r.reason].inc(1)
	m.e2e[c].observe(now - r.arrival)
	if r.generated > 1 {
		m.tpot[c].observe((now - r.firstTok) / float64(r.generated-1))
	}
	m.inference[c].observe(now - r.scheduled)
	m.prefill[c].observe(r.firstTok - r.scheduled)
	m.decode[c].observe(now - r.firstTok)
	m.promptN[c].observe(float64(r.prompt))
	m.outputN[c].observe(float64(r.generated))
}

// sglangMetrics is SGLang's exposition: scheduler metrics per core with
// engine_type, model_name, moe_ep_rank, pp_rank and tp_rank (and dp_rank
// under DP attention, more than one core); tokenizer
// metrics (tokens, TTFT, ITL, E2E) for the whole node with model_name only.
// The 2024 label scheme (SGLangLegacy) has name where these have
// model_name.
type sglangMetrics struct {
	queueReqs, runningReqs, usage, used, genTput []*series
	retracted, queue                             []*series
	prompt, gen, requests, aborts                *series
	ttft, itl, e2e                               *series

	// gen_throughput is reported per window of tputWindow simulated seconds.
	tputStart []float64
	tputToks  []int

	// With speculative decoding (Node.SpecDecode): spec_accept_length and
	// spec_accept_rate per core, over the same windows as gen_throughput,
	// from the drafts (verify steps per request), draft and accepted tokens
	// of the window.
	acceptLength, acceptRate []*series
	specStart                []float64
	specWin                  [][3]int
}

var (
	_ recorder     = (*sglangMetrics)(nil)
	_ specRecorder = (*sglangMetrics)(nil)
)

const tputWindow = 5.0

// sglangSchedulerLabels are the label names of SGLang's scheduler series
// and their values per core (engine core i's at lvs[i]).
func sglangSchedulerLabels(n Node, model string) (l []string, lvs [][]string) {
	l = []string{"engine_type", model, "moe_ep_rank", "pp_rank", "tp_rank"}
	if n.cores() > 1 {
		// SGLang labels a scheduler with its dp_rank under DP attention.
		l = append(l, "dp_rank")
	}
	tp := max(int(n.Profile.TensorParallel), 1)
	for i := range n.cores() {
		// With DP attention every data-parallel rank is a scheduler of its
		// own TP rank; expert parallelism shares the rank numbering.
		rank := strconv.Itoa(i * tp)
		ep := "0"
		if n.Profile.ExpertParallel > 1 {
			ep = rank
		}
		lv := []string{sglangEngineType(n), n.Model, ep, "0", rank}
		if n.cores() > 1 {
			lv = append(lv, strconv.Itoa(i))
		}
		lvs = append(lvs, lv)
	}
	return l, lvs
}

func newSGLangMetrics(m *metricSet, n Node, model string) *sglangMetrics {
	l, lvs := sglangSchedulerLabels(n, model)
	queueReqs := m.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", l...)
	runningReqs := m.gauge("sglang:num_running_reqs", "The number of running requests.", l...)
	usage := m.gauge("sglang:token_usage", "The token usage.", l...)
	used := m.gauge("sglang:num_used_tokens", "The number of used tokens.", l...)
	maxTotal := m.gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", l...)
	genTput := m.gauge("sglang:gen_throughput", "The generation throughput (token/s).", l...)
	retracted := m.counter("sglang:num_retracted_requests_total", "Total number of retracted requests.", l...)
	queue := m.histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", sglangQueueBuckets, l...)

	s := &sglangMetrics{
		prompt:   m.counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", model).with(n.Model),
		gen:      m.counter("sglang:generation_tokens_total", "Number of generation tokens processed.", model).with(n.Model),
		requests: m.counter("sglang:num_requests_total", "Number of requests processed.", model).with(n.Model),
		// SGLang creates the series with the first abort; here it is there
		// from the start, at 0, unless Quirks.LazySeries.
		aborts: m.counter("sglang:num_aborted_requests_total", "Number of requests aborted.", model).with(n.Model),
		ttft:   m.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", sglangTTFTBuckets, model).with(n.Model),
		itl:    m.histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", sglangITLBuckets, model).with(n.Model),
		e2e:    m.histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", sglangE2EBuckets, model).with(n.Model),
	}
	if n.Quirks.NoFailureCounters {
		retracted.omit()
		s.aborts.omit()
	}
	for _, lv := range lvs {
		s.queueReqs = append(s.queueReqs, queueReqs.with(lv...))
		s.runningReqs = append(s.runningReqs, runningReqs.with(lv...))
		s.usage = append(s.usage, usage.with(lv...))
		s.used = append(s.used, used.with(lv...))
		s.genTput = append(s.genTput, genTput.with(lv...))
		s.retracted = append(s.retracted, retracted.with(lv...))
		s.queue = append(s.queue, queue.with(lv...))
		maxTotal.with(lv...).set(float64(n.Perf.KVCapacityTokens / n.blockSize() * n.blockSize()))
	}
	s.tputStart = make([]float64, n.cores())
	s.tputToks = make([]int, n.cores())
	if n.SpecDecode != nil {
		length := m.gauge("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", l...)
		rate := m.gauge("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.", l...)
		for i := range n.cores() {
			lv := s.queueReqs[i].labels
			s.acceptLength = append(s.acceptLength, length.with(lv...))
			s.acceptRate = append(s.acceptRate, rate.with(lv...))
		}
		s.specStart = make([]float64, n.cores())
		s.specWin = make([][3]int, n.cores())
	}
	return s
}

func (m *sglangMetrics) spec(c, drafts, draftTokens, accepted int, now float64) {
	w := &m.specWin[c]
	w[0], w[1], w[2] = w[0]+drafts, w[1]+draftTokens, w[2]+accepted
	if now-m.specStart[c] < tputWindow || w[0] == 0 {
		return
	}
	// Tokens per verify step and request: the accepted drafts and the
	// target model's own token.
	m.acceptLength[c].set(1 + float64(w[2])/float64(w[0]))
	m.acceptRate[c].set(float64(w[2]) / float64(w[1]))
	m.specStart[c], *w = now, [3]int{}
}

func (m *sglangMetrics) state(c int, g gauges) {
	m.queueReqs[c].set(float64(g.waiting))
	m.runningReqs[c].set(float64(g.running))
	m.used[c].set(float64(g.usedTokens))
	m.usage[c].set(g.kv)
}

func (m *sglangMetrics) scheduled(c int, q float64, _, _ int) { m.queue[c].observe(q) }

func (m *sglangMetrics) firstToken(_ int, ttft float64, prompt int) {
	m.ttft.observe(ttft)
	m.prompt.inc(float64(prompt))
}

func (m *sglangMetrics) interToken(_ int, gap float64) { m.itl.observe(gap) }

func (m *sglangMetrics) generated(c, n int, now float64) {
	m.gen.inc(float64(n))
	m.tputToks[c] += n
	if d := now - m.tputStart[c]; d >= tputWindow {
		m.genTput[c].set(float64(m.tputToks[c]) / d)
		m.tputStart[c], m.tputToks[c] = now, 0
	}
}

func (m *sglangMetrics) finished(_ int, r *request, now float64) {
	m.requests.inc(1)
	m.e2e.observe(now - r.arrival)
}

func (m *sglangMetrics) aborted(int) { m.aborts.inc(1) }

func (m *sglangMetrics) preempted(c int) { m.retracted[c].inc(1) }
