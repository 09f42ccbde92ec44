package sim

import "slices"

// finishReason is vLLM's finished_reason label value.
type finishReason int

const (
	reasonStop finishReason = iota
	reasonLength
	reasonAbort
	reasonError
	numReasons
)

func (r finishReason) String() string {
	return [...]string{"stop", "length", "abort", "error"}[r]
}

// request is one inference request as an engine core sees it. Times are
// simulated seconds.
type request struct {
	arrival   float64
	prompt    int          // prompt tokens
	shared    int          // leading prompt tokens in the core's shared prefix blocks
	cached    int          // prompt tokens found in the prefix cache, shared ones included
	output    int          // tokens the request will generate in total
	maxTokens int          // the most it may generate (client max_tokens or model length)
	reason    finishReason // why generation stops at output

	computed  int  // tokens whose KV is in cache, prefix-cache hits included
	generated int  // tokens sampled so far
	blocks    int  // KV blocks its tokens span, the shared prefix's included
	holds     bool // holds a reference on the core's shared prefix blocks
	sched     int  // tokens scheduled in the current iteration

	adapter int // LoRA adapter (index in LoRA.Adapters); -1 none

	session   bool    // sent by a closed-loop session
	ext       *waiter // received over HTTP: who waits for its tokens; nil for built-in arrivals
	started   bool    // scheduled at least once
	scheduled float64 // first scheduled
	firstTok  float64
	lastTok   float64
	done      bool
}

// need is the number of tokens to compute before the next token can be
// sampled: the rest of the prompt (and, after preemption, of the generated
// tokens), or 1 while decoding.
func (r *request) need() int { return r.prompt + r.generated - r.computed }

// decoding reports whether the request is past its prefill.
func (r *request) decoding() bool { return r.generated > 0 && r.need() == 1 }

// core is one engine core (data-parallel rank): a continuous-batching
// scheduler over its own queue, batch and KV cache. It runs on its node's
// goroutine only.
type core struct {
	idx  int
	perf Perf
	// base is perf before SetSlowdown, baseDraft a draft pass's seconds.
	base      Perf
	baseDraft float64
	sglang    bool
	bs        int // KV block size in tokens
	blocks    int // KV capacity in blocks
	used      int // KV blocks in use
	// offload: an offload tier keeps freed blocks resident (Node.KVOffload);
	// stored counts the blocks ever allocated, resident or not.
	offload bool
	stored  int
	prefix  int     // blocks of the workload's shared prefix
	refs    int     // running requests holding the shared prefix blocks
	timeout float64 // queue abandonment, seconds
	reserve float64 // SGLang new_token_ratio

	// fresh counts the core's requests, waiting or running, that have not
	// sampled their first token; prefilling the running ones among them.
	fresh, prefilling int

	waiting []*request // FIFO; preempted requests go to the front
	running []*request // admission order, newest last
	batch   []*request // scheduled in the current iteration
	budget  int        // tokens left in the step being scheduled
	preempt bool       // a preemption happened in the step being scheduled

	rec   recorder
	stats *nodeStats
	ended func(t float64) // a session's request finished or was abandoned at t
	// ttftAt measures TTFT from first scheduling (Quirks.TTFTExcludesQueue).
	ttftAt bool
	// spec is the core's speculative decoding, lora its LoRA adapters;
	// nil without.
	spec *speculator
	lora *loras

	// model and gpu are the core's GPUs: what their DCGM figures follow
	// from, and their recent activity (dcgm.go).
	model gpuModel
	gpu   gpuLoad
}

