package client

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// fakeClock is testkit's settable clock, whose timers are this package's
// Timers; they fire when Add passes their deadline.
type fakeClock struct{ *testkit.Clock }

func newFakeClock() *fakeClock { return &fakeClock{testkit.NewClock(time.Unix(3600, 0))} }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer { return c.Clock.AfterFunc(d, f) }

func health(id string, routable bool, score float64) *llmdiagv1.NodeHealth {
	return &llmdiagv1.NodeHealth{Node: id, Model: "m", Status: llmdiagv1.Status_STATUS_OK, Routable: routable, LoadScore: score}
}

// newTestView is a View without a stream: the test plays the stream by
// calling the watcher's apply.
func newTestView(clk *fakeClock, sel Selector, opts ...WatchOption) (*View, *watcher) {
	o := watchOptions{base: DefaultBackoffBase, max: DefaultBackoffMax, epsilon: -1, clock: clk, staleAfter: 3 * DefaultHeartbeat}
	for _, opt := range opts {
		opt(&o)
	}
	if o.epsilon < 0 {
		o.epsilon = max(0.05, sel.MinScoreChange)
	}
	v := &View{sel: sel, opts: o, epoch: clk.Now(), synced: make(chan struct{}), done: make(chan struct{})}
	v.snap.Store(&snapshot{nodes: map[string]*slot{}})
	return v, &watcher{v: v}
}

func ev(kind llmdiagv1.EventKind, h *llmdiagv1.NodeHealth, token string) *llmdiagv1.StreamHealthResponse {
	return &llmdiagv1.StreamHealthResponse{Kind: kind, Health: h, ResumeToken: token}
}

const (
	initial   = llmdiagv1.EventKind_EVENT_KIND_INITIAL
	synced    = llmdiagv1.EventKind_EVENT_KIND_SYNCED
	change    = llmdiagv1.EventKind_EVENT_KIND_CHANGE
	heartbeat = llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT
)

// sync plays INITIAL for each state, then SYNCED.
func (w *watcher) sync(token string, hs ...*llmdiagv1.NodeHealth) {
	for _, h := range hs {
		w.apply(ev(initial, h, token))
	}
	w.apply(ev(synced, nil, token))
}

