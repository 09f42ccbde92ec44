package client

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// FailPolicy says what the lookups of a View answer when the view cannot be
// trusted: before the first complete state, when no message (heartbeats
// included) has arrived for longer than the stale bound — the service is
// unreachable or the stream is stuck — and, for a single node, when the
// view does not know it.
type FailPolicy int

const (
	// FailOpen (the default) routes as if llmdiag were not there: Routable
	// is true and Pick chooses uniformly among all candidates. An outage of
	// llmdiag then costs routing quality, never traffic.
	FailOpen FailPolicy = iota
	// FailClosed refuses: Routable is false and Pick finds nothing.
	FailClosed
)

// NodeState is the view's copy of one node's health, as last streamed.
type NodeState struct {
	Node      string
	Model     string
	Status    llmdiagv1.Status
	RootCause llmdiagv1.Cause
	Routable  bool
	// LoadScore is 0 idle, 1 saturated, above 1 overloaded.
	LoadScore float64
	// Staleness is the age of the node's data when the service sent it.
	Staleness  time.Duration
	ObservedAt time.Time
	Labels     map[string]string
	// Received is when this view received the state.
	Received time.Time
}

// WatchStatus is the state of a View's stream.
type WatchStatus struct {
	// Connected is true from the first message of a stream until it ends.
	Connected bool
	// Synced is true once a complete state has been received.
	Synced bool
	// LastEvent is when the last message (heartbeats included) arrived;
	// zero before the first.
	LastEvent time.Time
	// Age is the time since LastEvent (since Watch before any message).
	Age time.Duration
	// Stale is true before the first complete state and when Age exceeds
	// the stale bound: the lookups then follow the FailPolicy.
	Stale bool
	// LastError is why the last stream ended, nil if none has.
	LastError error
	// Reconnects counts the streams opened after the first.
	Reconnects int
	// Nodes is the number of nodes in the view.
	Nodes int
}

// slot holds one node's latest state. A snapshot's map of slots is never
// changed once published; a CHANGE for a node the map already has replaces
// the state in its slot, so a change costs one allocation, not a copy of
// the fleet. hot repeats what Pick and Routable need in one word, read
// without following the state pointer: the load score's bits, with the
// sign bit set when the node is not routable (scores are never negative).
type slot struct {
	hot atomic.Uint64
	st  atomic.Pointer[NodeState]
}

const unroutableBit = 1 << 63

func (sl *slot) set(st *NodeState) {
	sl.st.Store(st)
	h := math.Float64bits(st.LoadScore)
	if !st.Routable {
		h |= unroutableBit
	}
	sl.hot.Store(h)
}

// snapshot is one immutable node set, replaced as a whole at SYNCED (and
// when a node joins or leaves between resyncs).
type snapshot struct {
	nodes map[string]*slot
	// joined holds the nodes that joined since nodes was made, none of them
	// in it: a join copies this small map, not nodes (see watcher.change),
	// so a fleet that arrives node by node costs O(n√n), not O(n²).
	joined map[string]*slot
	synced bool
}

// slot is node's slot, nil when the view does not hold it.
func (s *snapshot) slot(node string) *slot {
	if sl := s.nodes[node]; sl != nil {
		return sl
	}
	if len(s.joined) > 0 {
		return s.joined[node]
	}
	return nil
}

// len is the number of nodes the view holds.
func (s *snapshot) len() int { return len(s.nodes) + len(s.joined) }

// all yields the slot of every node the view holds.
func (s *snapshot) all(yield func(*slot) bool) {
	for _, sl := range s.nodes {
		if !yield(sl) {
			return
		}
	}
	for _, sl := range s.joined {
		if !yield(sl) {
			return
		}
	}
}

// merged is a copy of s's nodes and joined nodes in one map.
func (s *snapshot) merged() map[string]*slot {
	m := make(map[string]*slot, s.len()+1)
	for id, sl := range s.nodes {
		m[id] = sl
	}
	for id, sl := range s.joined {
		m[id] = sl
	}
	return m
}

func (s *snapshot) state(node string) *NodeState {
	if sl := s.slot(node); sl != nil {
		return sl.st.Load()
	}
	return nil
}

// Scores Pick works with: below 0 the node is unknown, +Inf not routable.
const (
	unknownScore = -1.0
	pickBuf      = 64 // candidates whose score Pick keeps on the stack
)

func (s *snapshot) score(node string) float64 {
	sl := s.slot(node)
	if sl == nil {
		return unknownScore
	}
	h := sl.hot.Load()
	if h&unroutableBit != 0 {
		return math.Inf(1)
	}
	return math.Float64frombits(h)
}