// cost splits the scheduled batch's iteration time: the seconds of the
// forward pass the core computes alone (weights, per-sequence compute,
// attention over the decoding contexts and over the prefill chunks'
// contexts) and the prefill tokens whose remaining compute it may share.
func (c *core) cost() (float64, int) {
	var decode, prefill, ctx, drafts int
	var attn float64 // prefill token × context pairs, in thousands
	for _, r := range c.batch {
		if r.decoding() {
			// Every verified token (one, or one and the drafts) costs
			// compute; the context is read once.
			decode += r.sched
			drafts = max(drafts, r.sched-1)
			ctx += r.computed
		} else {
			prefill += r.sched
			attn += float64(r.sched) * (float64(r.computed) + float64(r.sched)/2) / 1000
		}
	}
	p := c.perf
	var draft float64
	if c.spec != nil {
		draft = float64(drafts) * c.spec.draft
	}
	return p.StepBase.Seconds() + float64(decode)*p.StepPerSeq.Seconds() + draft +
		float64(ctx)/1000*p.StepPerKContext.Seconds() + attn*p.PrefillPerKContext.Seconds(), prefill
}

// schedule forms the batch of the iteration starting at t; false when the
// core has nothing to run.
func (c *core) schedule(t float64) bool {
	c.expire(t)
	c.budget = c.perf.MaxBatchedTokens
	c.preempt = false
	if c.sglang {
		c.scheduleSGLang(t)
	} else {
		c.scheduleVLLM(t)
	}
	c.batch = c.batch[:0]
	for _, r := range c.running {
		if r.sched > 0 {
			c.batch = append(c.batch, r)
		}
	}
	return len(c.batch) > 0
}

// scheduleVLLM follows vLLM V1: running requests first (decode, then
// prefill chunks), growing their KV and preempting the newest request when
// it does not fit; then, unless something was preempted, waiting requests
// in FIFO order while slots, budget and KV for their first chunk last.
func (c *core) scheduleVLLM(t float64) {
	for i := 0; i < len(c.running) && c.budget > 0; i++ {
		r := c.running[i]
		if !r.decoding() {
			continue
		}
		if n := min(c.spec.tokens(r), c.budget); c.grow(r, n) {
			r.sched, c.budget = n, c.budget-n
		}
	}
	for i := 0; i < len(c.running) && c.budget > 0; i++ {
		r := c.running[i]
		if r.sched > 0 || r.decoding() {
			continue
		}
		if n := min(r.need(), c.budget); c.grow(r, n) {
			r.sched, c.budget = n, c.budget-n
		}
	}
	if c.preempt && c.hasScheduled() {
		return
	}
	for i := 0; i < len(c.waiting) && len(c.running) < c.perf.MaxNumSeqs && c.budget > 0; {
		r := c.waiting[i]
		if !c.lora.fits(r) {
			// Its adapter cannot be loaded now: the requests behind it
			// may go first (vLLM skips it).
			i++
			continue
		}
		n := min(r.need(), c.budget)
		if !c.fits(r, n) {
			break
		}
		c.admit(t, i, n)
	}
}

// scheduleSGLang follows SGLang's default policy: a prefill batch (chunked
// prefill continued, then new requests that fit with KV headroom reserved
// for the running ones' future tokens) runs alone; only when there is no
// prefill work does a decode batch run, retracting the newest request when
// KV runs out.
func (c *core) scheduleSGLang(t float64) {
	for _, r := range c.running {
		if c.budget == 0 {
			break
		}
		if r.decoding() {
			continue
		}
		if n := min(r.need(), c.budget); c.fits(r, n) {
			c.take(r, n)
			r.sched, c.budget = n, c.budget-n
		}
	}
	var reserved float64
	for _, r := range c.running {
		reserved += c.reservation(r)
	}
	for i := 0; i < len(c.waiting) && len(c.running) < c.perf.MaxNumSeqs && c.budget > 0; {
		r := c.waiting[i]
		if !c.lora.fits(r) {
			i++
			continue
		}
		if float64(c.free()*c.bs)-reserved < float64(r.need()) {
			break
		}
		c.admit(t, i, min(r.need(), c.budget))
		reserved += c.reservation(r)
	}
	if c.hasScheduled() {
		return
	}
	for i := 0; i < len(c.running); i++ {
		r := c.running[i]
		if !r.decoding() {
			continue
		}
		if n := c.spec.tokens(r); c.grow(r, n) {
			r.sched = n
		}
	}
}