func TestViewLookups(t *testing.T) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{})
	// Before the first SYNCED the view is stale: fail open.
	if !v.Routable("a") {
		t.Fatal("unsynced view is not fail-open")
	}
	if _, ok := v.Score("a"); ok {
		t.Fatal("unsynced view has a score")
	}
	if stale, _ := v.Stale(); !stale {
		t.Fatal("unsynced view is not stale")
	}
	w.sync("t1", health("a", true, 0.3), health("b", false, 2.4), health("c", true, 0.9))
	if !v.Routable("a") || v.Routable("b") || !v.Routable("unknown") {
		t.Fatalf("routable a=%v b=%v unknown=%v", v.Routable("a"), v.Routable("b"), v.Routable("unknown"))
	}
	if s, ok := v.Score("b"); !ok || s != 2.4 {
		t.Fatalf("score b = %v %v", s, ok)
	}
	if s, ok := v.Score("unknown"); ok {
		t.Fatalf("score of an unknown node = %v", s)
	}
	for range 100 {
		if p, ok := v.Pick([]string{"b", "c", "a"}); !ok || p != "a" {
			t.Fatalf("Pick = %q %v, want a", p, ok)
		}
	}
	// An unknown candidate is chosen only when no known one is routable.
	for range 100 {
		if p, _ := v.Pick([]string{"x", "c"}); p != "c" {
			t.Fatalf("Pick(x, c) = %q, want c", p)
		}
	}
	if p, ok := v.Pick([]string{"b", "x"}); !ok || p != "x" {
		t.Fatalf("Pick(b, x) = %q %v, want x (fail-open for the unknown)", p, ok)
	}
	if p, ok := v.Pick([]string{"b"}); ok {
		t.Fatalf("Pick(b) = %q: every candidate known and unroutable", p)
	}
	if _, ok := v.Pick(nil); ok {
		t.Fatal("Pick(nil) found something")
	}

	// A change to a known node, and a node joining.
	w.apply(ev(change, health("b", true, 0.1), "t2"))
	w.apply(ev(change, health("d", true, 0.0), "t3"))
	if p, _ := v.Pick([]string{"a", "b", "c"}); p != "b" {
		t.Fatalf("after b recovered Pick = %q, want b", p)
	}
	if p, _ := v.Pick([]string{"a", "b", "d"}); p != "d" {
		t.Fatalf("Pick = %q, want the new node d", p)
	}
	if w.token != "t3" {
		t.Fatalf("resume token %q, want t3", w.token)
	}

	// Silence past the bound (3 heartbeats by default) makes it stale.
	clk.Add(44 * time.Second)
	if stale, age := v.Stale(); stale || age != 44*time.Second {
		t.Fatalf("Stale() = %v, %v at 44s", stale, age)
	}
	w.apply(ev(heartbeat, nil, "t3"))
	clk.Add(46 * time.Second)
	if stale, age := v.Stale(); !stale || age != 46*time.Second {
		t.Fatalf("Stale() = %v, %v at 46s", stale, age)
	}
	if !v.Routable("a") || v.Status().Stale != true {
		t.Fatal("stale view is not fail-open")
	}
	// Fail-open Pick is uniform over all candidates, the unroutable too.
	seen := map[string]int{}
	for range 1000 {
		p, ok := v.Pick([]string{"a", "c"})
		if !ok {
			t.Fatal("stale fail-open Pick found nothing")
		}
		seen[p]++
	}
	if seen["a"] < 400 || seen["c"] < 400 {
		t.Fatalf("stale Pick not uniform: %v", seen)
	}
	if _, ok := v.Score("a"); ok {
		t.Fatal("stale view returns a score")
	}
	if st, ok := v.Node("a"); !ok || st.LoadScore != 0.3 {
		t.Fatalf("Node(a) = %+v %v: last known state must stay readable", st, ok)
	}
}

func TestFailClosed(t *testing.T) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{Heartbeat: time.Second}, WithFailPolicy(FailClosed), WithStaleAfter(2*time.Second))
	if v.Routable("a") {
		t.Fatal("fail-closed: unsynced view routable")
	}
	if _, ok := v.Pick([]string{"a"}); ok {
		t.Fatal("fail-closed: unsynced Pick found something")
	}
	w.sync("t", health("a", true, 0.5))
	if !v.Routable("a") || v.Routable("x") {
		t.Fatal("fail-closed: known routable node refused, or unknown accepted")
	}
	if p, ok := v.Pick([]string{"x", "a"}); !ok || p != "a" {
		t.Fatalf("Pick = %q %v", p, ok)
	}
	if _, ok := v.Pick([]string{"x"}); ok {
		t.Fatal("fail-closed: unknown candidate picked")
	}
	clk.Add(3 * time.Second)
	if v.Routable("a") {
		t.Fatal("fail-closed: stale view routable")
	}
	if _, ok := v.Pick([]string{"a"}); ok {
		t.Fatal("fail-closed: stale Pick found something")
	}
}

// TestResyncIsAtomic: an expired token makes the service send the whole
// state again; until SYNCED readers keep the old view, then see the new
// one whole.
func TestResyncIsAtomic(t *testing.T) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{})
	w.sync("t1", health("a", true, 0.1), health("b", true, 0.2), health("gone", true, 0.3))
	w.apply(ev(initial, health("a", false, 3), "t9"))
	w.apply(ev(initial, health("b", true, 0.5), "t9"))
	if !v.Routable("a") || len(v.Nodes()) != 3 {
		t.Fatal("half a resync is visible")
	}
	if w.token != "t1" {
		t.Fatalf("token %q moved during a resync", w.token)
	}
	w.apply(ev(synced, nil, "t9"))
	if v.Routable("a") || len(v.Nodes()) != 2 {
		t.Fatalf("resync not in place: a routable %v, %d nodes", v.Routable("a"), len(v.Nodes()))
	}
	if _, ok := v.Node("gone"); ok {
		t.Fatal("a node absent from the resync is still in the view")
	}
	if w.token != "t9" {
		t.Fatalf("token %q, want t9", w.token)
	}
}

