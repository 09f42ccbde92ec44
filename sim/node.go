package sim

import (
	"container/heap"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// nodeStats are a node's running totals, kept beside its metrics.
type nodeStats struct {
	promptTokens, generationTokens uint64
	finished, aborted, preemptions uint64
}

// group is a set of cores that step together: one core normally, all of a
// node's cores in lockstep mode.
type group struct {
	cores []*core
	busy  bool
	end   float64 // simulated second the current iteration ends
	own   []float64
	// held: the group was idle when work came during a hang (Node.Hang);
	// it starts its next iteration at end, when the hang is over.
	held bool
}

// start schedules an iteration at t on every core of the group. The
// forward pass lasts as long as the slowest core's (attention, prefill's
// included, runs on each rank for its own requests), plus the group's
// prefill tokens at the group's pooled prefill rate: in lockstep the
// experts are sharded over all ranks (EP), so one rank's prefill is
// computed by every GPU while the others wait for it. A group with no work
// goes idle.
func (g *group) start(t float64) {
	var fixed float64
	var prefill int
	g.busy = false
	own := g.own[:0]
	for _, c := range g.cores {
		f := 0.0
		if c.schedule(t) {
			g.busy = true
			var p int
			f, p = c.cost()
			fixed = max(fixed, f)
			prefill += p
		}
		own = append(own, f)
		c.publish(t)
	}
	pooled := float64(prefill) / (g.cores[0].perf.PrefillTokensPerSec * float64(len(g.cores)))
	g.end = t + fixed + pooled
	g.own = own
	if g.busy {
		for i, c := range g.cores {
			c.iteration(t, g.end, own[i], pooled)
		}
	}
}

func (g *group) complete() {
	for _, c := range g.cores {
		c.complete(g.end)
	}
}

// node is one simulated server: its cores, its arrival process and its
// metrics. The simulation state is changed only by advance, under mu (and
// the Fleet's mu), and read by scrapes under mu; the serving fields are
// guarded by the Fleet's serve mutex or atomic.
type node struct {
	mu      sync.Mutex
	cfg     Node
	rng     *rand.Rand
	cores   []*core
	groups  []*group
	reg     *prometheus.Registry
	stats   nodeStats
	maxLen  int
	arrival float64 // next arrival, simulated seconds: min(poisson, next[0])
	poisson float64 // next open-loop arrival
	peak    float64 // highest arrival rate, for thinning
	next    times   // closed loop: when each thinking session sends next
	// sessions is the closed-loop sessions the current load asks for;
	// live those still going (thinking, or with a request out), more than
	// sessions after a phase cut them until their requests end.
	sessions, live int
	warmup         float64 // end of warm-up: phases are measured from it
	phase          int     // next of cfg.Workload.Phases to enter

	down    atomic.Bool  // set by SetDown
	garbage atomic.Int32 // Garbage mode
	// hung is set by SetHang: a hang without end, as a Hang window's.
	hung bool

	// serving, guarded by Fleet.smu
	addr string
	ep   *endpoint
	// inflight counts the completion requests the node's HTTP server holds.
	inflight atomic.Int64

	// now is the simulated second advance has reached; dcgm the registry
	// of the node's DCGM exporter (dcgm.go), idHash what its GPUs' UUIDs
	// derive from.
	now      float64
	dcgm     *prometheus.Registry
	gpuModel gpuModel
	idHash   uint32
}

func newNode(cfg Node, seed int64, warmup time.Duration) *node {
	h := fnv.New64a()
	h.Write([]byte(cfg.ID))
	cfg.Workload.Phases = slices.Clone(cfg.Workload.Phases)
	n := &node{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(uint64(seed), h.Sum64())),
		reg:      prometheus.NewRegistry(),
		maxLen:   cfg.maxModelLen(),
		sessions: cfg.Workload.Sessions,
		warmup:   warmup.Seconds(),
	}
	n.garbage.Store(int32(cfg.Garbage))
	n.idHash = uint32(h.Sum64())
	n.gpuModel = newGPUModel(cfg)
	n.dcgm = prometheus.NewRegistry()
	n.dcgm.MustRegister(newDCGMCollector(n))
	n.setPeak()
	ms := &metricSet{mu: &n.mu, lazy: cfg.Quirks.LazySeries}
	rec := withDisagg(newRecorder(ms, cfg), ms, cfg)
	n.reg.MustRegister(ms)
	bs := cfg.blockSize()
	for i := range cfg.cores() {
		c := &core{
			idx:     i,
			perf:    cfg.Perf,
			sglang:  cfg.scheduler() == SchedulerSGLang,
			bs:      bs,
			offload: cfg.KVOffload != "",
			blocks:  cfg.Perf.KVCapacityTokens / bs,
			prefix:  cfg.sharedPrefix() / bs,
			timeout: cfg.queueTimeout().Seconds(),
			reserve: cfg.reserveRatio(),
			rec:     rec,
			stats:   &n.stats,
			ended:   n.ended,
			ttftAt:  cfg.Quirks.TTFTExcludesQueue,
			model:   n.gpuModel,
		}
		c.perf = throttled(cfg, i, c.perf, n.gpuModel)
		c.base = c.perf
		if s := cfg.SpecDecode; s != nil {
			cost := s.DraftCost
			if cost == 0 {
				cost = defaultDraftCost
			}
			c.baseDraft = cost * c.perf.StepBase.Seconds()
			c.spec = &speculator{k: s.DraftTokens, accept: s.AcceptRate, draft: c.baseDraft, rng: n.rng}
		}
		if l := cfg.LoRA; l != nil {
			c.lora = &loras{names: l.Adapters, max: l.MaxLoaded, running: make([]int, len(l.Adapters))}
		}
		c.publish(0)
		n.cores = append(n.cores, c)
	}
	if cfg.Perf.Lockstep {
		n.groups = []*group{{cores: n.cores}}
	} else {
		for _, c := range n.cores {
			n.groups = append(n.groups, &group{cores: []*core{c}})
		}
	}
	n.poisson = n.nextArrival(0)
	for n.live < n.sessions {
		n.live++
		n.think(0)
	}
	n.setArrival()
	return n
}