// reservation is the KV SGLang keeps free for r's future tokens: the rest
// of a chunked prefill and a share of the tokens it may still generate.
func (c *core) reservation(r *request) float64 {
	rest := 0
	if !r.decoding() {
		rest = r.need() - r.sched
	}
	return float64(rest) + c.reserve*float64(min(r.maxTokens-r.generated, 4096))
}

func (c *core) hasScheduled() bool {
	for _, r := range c.running {
		if r.sched > 0 {
			return true
		}
	}
	return false
}

func (c *core) free() int { return c.blocks - c.used }

// extra is how many more blocks r needs to hold n more tokens: its own,
// and the shared prefix blocks if it is the first running request to hold
// them (while nobody does they are cached but free).
func (c *core) extra(r *request, n int) int {
	e := (r.computed+n+c.bs-1)/c.bs - r.blocks
	if r.shared > 0 && !r.holds && c.refs == 0 {
		e += c.prefix
	}
	return e
}

func (c *core) fits(r *request, n int) bool { return c.extra(r, n) <= c.free() }

func (c *core) take(r *request, n int) {
	e := c.extra(r, n)
	if r.shared > 0 && !r.holds {
		if c.refs == 0 {
			c.used += c.prefix
			e -= c.prefix
		}
		c.refs++
		r.holds = true
	}
	r.blocks += e
	c.used += e
	// e < 0 gives back the slots of rejected draft tokens.
	c.stored += max(e, 0)
}

// release frees the KV blocks r holds, the shared prefix blocks with the
// last reference (they stay cached).
func (c *core) release(r *request) {
	c.used -= r.blocks - r.shared/c.bs
	r.blocks = r.shared / c.bs
	if r.holds {
		r.holds = false
		if c.refs--; c.refs == 0 {
			c.used -= c.prefix
		}
	}
}

// grow allocates KV for n more tokens of the running request r, preempting
// the newest running requests until it fits; false when r itself had to go.
func (c *core) grow(r *request, n int) bool {
	for !c.fits(r, n) {
		v := c.running[len(c.running)-1]
		c.evict(v)
		if v == r {
			return false
		}
	}
	c.take(r, n)
	return true
}

// evict preempts the newest running request v: its blocks are freed and it
// waits at the head of the queue. Its full blocks stay in the prefix cache
// as evictable, so it resumes from them if, when readmitted, there is room
// for them again (nobody took their place); the rest is recomputed.
func (c *core) evict(v *request) {
	c.running = c.running[:len(c.running)-1]
	c.lora.remove(v)
	c.release(v)
	c.budget += v.sched
	v.computed, v.sched = max(v.cached, v.computed/c.bs*c.bs), 0
	if v.generated == 0 {
		c.prefilling--
	}
	c.waiting = append(c.waiting, nil)
	copy(c.waiting[1:], c.waiting)
	c.waiting[0] = v
	c.preempt = true
	c.stats.preemptions++
	c.rec.preempted(c.idx)
}

// admit moves the i-th waiting request (the head but for LoRA adapters
// not loaded) into the batch with an n-token chunk.
func (c *core) admit(t float64, i int, n int) {
	r := c.waiting[i]
	if i == 0 {
		c.waiting = c.waiting[1:]
	} else {
		c.waiting = slices.Delete(c.waiting, i, i+1)
	}
	c.running = append(c.running, r)
	c.lora.add(r)
	c.take(r, n)
	r.sched, c.budget = n, c.budget-n
	if r.generated == 0 {
		c.prefilling++
	}
	if !r.started {
		r.started, r.scheduled = true, t
		c.rec.scheduled(c.idx, t-r.arrival, r.prompt, r.cached)
	}
}