// TestResyncRace reads continuously while resyncs replace the view: a
// reader must see either the old fleet or the new one, never a mixture.
func TestResyncRace(t *testing.T) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{})
	old := []*llmdiagv1.NodeHealth{health("a", true, 0.1), health("b", true, 0.1)}
	neu := []*llmdiagv1.NodeHealth{health("c", true, 0.1), health("d", true, 0.1)}
	w.sync("t0", old...)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				s := v.snap.Load()
				_, a := s.nodes["a"]
				_, c := s.nodes["c"]
				if a == c || len(s.nodes) != 2 {
					bad.Add(1)
				}
			}
		})
	}
	for i := range 2000 {
		hs := old
		if i%2 == 0 {
			hs = neu
		}
		w.sync(fmt.Sprint(i), hs...)
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d reads saw a mixed view", bad.Load())
	}
}

func TestSelectorFiltersOnTheClient(t *testing.T) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{Labels: map[string]string{"pool": "a"}})
	in := health("in", true, 0.1)
	in.Labels = map[string]string{"pool": "a", "team": "x"}
	out := health("out", true, 0.1)
	out.Labels = map[string]string{"pool": "b"}
	w.sync("t", in, out)
	if _, ok := v.Node("out"); ok {
		t.Fatal("label selector not applied")
	}
	moved := health("in", true, 0.1)
	moved.Labels = map[string]string{"pool": "b"}
	w.apply(ev(change, moved, "t2"))
	if _, ok := v.Node("in"); ok {
		t.Fatal("a node whose labels stopped matching stays in the view")
	}
}

// TestPickSpreadsTies checks the tie-break statistically: among candidates
// within the epsilon of the lowest score Pick is uniform (a chi-square test
// at p = 0.0001, so a correct Pick fails it once in ten thousand runs),
// and a candidate outside the band never gets a request.
func TestPickSpreadsTies(t *testing.T) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{})
	// Within 0.05 of 0.30: a, b, c, d. e is 0.36: outside.
	w.sync("t", health("a", true, 0.30), health("b", true, 0.32), health("c", true, 0.35), health("d", true, 0.30), health("e", true, 0.36), health("f", false, 0))
	cands := []string{"e", "a", "f", "b", "c", "d"}
	const n = 80000
	counts := map[string]int{}
	for range n {
		p, ok := v.Pick(cands)
		if !ok {
			t.Fatal("Pick found nothing")
		}
		counts[p]++
	}
	if counts["e"] != 0 || counts["f"] != 0 {
		t.Fatalf("outside the band or unroutable picked: %v", counts)
	}
	exp := float64(n) / 4
	var chi2 float64
	for _, id := range []string{"a", "b", "c", "d"} {
		d := float64(counts[id]) - exp
		chi2 += d * d / exp
	}
	const crit = 21.11 // chi-square, 3 degrees of freedom, p = 0.0001
	if chi2 > crit {
		t.Fatalf("not uniform among equals: chi² = %.1f > %.1f: %v", chi2, crit, counts)
	}
	t.Logf("counts %v, chi² = %.2f", counts, chi2)

	// More candidates than Pick keeps on the stack: same answer.
	var many []string
	var hs []*llmdiagv1.NodeHealth
	for i := range 100 {
		id := fmt.Sprintf("n%03d", i)
		many = append(many, id)
		hs = append(hs, health(id, true, 0.5+float64(i)/100))
	}
	hs[90].LoadScore, hs[95].LoadScore = 0.1, 0.12
	w.sync("t2", hs...)
	got := map[string]int{}
	for range 4000 {
		p, _ := v.Pick(many)
		got[p]++
	}
	if len(got) != 2 || got["n090"] < 1700 || got["n095"] < 1700 {
		t.Fatalf("beyond the stack buffer: %v", got)
	}
}