// setPeak sets the thinning peak from the current rate and burst.
func (n *node) setPeak() {
	n.peak = n.cfg.Workload.Rate
	if b := n.cfg.Workload.Burst; b != nil {
		n.peak *= max(b.Factor, 1)
	}
}

// setArrival sets the next arrival from the open-loop and session ones.
func (n *node) setArrival() {
	n.arrival = n.poisson
	if len(n.next) > 0 {
		n.arrival = min(n.arrival, n.next[0])
	}
}

// phaseAt is when the next phase starts, in simulated seconds; +Inf when
// there is none.
func (n *node) phaseAt() float64 {
	if n.phase >= len(n.cfg.Workload.Phases) {
		return math.Inf(1)
	}
	return n.warmup + n.cfg.Workload.Phases[n.phase].At.Seconds()
}

// enter starts the next phase at t (see Phase).
func (n *node) enter(t float64) {
	ph := n.cfg.Workload.Phases[n.phase]
	n.phase++
	w := &n.cfg.Workload
	w.Rate, w.Sessions, w.Think = ph.Rate, ph.Sessions, ph.Think
	n.setPeak()
	n.poisson = n.nextArrival(t)
	n.sessions = ph.Sessions
	for n.live < n.sessions {
		n.live++
		n.think(t)
	}
	for n.live > n.sessions && len(n.next) > 0 {
		last := 0
		for i, x := range n.next {
			if x > n.next[last] {
				last = i
			}
		}
		heap.Remove(&n.next, last)
		n.live--
	}
	n.setArrival()
}

// times is a min-heap of simulated instants.
type times []float64

func (h times) Len() int           { return len(h) }
func (h times) Less(i, j int) bool { return h[i] < h[j] }
func (h times) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *times) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *times) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// think starts a closed-loop session's think time at t.
func (n *node) think(t float64) {
	heap.Push(&n.next, t+n.rng.ExpFloat64()*n.cfg.Workload.Think.Seconds())
}

// ended is called when a closed-loop session's request ended at t: the
// session thinks, then sends its next request, unless the load has fewer
// sessions now.
func (n *node) ended(t float64) {
	if n.live > n.sessions {
		n.live--
	} else {
		n.think(t)
	}
	n.setArrival()
}

// arrived advances the arrival process past the arrival at t and reports
// whether it was a session's.
func (n *node) arrived(t float64) bool {
	session := len(n.next) > 0 && n.next[0] <= n.poisson
	if session {
		heap.Pop(&n.next)
	} else {
		n.poisson = n.nextArrival(t)
	}
	n.setArrival()
	return session
}

// rate is the arrival rate at simulated second t.
func (n *node) rate(t float64) float64 {
	w := n.cfg.Workload
	if b := w.Burst; b != nil && math.Mod(t, b.Every.Seconds()) < b.Length.Seconds() {
		return w.Rate * b.Factor
	}
	return w.Rate
}