// View is a local, continuously updated copy of the health of the nodes a
// Watch selected. Its lookups read an immutable snapshot through an atomic
// pointer: they take no lock, allocate nothing and are safe for concurrent
// use, so a router can call them on every request.
type View struct {
	cl   *Client
	sel  Selector
	opts watchOptions
	req  *llmdiagv1.StreamHealthRequest

	snap      atomic.Pointer[snapshot]
	epoch     time.Time    // Watch's start; last is measured from it
	last      atomic.Int64 // nanoseconds after epoch of the last message (0 before)
	seen      atomic.Bool  // a message has arrived
	connected atomic.Bool
	// gen is odd while the view is stale: no message for staleAfter. The
	// lookups read this one word instead of the clock (a clock read costs
	// more than the rest of Routable); a timer, re-armed by every message,
	// sets it.
	gen   atomic.Uint64
	timer Timer

	synced     chan struct{}
	syncOnce   sync.Once
	done       chan struct{}
	mu         sync.Mutex // guards the fields below
	lastErr    error
	err        error // why the watch stopped for good
	reconnects int
}

func (v *View) now() time.Time { return v.opts.clock.Now() }

// touch records the arrival of a message. Only the watch goroutine calls it.
func (v *View) touch() time.Time {
	t := v.now()
	v.last.Store(int64(t.Sub(v.epoch)))
	v.seen.Store(true)
	// Fresh again: a new even generation, so that a timer callback that
	// read the old one cannot mark the view stale (its CAS fails).
	v.gen.Store((v.gen.Load() | 1) + 1)
	if v.timer == nil {
		v.timer = v.opts.clock.AfterFunc(v.opts.staleAfter, v.expire)
	} else {
		v.timer.Reset(v.opts.staleAfter)
	}
	return t
}

// expire runs on the stale timer: it marks the view stale if no message
// has arrived since, and otherwise waits for the rest of the bound.
func (v *View) expire() {
	g := v.gen.Load()
	if g&1 == 1 {
		return
	}
	if rest := v.opts.staleAfter - v.age(); rest > 0 {
		v.opts.clock.AfterFunc(rest, v.expire)
		return
	}
	v.gen.CompareAndSwap(g, g|1)
}

// trusted reports whether lookups may use s: complete and fresh.
func (v *View) trusted(s *snapshot) bool {
	return s.synced && v.gen.Load()&1 == 0
}

// Routable reports whether node may take traffic: the service's verdict
// when the view is fresh and knows the node, otherwise the FailPolicy
// (true by default).
func (v *View) Routable(node string) bool {
	s := v.snap.Load()
	if v.trusted(s) {
		if sl := s.slot(node); sl != nil {
			return sl.hot.Load()&unroutableBit == 0
		}
	}
	return v.opts.policy == FailOpen
}

// Score returns node's load score (0 idle, 1 saturated, above 1
// overloaded), with false when the view is stale or does not know the node.
// Node returns the last known state regardless.
func (v *View) Score(node string) (float64, bool) {
	s := v.snap.Load()
	if v.trusted(s) {
		if sl := s.slot(node); sl != nil {
			return math.Float64frombits(sl.hot.Load() &^ unroutableBit), true
		}
	}
	return 0, false
}