func TestBackoffIsBoundedFullJitter(t *testing.T) {
	v := &View{opts: watchOptions{base: 100 * time.Millisecond, max: 2 * time.Second}}
	for attempt, bound := range []time.Duration{100, 200, 400, 800, 1600, 2000, 2000} {
		bound *= time.Millisecond
		if attempt == 6 {
			attempt = 1000 // no overflow far out
		}
		var lo, hi time.Duration = bound, 0
		for range 2000 {
			d := v.backoff(attempt)
			if d < 0 || d >= bound {
				t.Fatalf("attempt %d: %v outside [0, %v)", attempt, d, bound)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		// Full jitter: the draws cover the range, not just its top.
		if lo > bound/10 || hi < bound*9/10 {
			t.Fatalf("attempt %d: draws in [%v, %v] of [0, %v)", attempt, lo, hi, bound)
		}
	}
}

// TestLookupsDoNotAllocate is the hot path's promise, checked.
func TestLookupsDoNotAllocate(t *testing.T) {
	v, cands := benchView(64)
	long := append(append([]string(nil), cands...), cands[:36]...)
	for name, f := range map[string]func(){
		"Routable": func() { v.Routable(cands[17]) },
		"Score":    func() { v.Score(cands[17]) },
		"Pick8":    func() { v.Pick(cands[:8]) },
		"Pick64":   func() { v.Pick(cands) },
		"Pick100":  func() { v.Pick(long) },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s allocates %v times per call", name, a)
		}
	}
	// Stale and unknown paths too.
	clk := newFakeClock()
	sv, _ := newTestView(clk, Selector{})
	if a := testing.AllocsPerRun(1000, func() { sv.Pick(cands); sv.Routable("x") }); a != 0 {
		t.Errorf("fail-open paths allocate %v times per call", a)
	}
}

// benchView is a synced view of n nodes with scores spread over [0, 1],
// every eighth unroutable, and the candidate list.
func benchView(n int) (*View, []string) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{}, WithWatchClock(systemClock{}))
	var hs []*llmdiagv1.NodeHealth
	var ids []string
	for i := range n {
		id := fmt.Sprintf("glm-4.6-%d", i)
		ids = append(ids, id)
		hs = append(hs, health(id, i%8 != 3, math.Mod(float64(i)*0.37, 1)))
	}
	w.sync("t", hs...)
	return v, ids
}

func BenchmarkRoutable(b *testing.B) {
	v, ids := benchView(64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		v.Routable(ids[i&63])
		i++
	}
}

func BenchmarkScore(b *testing.B) {
	v, ids := benchView(64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		v.Score(ids[i&63])
		i++
	}
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) {
			v, ids := benchView(64)
			cands := ids[:n]
			b.ReportAllocs()
			for b.Loop() {
				v.Pick(cands)
			}
		})
	}
	b.Run("candidates=64/parallel", func(b *testing.B) {
		v, ids := benchView(64)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				v.Pick(ids)
			}
		})
	})
}

// A node that left the fleet (removed) leaves the view, whether the removal
// comes as a change or in the middle of a resync; a client that did not
// know the field would still stop routing to it (routable false).
func TestRemovedNodeLeavesTheView(t *testing.T) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{})
	w.sync("t1", health("a", true, 0.1), health("b", true, 0.2), health("c", true, 0.3))
	gone := func(id string) *llmdiagv1.NodeHealth {
		return &llmdiagv1.NodeHealth{Node: id, Model: "m", Status: llmdiagv1.Status_STATUS_UNKNOWN, RootCause: llmdiagv1.Cause_CAUSE_NO_DATA, Removed: true}
	}
	w.apply(ev(change, gone("a"), "t2"))
	if _, ok := v.Node("a"); ok || v.Status().Nodes != 2 {
		t.Fatalf("removed node a still in the view (%d nodes)", v.Status().Nodes)
	}
	// Unknown again: fail-open routes to it as to any unknown candidate.
	if !v.Routable("a") {
		t.Error("a removed node is not treated as unknown")
	}
	if p, _ := v.Pick([]string{"a", "b"}); p != "b" {
		t.Errorf("Pick(a, b) = %q, want the known b", p)
	}
	// A removal of a node the view does not hold changes nothing.
	w.apply(ev(change, gone("zz"), "t3"))
	if v.Status().Nodes != 2 {
		t.Errorf("%d nodes after the removal of an unknown node, want 2", v.Status().Nodes)
	}
	// During a resync.
	w.apply(ev(initial, health("b", true, 0.2), "t9"))
	w.apply(ev(initial, health("c", true, 0.3), "t9"))
	w.apply(ev(change, gone("b"), "t9"))
	w.apply(ev(synced, nil, "t9"))
	if _, ok := v.Node("b"); ok || v.Status().Nodes != 1 {
		t.Fatalf("node b removed during the resync is in the view (%d nodes)", v.Status().Nodes)
	}
}

