package chaos

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// Call is one legitimate call as its client saw it.
type Call struct {
	Client  int
	Replica string // the replica called, by name
	Proc    string // what was called: ListNodes, DiagnoseNode, routable
	Start   time.Time
	Latency time.Duration
	// Err is empty when the call succeeded, else what failed (a code).
	Err string
}

// Window is a documented failure window: a failed call that started in
// [From, To] on Replica ("" for any) is counted as in the window, not as
// a broken promise.
type Window struct {
	Name     string
	Replica  string
	From, To time.Time
}

func (w Window) covers(c Call) bool {
	return (w.Replica == "" || w.Replica == c.Replica) && !c.Start.Before(w.From) && !c.Start.After(w.To)
}

// CallStats counts legitimate calls: made, failed within a documented
// window, and failed outside every window (each of those breaks a promise).
type CallStats struct {
	Made           int
	FailedInWindow int
	// Outside are the failures no window covers, first first.
	Outside []Call
}

// ClassifyCalls counts calls against the documented windows.
func ClassifyCalls(calls []Call, windows []Window) CallStats {
	var s CallStats
	for _, c := range calls {
		s.Made++
		if c.Err == "" {
			continue
		}
		if slices.ContainsFunc(windows, func(w Window) bool { return w.covers(c) }) {
			s.FailedInWindow++
			continue
		}
		s.Outside = append(s.Outside, c)
	}
	sort.SliceStable(s.Outside, func(i, j int) bool { return s.Outside[i].Start.Before(s.Outside[j].Start) })
	return s
}

// Quantile is the q-quantile (0 < q ≤ 1) of the successful calls'
// latencies whose start keep accepts, by the nearest-rank method; 0 and
// false when there is none.
func Quantile(calls []Call, q float64, keep func(Call) bool) (time.Duration, bool) {
	var ls []time.Duration
	for _, c := range calls {
		if c.Err == "" && (keep == nil || keep(c)) {
			ls = append(ls, c.Latency)
		}
	}
	if len(ls) == 0 {
		return 0, false
	}
	slices.Sort(ls)
	rank := int(q*float64(len(ls)) + 0.999999999)
	rank = min(max(rank, 1), len(ls))
	return ls[rank-1], true
}

// Seen is one node's verdict time as one read by one client from one
// replica returned it.
type Seen struct {
	Client  int
	Replica string
	Node    string
	// At is when the read returned.
	At time.Time
	// AsOf is the verdict's data time (observed_at, last_seen).
	AsOf time.Time
}

// Regression is a read whose verdict was older than one the same client
// had already seen for the node.
type Regression struct {
	Seen
	// Before is the newer AsOf seen earlier, from BeforeReplica.
	Before        time.Time
	BeforeReplica string
}

func (r Regression) String() string {
	return fmt.Sprintf("client %d node %s: %s answered as of %s after %s answered %s (%v back)",
		r.Client, r.Node, r.Replica, r.AsOf.Format(time.RFC3339Nano), r.BeforeReplica,
		r.Before.Format(time.RFC3339Nano), r.Before.Sub(r.AsOf))
}

// TimeOrder is what ClassifySeen found.
type TimeOrder struct {
	Reads int
	// SameReplica: one replica answered an older verdict than it had
	// answered before to the same client. Never allowed.
	SameReplica []Regression
	// Lagging: another replica answered an older verdict, by at most the
	// documented lag between replicas. Counted, allowed.
	Lagging int
	// MaxLag is the largest step back among Lagging.
	MaxLag time.Duration
	// BeyondLag: another replica answered a verdict older than the newest
	// the client had seen by more than the documented lag. Never allowed.
	BeyondLag []Regression
}

// ClassifySeen checks that no client saw a node's verdict go back in time:
// never on one replica, and across replicas by at most lag (each replica
// answers from its own copy of the shared store, at most its sync period
// behind). seen must be in the order each client saw them (per client).
func ClassifySeen(seen []Seen, lag time.Duration) TimeOrder {
	c := NewTimeOrderCheck(lag)
	for _, s := range seen {
		c.Add(s)
	}
	return c.Result()
}

// TimeOrderCheck is ClassifySeen one read at a time, for a run too long to
// keep every read. Safe for concurrent use; each client's reads must be
// added in the order that client made them.
type TimeOrderCheck struct {
	lag        time.Duration
	mu         sync.Mutex
	perReplica map[seenKey]time.Time
	perClient  map[seenKey]newestSeen // replica ""
	out        TimeOrder
}

type seenKey struct {
	client        int
	node, replica string
}

type newestSeen struct {
	at      time.Time
	replica string
}

// NewTimeOrderCheck returns a check allowing lag between replicas.
func NewTimeOrderCheck(lag time.Duration) *TimeOrderCheck {
	return &TimeOrderCheck{lag: lag, perReplica: map[seenKey]time.Time{}, perClient: map[seenKey]newestSeen{}}
}