// Pick chooses the candidate to send the next request to: the least loaded
// routable one.
//
// Ties. Candidates whose scores lie within the tie epsilon of the lowest
// (WithTieEpsilon; by default the larger of 0.05 and the selector's
// MinScoreChange) are equals, and Pick chooses uniformly at random among
// them. The service publishes a score only when it has moved by 0.05 (or
// the subscriber's MinScoreChange), and only once per refresh, so scores
// closer than that are indistinguishable, and a strict minimum would send a
// whole refresh interval of traffic — from every router — to whichever
// node happens to read lowest, making it the most loaded by the next
// refresh. Spreading over the equals keeps "least loaded" (a node clearly
// lower is always preferred; one clearly higher never gets traffic while a
// lower one is routable) while sharing load among nodes the data cannot
// tell apart. Power-of-two-choices was the alternative: it herds less
// under stale data but sends traffic to a markedly more loaded node whenever
// the two sampled candidates are both poor, which a router steering around
// overloaded nodes should not do.
//
// Unknown candidates (not in the view) are chosen, uniformly, only when no
// known candidate is routable, and only under FailOpen. When the view is
// stale or not yet complete, FailOpen chooses uniformly among all
// candidates and FailClosed finds nothing. Pick returns false when there is
// nothing to choose: no candidates, or every candidate known and not
// routable.
//
// Pick does not allocate; the randomness is math/rand/v2's per-thread
// generator, so concurrent callers do not contend.
func (v *View) Pick(candidates []string) (string, bool) {
	n := len(candidates)
	if n == 0 {
		return "", false
	}
	s := v.snap.Load()
	if !v.trusted(s) {
		if v.opts.policy == FailOpen {
			return candidates[rand.IntN(n)], true
		}
		return "", false
	}
	var buf [pickBuf]float64
	best, unknown := math.Inf(1), 0
	for i, c := range candidates {
		sc := s.score(c)
		if i < pickBuf {
			buf[i] = sc
		}
		if sc < 0 {
			unknown++
		} else if sc < best {
			best = sc
		}
	}
	if !math.IsInf(best, 1) {
		// Reservoir sampling of one among the equals, in one pass.
		limit := best + v.opts.epsilon
		var pick string
		seen := 0
		for i, c := range candidates {
			sc := 0.0
			if i < pickBuf {
				sc = buf[i]
			} else {
				sc = s.score(c)
			}
			if sc >= 0 && sc <= limit {
				seen++
				if seen == 1 || rand.IntN(seen) == 0 {
					pick = c
				}
			}
		}
		return pick, true
	}
	if unknown == 0 || v.opts.policy != FailOpen {
		return "", false
	}
	k := rand.IntN(unknown)
	for i, c := range candidates {
		sc := 0.0
		if i < pickBuf {
			sc = buf[i]
		} else {
			sc = s.score(c)
		}
		if sc < 0 {
			if k == 0 {
				return c, true
			}
			k--
		}
	}
	return "", false // not reached
}

// Node returns the last known state of node, fresh or not.
func (v *View) Node(node string) (NodeState, bool) {
	if st := v.snap.Load().state(node); st != nil {
		return *st, true
	}
	return NodeState{}, false
}

// Nodes returns the last known state of every node in the view, sorted by
// id. It allocates; it is meant for displays, not the request path.
func (v *View) Nodes() []NodeState {
	s := v.snap.Load()
	out := make([]NodeState, 0, s.len())
	for sl := range s.all {
		out = append(out, *sl.st.Load())
	}
	slices.SortFunc(out, func(a, b NodeState) int {
		switch {
		case a.Node < b.Node:
			return -1
		case a.Node > b.Node:
			return 1
		}
		return 0
	})
	return out
}

// Stale reports whether the lookups currently follow the FailPolicy — no
// complete state yet, or no message for longer than the stale bound — and
// the time since the last message (since Watch before the first).
func (v *View) Stale() (bool, time.Duration) {
	s := v.snap.Load()
	age := v.age()
	return !v.trusted(s), age
}

func (v *View) age() time.Duration {
	return v.now().Sub(v.epoch) - time.Duration(v.last.Load())
}

// Status describes the stream behind the view.
func (v *View) Status() WatchStatus {
	s := v.snap.Load()
	st := WatchStatus{
		Connected: v.connected.Load(),
		Synced:    s.synced,
		Age:       v.age(),
		Stale:     !v.trusted(s),
		Nodes:     s.len(),
	}
	if v.seen.Load() {
		st.LastEvent = v.epoch.Add(time.Duration(v.last.Load()))
	}
	v.mu.Lock()
	st.LastError, st.Reconnects = v.lastErr, v.reconnects
	v.mu.Unlock()
	return st
}

// Synced is closed once the view holds a complete state for the first time.
func (v *View) Synced() <-chan struct{} { return v.synced }

// Done is closed when the watch has stopped: its context ended, or the
// service refused the selector for good (see Err).
func (v *View) Done() <-chan struct{} { return v.done }

// Err is why the watch stopped, once Done is closed: nil when its context
// ended, otherwise the service's refusal (InvalidArgument,
// Unauthenticated, PermissionDenied, Unimplemented).
func (v *View) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// stateOf converts a streamed NodeHealth.
func stateOf(h *llmdiagv1.NodeHealth, received time.Time) *NodeState {
	st := &NodeState{
		Node:      h.GetNode(),
		Model:     h.GetModel(),
		Status:    h.GetStatus(),
		RootCause: h.GetRootCause(),
		Routable:  h.GetRoutable(),
		LoadScore: h.GetLoadScore(),
		Staleness: h.GetStaleness().AsDuration(),
		Labels:    maps.Clone(h.GetLabels()),
		Received:  received,
	}
	if h.GetObservedAt() != nil {
		st.ObservedAt = h.GetObservedAt().AsTime()
	}
	if math.IsNaN(st.LoadScore) || math.IsInf(st.LoadScore, 1) || st.LoadScore < 0 {
		// Never seen from the service; keep Pick's arithmetic sound.
		st.LoadScore = math.MaxFloat64
	}
	return st
}