// TestViewJoinsOneByOne: a fleet that arrives node by node after SYNCED
// (a router that subscribed before the service's first refresh), with
// nodes leaving among the joins, is held as it arrived: every lookup and
// Nodes agree with a plain map of the changes, whether a node sits in the
// snapshot's joined nodes or has been merged.
func TestViewJoinsOneByOne(t *testing.T) {
	clk := newFakeClock()
	v, w := newTestView(clk, Selector{})
	w.sync("t0")
	want := map[string]float64{}
	check := func(step int) {
		t.Helper()
		if got := v.Status().Nodes; got != len(want) {
			t.Fatalf("step %d: %d nodes, want %d", step, got, len(want))
		}
		nodes := v.Nodes()
		if len(nodes) != len(want) {
			t.Fatalf("step %d: Nodes gave %d, want %d", step, len(nodes), len(want))
		}
		for _, st := range nodes {
			if score, ok := want[st.Node]; !ok || st.LoadScore != score {
				t.Fatalf("step %d: Nodes has %s at %v, want %v (held %v)", step, st.Node, st.LoadScore, score, ok)
			}
		}
	}
	const n = 3000
	for i := range n {
		id := fmt.Sprintf("n-%04d", i)
		score := float64(i%97) / 100
		w.apply(ev(change, health(id, true, score), fmt.Sprintf("t%d", i+1)))
		want[id] = score
		if i%7 == 3 { // a node that joined earlier leaves
			gone := fmt.Sprintf("n-%04d", i/2)
			if _, held := want[gone]; held {
				h := health(gone, false, 0)
				h.Removed = true
				w.apply(ev(change, h, fmt.Sprintf("t%d.r", i+1)))
				delete(want, gone)
			}
		}
		if i%10 == 0 {
			// A change of a node held, joined or merged.
			again := fmt.Sprintf("n-%04d", i*7%(i+1))
			if _, held := want[again]; held {
				w.apply(ev(change, health(again, true, 0.5), fmt.Sprintf("t%d.c", i+1)))
				want[again] = 0.5
			}
		}
		for _, id := range []string{id, fmt.Sprintf("n-%04d", i/2), fmt.Sprintf("n-%04d", i/3)} {
			score, held := want[id]
			got, ok := v.Score(id)
			if ok != held || held && got != score {
				t.Fatalf("step %d: Score(%s) = %v, %v; want %v, %v", i, id, got, ok, score, held)
			}
		}
		if i%500 == 0 {
			check(i)
		}
	}
	check(n)
	if s := v.snap.Load(); len(s.joined)*len(s.joined) > max(len(s.nodes), maxJoinedFloor*maxJoinedFloor) {
		t.Errorf("%d joined nodes held apart from %d", len(s.joined), len(s.nodes))
	}
}

// BenchmarkViewJoins is a fleet of 10,000 nodes arriving one by one after
// SYNCED: each join publishes a new snapshot.
func BenchmarkViewJoins(b *testing.B) {
	hs := make([]*llmdiagv1.StreamHealthResponse, 10000)
	for i := range hs {
		hs[i] = ev(change, health(fmt.Sprintf("n-%05d", i), true, 0.1), "t")
	}
	b.ReportAllocs()
	for b.Loop() {
		v, w := newTestView(newFakeClock(), Selector{})
		w.sync("t0")
		for _, h := range hs {
			w.apply(h)
		}
		if v.Status().Nodes != len(hs) {
			b.Fatal("nodes missing")
		}
	}
}