// expire aborts requests that waited, never scheduled, longer than the
// queue timeout. Unscheduled requests are in arrival order, so only the
// oldest one needs checking.
func (c *core) expire(t float64) {
	stale := false
	for _, r := range c.waiting {
		if !r.started {
			stale = t-r.arrival > c.timeout
			break
		}
	}
	if !stale {
		return
	}
	kept := c.waiting[:0]
	for _, r := range c.waiting {
		if !r.started && t-r.arrival > c.timeout {
			c.stats.aborted++
			c.fresh-- // never scheduled, so no first token
			c.rec.aborted(c.idx)
			if r.session {
				c.ended(t)
			}
			r.ext.abort()
			continue
		}
		kept = append(kept, r)
	}
	clear(c.waiting[len(kept):])
	c.waiting = kept
}

// complete ends the iteration at t: scheduled tokens are computed, requests
// whose context is complete sample a token, finished ones leave.
func (c *core) complete(t float64) {
	gen, finished := 0, 0
	var drafts, draftTokens, accepted int
	for _, r := range c.batch {
		emit := 1
		if k := r.sched - 1; k > 0 && r.decoding() {
			// Speculative: the accepted drafts and the target's own token.
			a := c.spec.accepted(k)
			drafts, draftTokens, accepted = drafts+1, draftTokens+k, accepted+a
			emit = 1 + a
			r.computed += emit
		} else {
			r.computed += r.sched
		}
		r.sched = 0
		if r.need() > 0 {
			continue
		}
		r.generated += emit
		gen += emit
		if r.generated == 1 {
			r.firstTok = t
			c.fresh--
			c.prefilling--
			c.stats.promptTokens += uint64(r.prompt)
			from := r.arrival
			if c.ttftAt {
				from = r.scheduled
			}
			c.rec.firstToken(c.idx, t-from, r.prompt)
		} else {
			c.rec.interToken(c.idx, t-r.lastTok)
		}
		r.lastTok = t
		if r.generated >= r.output {
			r.done = true
			finished++
		}
		r.ext.progress(min(r.generated, r.output), r.done)
	}
	clear(c.batch)
	c.batch = c.batch[:0]
	if sr, ok := c.rec.(specRecorder); ok && drafts > 0 {
		sr.spec(c.idx, drafts, draftTokens, accepted, t)
	}
	if gen > 0 {
		c.stats.generationTokens += uint64(gen)
		c.rec.generated(c.idx, gen, t)
	}
	if finished == 0 {
		return
	}
	kept := c.running[:0]
	for _, r := range c.running {
		if !r.done {
			kept = append(kept, r)
			continue
		}
		c.release(r)
		c.lora.remove(r)
		c.stats.finished++
		c.rec.finished(c.idx, r, t)
		if r.session {
			c.ended(t)
		}
	}
	clear(c.running[len(kept):])
	c.running = kept
}

// enqueue adds a new request at the back of the queue.
func (c *core) enqueue(r *request) {
	c.waiting = append(c.waiting, r)
	c.fresh++
}

// publish reports the core's gauges at t.
func (c *core) publish(t float64) {
	g := gauges{
		waiting:      len(c.waiting),
		running:      len(c.running),
		fresh:        c.fresh,
		prefilling:   c.prefilling,
		usedTokens:   c.resident() * c.bs,
		kv:           float64(c.resident()) / float64(c.blocks),
		storedTokens: c.stored * c.bs,
		at:           t,
	}
	if c.lora != nil {
		g.lora = true
		g.loraRunning, g.loraWaiting = c.lora.lists(c.waiting)
	}
	c.rec.state(c.idx, g)
}

// resident is the KV blocks the GPU cache reports in use: those running
// requests hold and, with an offload tier, the freed blocks it keeps
// resident, up to offloadResident of the cache.
func (c *core) resident() int {
	if !c.offload {
		return c.used
	}
	return max(c.used, min(c.stored, int(offloadResident*float64(c.blocks))))
}