// nextArrival draws the first arrival after t of a Poisson process with
// rate n.rate, by thinning a process at the peak rate.
func (n *node) nextArrival(t float64) float64 {
	if n.peak <= 0 {
		return math.Inf(1)
	}
	for {
		t += n.rng.ExpFloat64() / n.peak
		if n.cfg.Workload.Burst == nil || n.rng.Float64()*n.peak < n.rate(t) {
			return t
		}
	}
}

// sample draws a length from a mixture.
func (n *node) sample(l Lengths) int {
	var total float64
	for _, c := range l {
		total += c.Weight
	}
	u := n.rng.Float64() * total
	c := l[len(l)-1]
	for _, k := range l {
		if u < k.Weight {
			c = k
			break
		}
		u -= k.Weight
	}
	return int(min(max(math.Round(c.Median*math.Exp(c.Sigma*n.rng.NormFloat64())), 1), math.MaxInt32))
}

// newRequest draws a request arriving at t: the shared prefix, then a
// drawn prompt, cut to the model length; outputs stop at max_tokens or the
// model length with reason "length".
func (n *node) newRequest(t float64) *request {
	w := n.cfg.Workload
	r := &request{arrival: t, adapter: -1}
	if l := n.cfg.LoRA; l != nil {
		r.adapter = n.rng.IntN(len(l.Adapters))
	}
	bs := n.cores[0].bs
	s := n.cores[0].prefix * bs
	r.prompt = min(s+n.sample(w.Prompt), n.maxLen-1)
	last := (r.prompt - 1) / bs * bs // the last token is always computed
	r.shared = min(s, last)
	r.blocks = r.shared / bs // spanned, held by the core
	r.cached = min(r.shared+int(float64(r.prompt-r.shared)*w.PrefixCacheHit)/bs*bs, last)
	r.computed = r.cached
	r.maxTokens = n.maxLen - r.prompt
	if w.MaxTokens > 0 {
		r.maxTokens = min(r.maxTokens, w.MaxTokens)
	}
	r.output = n.sample(w.Output)
	if r.output >= r.maxTokens {
		r.output, r.reason = r.maxTokens, reasonLength
	}
	n.remoteKV(r, t)
	return r
}

// route picks the core a new request goes to, as vLLM's data-parallel load
// balancer does: the lowest 4·waiting+running; ties go to the core with the
// least KV in use, then to the lowest index.
func (n *node) route() *core {
	best := n.cores[0]
	for _, c := range n.cores[1:] {
		s, b := 4*len(c.waiting)+len(c.running), 4*len(best.waiting)+len(best.running)
		if s < b || s == b && c.used < best.used {
			best = c
		}
	}
	return best
}

// advance runs the node's events up to simulated second to: iteration ends
// (first, on ties) and arrivals, in time order.
func (n *node) advance(to float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		var next *group
		for _, g := range n.groups {
			if g.busy && (next == nil || g.end < next.end) {
				next = g
			}
		}
		phase := n.phaseAt()
		switch {
		case next != nil && next.end <= n.arrival && next.end <= phase && next.end <= to:
			if until, hung := n.hungAt(next.end); hung {
				next.end = until // held until the hang ends, +Inf for good
				continue
			}
			if next.held {
				next.held = false
			} else {
				next.complete()
			}
			next.start(next.end)
		case phase <= n.arrival && phase <= to:
			n.enter(phase)
		case n.arrival <= to:
			t := n.arrival
			c := n.route()
			r := n.newRequest(t)
			r.session = n.arrived(t)
			n.place(c, r, t)
		default:
			n.now = max(n.now, to)
			return
		}
	}
}

// place queues the request r, arriving at t, on core c, and starts c's
// group if it is idle (held until the end of a hang).
func (n *node) place(c *core, r *request, t float64) {
	c.enqueue(r)
	g := n.groupOf(c)
	if until, hung := n.hungAt(t); hung && !g.busy {
		g.busy, g.held, g.end = true, true, until
	}
	if !g.busy {
		g.start(t)
	} else {
		c.publish(t)
	}
}

// hungAt reports whether simulated second t falls in one of the node's
// Hang windows (measured from the end of warm-up) or is hung by SetHang,
// and when the hang ends: +Inf for a hang without end (SetHang's).
func (n *node) hungAt(t float64) (until float64, hung bool) {
	if n.hung {
		return math.Inf(1), true
	}
	for _, w := range n.cfg.Hang {
		from, to := n.warmup+w.Start.Seconds(), math.Inf(1)
		if w.End != 0 {
			to = n.warmup + w.End.Seconds()
		}
		if t >= from && t < to {
			until, hung = max(until, to), true
		}
	}
	return until, hung
}

func (n *node) groupOf(c *core) *group {
	if len(n.groups) == 1 {
		return n.groups[0]
	}
	return n.groups[c.idx]
}