// Add checks one read against the client's earlier ones.
func (c *TimeOrderCheck) Add(s Seen) {
	if s.AsOf.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.Reads++
	kr := seenKey{s.Client, s.Node, s.Replica}
	prev, ok := c.perReplica[kr]
	if ok && s.AsOf.Before(prev) {
		c.out.SameReplica = append(c.out.SameReplica, Regression{Seen: s, Before: prev, BeforeReplica: s.Replica})
	}
	if !ok || s.AsOf.After(prev) {
		c.perReplica[kr] = s.AsOf
	}
	kc := seenKey{s.Client, s.Node, ""}
	n, ok := c.perClient[kc]
	switch {
	case !ok || s.AsOf.After(n.at):
		c.perClient[kc] = newestSeen{s.AsOf, s.Replica}
	case s.AsOf.Before(n.at) && n.replica != s.Replica:
		back := n.at.Sub(s.AsOf)
		if back > c.lag {
			c.out.BeyondLag = append(c.out.BeyondLag, Regression{Seen: s, Before: n.at, BeforeReplica: n.replica})
		} else {
			c.out.Lagging++
			c.out.MaxLag = max(c.out.MaxLag, back)
		}
	}
}

// Result is what the reads added so far show.
func (c *TimeOrderCheck) Result() TimeOrder {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.out
	out.SameReplica = slices.Clone(out.SameReplica)
	out.BeyondLag = slices.Clone(out.BeyondLag)
	return out
}

// Staleness is one node's data age as an answer gave it.
type Staleness struct {
	Node string
	At   time.Time
	Age  time.Duration
}

// MaxStaleness is the largest age among samples that excuse does not
// excuse (a node hung or taken down on purpose), with the node it was.
func MaxStaleness(samples []Staleness, excuse func(node string, at time.Time) bool) (Staleness, int) {
	var worst Staleness
	n := 0
	for _, s := range samples {
		if excuse != nil && excuse(s.Node, s.At) {
			continue
		}
		n++
		if s.Age > worst.Age {
			worst = s
		}
	}
	return worst, n
}

// Flip is a change injected into the fleet: Node was down from Down to Up.
type Flip struct {
	Node     string
	Down, Up time.Time
}

// StreamEvent is one health state a stream delivered.
type StreamEvent struct {
	At   time.Time
	Node string
	Down bool // the state says the node is down
}

// Missed is an injected change a stream did not deliver.
type Missed struct {
	Stream int
	Flip   Flip
	What   string // "down" or "up again"
}

// MissedChanges checks every stream against the injected flips the
// service published: for each flip that ended at least settle before end
// and that published accepts (a unary read saw the node down: a flip
// shorter than a refresh may pass unseen by any reader, and then there is
// no change to deliver), each stream must have delivered the node down at
// some point in [flip.Down, flip.Up+settle], and the node up again after
// that, in [down seen, end]. settle bounds how long the service may take
// to see a change and send it (refresh interval, sync and failover
// included). A nil published takes every flip as published.
func MissedChanges(streams map[int][]StreamEvent, flips []Flip, published func(Flip) bool, settle time.Duration, end time.Time) []Missed {
	var out []Missed
	ids := make([]int, 0, len(streams))
	for id := range streams {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		evs := streams[id]
		for _, f := range flips {
			if f.Up.Add(settle).After(end) || (published != nil && !published(f)) {
				continue
			}
			var downAt time.Time
			for _, e := range evs {
				if e.Node == f.Node && e.Down && !e.At.Before(f.Down) && !e.At.After(f.Up.Add(settle)) {
					downAt = e.At
					break
				}
			}
			if downAt.IsZero() {
				out = append(out, Missed{Stream: id, Flip: f, What: "down"})
				continue
			}
			up := false
			for _, e := range evs {
				if e.Node == f.Node && !e.Down && e.At.After(downAt) && !e.At.After(end) {
					up = true
					break
				}
			}
			if !up {
				out = append(out, Missed{Stream: id, Flip: f, What: "up again"})
			}
		}
	}
	return out
}

// Published reports whether any of reads (unary reads of the flipped
// nodes) saw f's node down within [f.Down, f.Up+settle].
func Published(reads []StreamEvent, f Flip, settle time.Duration) bool {
	return slices.ContainsFunc(reads, func(e StreamEvent) bool {
		return e.Node == f.Node && e.Down && !e.At.Before(f.Down) && !e.At.After(f.Up.Add(settle))
	})
}

// Usage is one replica's resource figures at one moment.
type Usage struct {
	Goroutines float64
	// HeapGoalBytes is the Go heap size at which the next collection
	// starts (go_memstats_next_gc_bytes): the heap live after the last
	// collection times (1 + GOGC/100), so it follows what the process keeps
	// and not the garbage made since.
	HeapGoalBytes float64
	RSSBytes      float64
}

// Growth is a figure that ended above its bound.
type Growth struct {
	Replica, Figure string
	Start, End      float64
}

// Grown returns the figures that ended more than frac above their start
// (frac 0.10: 10%), per key of end (a replica, or a role): goroutines and
// the heap goal, which grow with what the process keeps. A key of end
// with no start is returned too: there is nothing to hold it to. Resident
// memory is reported, not held to the bound: the Go runtime returns freed
// pages to the system over minutes, so a burst of work that left nothing
// behind still shows in it long after.
func Grown(start, end map[string]Usage, frac float64) []Growth {
	var out []Growth
	names := make([]string, 0, len(end))
	for n := range end {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s, ok := start[n]
		e := end[n]
		if !ok {
			out = append(out, Growth{Replica: n, Figure: "no reading at the start", End: e.Goroutines})
			continue
		}
		for _, f := range []struct {
			name       string
			start, end float64
		}{
			{"goroutines", s.Goroutines, e.Goroutines},
			{"heap goal", s.HeapGoalBytes, e.HeapGoalBytes},
		} {
			if f.end > f.start*(1+frac) {
				out = append(out, Growth{Replica: n, Figure: f.name, Start: f.start, End: f.end})
			}
		}
	}
	return out
}
