package refresh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/expofarm"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// seqRand is a jitter source that walks through [0, n) in steps: the
// schedule's bounds are checked at both ends.
func seqRand() func(time.Duration) time.Duration {
	var i int64
	return func(n time.Duration) time.Duration {
		i++
		return time.Duration(i*37%97) * n / 97
	}
}

// TestFastSchedule: every node is read once per interval on its own slot,
// each read at most the jitter after the slot (so two reads of a node are
// an interval ± the jitter apart), and after a stall each node is read
// once, not once per missed slot.
func TestFastSchedule(t *testing.T) {
	const interval, jitter = 250 * time.Millisecond, 25 * time.Millisecond
	nodes := map[string]*fastNode{}
	for i := range 50 {
		id := fmt.Sprintf("n%02d", i)
		nodes[id] = &fastNode{id: id}
	}
	var s fastSchedule
	start := time.Unix(1000, 0)
	s.start(start, interval, jitter, seqRand(), nodes)
	// The slots are evenly spaced: no cluster of them.
	var slots []time.Time
	for _, n := range nodes {
		slots = append(slots, n.slot)
	}
	slices.SortFunc(slots, time.Time.Compare)
	for i := 1; i < len(slots); i++ {
		if gap := slots[i].Sub(slots[i-1]); gap != interval/50 {
			t.Fatalf("slots %d and %d are %v apart, want %v (evenly spaced)", i-1, i, gap, interval/50)
		}
	}
	reads := map[string][]time.Time{}
	now := start
	read := func(n *fastNode) { reads[n.id] = append(reads[n.id], now) }
	for now.Before(start.Add(40 * interval)) {
		wake := s.due(now, read)
		if !wake.After(now) {
			t.Fatalf("due at %v returns wake %v, not after it", now, wake)
		}
		now = wake // the clock jumps to the next read: no sleep
	}
	phases := map[time.Duration]bool{}
	for id, at := range reads {
		if n := len(at); n < 39 || n > 41 {
			t.Errorf("%s read %d times in 40 intervals", id, n)
		}
		if first := at[0].Sub(start); first < 0 || first >= interval+jitter {
			t.Errorf("%s first read %v after start, want within an interval and the jitter", id, first)
		}
		phases[at[0].Sub(start)/time.Millisecond] = true
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < interval-jitter || gap > interval+jitter {
				t.Fatalf("%s reads %v apart, want %v ± %v", id, gap, interval, jitter)
			}
		}
	}
	if len(phases) < 10 {
		t.Errorf("nodes' first reads at %d distinct milliseconds: not spread over the interval", len(phases))
	}
	// A stall of ten intervals: each node is read once, then on schedule.
	now = now.Add(10 * interval)
	clear(reads)
	s.due(now, read)
	for id, at := range reads {
		if len(at) != 1 {
			t.Errorf("after a stall %s was read %d times at once, want 1", id, len(at))
		}
	}
	if len(reads) != len(nodes) {
		t.Errorf("after a stall %d of %d nodes read", len(reads), len(nodes))
	}
	if wake := s.due(now, read); wake.Sub(now) > interval+jitter {
		t.Errorf("after a stall the next read is %v away", wake.Sub(now))
	}
}

// TestFastDispatchSkips: a node whose read is in flight is skipped, as is
// a tick finding every slot taken; neither waits.
func TestFastDispatchSkips(t *testing.T) {
	f := newFastLane(FastConfig{Interval: time.Second, Concurrency: 1}, diagnose.DefaultThresholds(), DefaultMinScoreChange,
		memory.New(memory.Options{}, "t"), discard(), time.Now, nil)
	block := make(chan struct{})
	a, b := &fastNode{id: "a"}, &fastNode{id: "b"}
	a.busy.Store(true)
	var wg sync.WaitGroup
	ctx := context.Background()
	if f.dispatch(ctx, &wg, a) {
		t.Fatal("a busy node was dispatched")
	}
	a.busy.Store(false)
	f.slots <- struct{}{} // the one slot taken
	if f.dispatch(ctx, &wg, b) {
		t.Fatal("a node was dispatched with every slot taken")
	}
	if b.busy.Load() {
		t.Fatal("a node skipped for want of a slot stays busy")
	}
	close(block)
	if got := counter(f.met.skipped.WithLabelValues("busy")); got != 1 {
		t.Errorf("busy skips %v, want 1", got)
	}
	if got := counter(f.met.skipped.WithLabelValues("concurrency")); got != 1 {
		t.Errorf("concurrency skips %v, want 1", got)
	}
	wg.Wait()
}

// oneNode is a source of one node whose gauges the test sets.
type oneNode struct {
	mu    sync.Mutex
	now   *time.Time
	queue float64
}

func (o *oneNode) Window(context.Context, string, string, time.Duration) (*llmdiagv1.NodeMetrics, error) {
	return nil, source.ErrUnknownNode
}

func (o *oneNode) Refresh(context.Context, string) ([]source.Observation, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := &llmdiagv1.NodeMetrics{
		Node: "n", Model: "m", Engine: llmdiagv1.Engine_ENGINE_VLLM, Window: "5m", Up: true, ObservedAt: timestamppb.New(*o.now),
		Queue: sample.F(o.queue), Running: sample.F(10), KvPressure: sample.F(0.3),
		PromptTokensPerSecond: sample.F(1000), GenerationTokensPerSecond: sample.F(500), DecodeTokensPerSecondPerRequest: sample.F(50),
		PreemptionsPerSecond: sample.F(0),
	}
	m.QueueRunningRatio = sample.F(o.queue / 10)
	return []source.Observation{{Node: fleet.Node{ID: "n", URL: "http://x/metrics", Engine: "vllm"}, Metrics: m}}, nil
}

type nopRec struct{}

func (nopRec) ObserveRefresh(time.Duration, error)      {}
func (nopRec) SetNodeStatuses(map[llmdiagv1.Status]int) {}
func (nopRec) ObserveNodeSet(NodeSet)                   {}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fastFixture is a Loop with the fast lane on for one node "n", on an
// injected clock, a refresh of it done.
type fastFixture struct {
	t    *testing.T
	now  time.Time
	src  *oneNode
	st   *memory.Store
	loop *Loop
	n    *fastNode
	tok  string
}

func newFastFixture(t *testing.T) *fastFixture { return newFastFixtureScore(t, 0) }

func newFastFixtureScore(t *testing.T, minScore float64) *fastFixture {
	fx := &fastFixture{t: t, now: time.Unix(10_000, 0)}
	fx.src = &oneNode{now: &fx.now}
	fx.st = memory.New(memory.Options{}, "t")
	fx.loop = New(fx.src, fx.st, nopRec{}, discard(), func() time.Time { return fx.now }, Config{
		Thresholds:     diagnose.DefaultThresholds(),
		MinScoreChange: minScore,
		Fleet:          map[string]fleet.Node{"n": {ID: "n", URL: "http://x/metrics", Engine: "vllm"}},
		Fast:           FastConfig{Interval: 250 * time.Millisecond},
	})
	fx.n = fx.loop.fast.node("n")
	if fx.n == nil {
		t.Fatal("the fleet node with a url is not in the fast lane")
	}
	fx.refresh()
	fx.tok, _ = fx.st.LastToken(context.Background())
	return fx
}

// refresh runs a refresh at the clock's time.
func (fx *fastFixture) refresh() {
	fx.t.Helper()
	if err := fx.loop.Once(context.Background()); err != nil {
		fx.t.Fatal(err)
	}
}

// fast applies a fast read of queue completed at the clock's time.
func (fx *fastFixture) fast(queue float64) {
	q, r, kv := queue, 10.0, 0.3
	fx.loop.fast.apply(context.Background(), fx.n, &engine.Routing{Queue: &q, Running: &r, KVUsage: &kv}, true, nil, fx.now)
}

// routable is the stored node's routability and load score.
func (fx *fastFixture) routable() (bool, float64) {
	fx.t.Helper()
	rec, err := fx.st.Get(context.Background(), "n")
	if err != nil {
		fx.t.Fatal(err)
	}
	return rec.Node.GetRoutable(), rec.Node.GetLoadScore()
}

// events are the routability of the events published since the last call.
func (fx *fastFixture) events() []bool {
	fx.t.Helper()
	evs, err := fx.st.Events(context.Background(), fx.tok, 100, 0)
	if err != nil {
		fx.t.Fatal(err)
	}
	var out []bool
	for _, ev := range evs {
		out = append(out, ev.Health.GetRoutable())
		fx.tok = ev.Token
	}
	return out
}

// TestFastHysteresis: over fast reads 250 ms apart, a single saturated read
// flips nothing, the second in a row makes the node unroutable in the store
// and the feed at that read, and a refresh that follows (whose own history
// has only refreshes) does not undo it; two clear reads make it routable
// again.
func TestFastHysteresis(t *testing.T) {
	fx := newFastFixture(t)
	sat := diagnose.DefaultThresholds().QueueSaturated + 5
	tick := func() { fx.now = fx.now.Add(250 * time.Millisecond) }

	tick()
	fx.fast(sat) // a blip
	tick()
	fx.fast(0)
	if ok, _ := fx.routable(); !ok {
		t.Fatal("a single saturated read made the node unroutable")
	}
	// The load score's moves are published (the publisher's rule), but
	// no event says unroutable.
	for _, ok := range fx.events() {
		if !ok {
			t.Fatal("a blip published the node unroutable")
		}
	}
	tick()
	fx.fast(sat)
	if ok, _ := fx.routable(); !ok {
		t.Fatal("the first saturated read made the node unroutable")
	}
	tick()
	fx.fast(sat)
	if ok, score := fx.routable(); ok || score <= 1 {
		t.Fatalf("after two saturated reads: routable %v, score %v; want unroutable above 1", ok, score)
	}
	if evs := fx.events(); len(evs) == 0 || evs[len(evs)-1] {
		t.Fatalf("events %v, want the last unroutable", evs)
	}
	// A refresh: its scrape read the queue saturated too, and its own
	// history (one earlier refresh, clear) would hold it routable.
	fx.src.queue = sat
	tick()
	fx.refresh()
	if ok, _ := fx.routable(); ok {
		t.Fatal("a refresh undid the fast reads' saturation")
	}
	// Its verdict (status, cause) is news, but not a routable node.
	for _, ok := range fx.events() {
		if ok {
			t.Fatal("the refresh published the node routable")
		}
	}
	tick()
	fx.fast(0)
	if ok, _ := fx.routable(); ok {
		t.Fatal("one clear read made the node routable")
	}
	tick()
	fx.fast(0)
	if ok, _ := fx.routable(); !ok {
		t.Fatal("two clear reads left the node unroutable")
	}
	if evs := fx.events(); len(evs) == 0 || !evs[len(evs)-1] {
		t.Fatalf("events %v, want the last routable", evs)
	}
	// The store's history holds the two refreshes only: its other readers
	// (spikes, the STALLED rule) count points as refreshes.
	hist, err := fx.st.History(context.Background(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 {
		t.Fatalf("the store's history has %d points after 2 refreshes and 7 fast reads, want 2", len(hist))
	}
}

// TestFastLeavesTheBaseAlone: a fast read works on a shallow copy of the
// refresh's record (shallow); whatever it reads (gauges, its own error, the
// reader's errors) and stores, the record it copied is as it was, and the
// stored record shares nothing with it that a later read could change.
func TestFastLeavesTheBaseAlone(t *testing.T) {
	fx := newFastFixture(t)
	base := fx.n.base
	// Room after the errors: an append that does not copy would write there.
	base.metrics.Errors = append(make([]string, 0, 8), "refresh: a warning")
	before := []proto.Message{proto.Clone(base.metrics), proto.Clone(base.node), proto.Clone(base.diag)}
	sat := diagnose.DefaultThresholds().QueueSaturated + 5
	// Each read's errors as it left them, and as they are later.
	var kept, copies [][]string
	for i := range 4 {
		fx.now = fx.now.Add(250 * time.Millisecond)
		var err error
		if i == 2 {
			err = errors.New("connection refused")
		}
		fx.loop.fast.apply(context.Background(), fx.n, &engine.Routing{Queue: &sat, Errors: []string{fmt.Sprintf("read %d: a family left out", i)}}, err == nil, err, fx.now)
		kept, copies = append(kept, fx.n.lastFast.Errors), append(copies, slices.Clone(fx.n.lastFast.Errors))
	}
	for i := range kept {
		if !slices.Equal(kept[i], copies[i]) {
			t.Errorf("read %d's errors became %q after later reads, were %q", i, kept[i], copies[i])
		}
	}
	for i, m := range []proto.Message{base.metrics, base.node, base.diag} {
		if !proto.Equal(m, before[i]) {
			t.Errorf("fast reads changed the refresh's %T:\n%v\nwant\n%v", m, m, before[i])
		}
	}
	rec, err := fx.st.Get(context.Background(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Metrics.GetQueue() != sat || rec.Node.GetRoutable() {
		t.Fatalf("stored queue %v, routable %v; want the fast reads' %v, unroutable", rec.Metrics.GetQueue(), rec.Node.GetRoutable(), sat)
	}
	if rec.Metrics.GetE2E() != nil && rec.Metrics.GetE2E() == base.metrics.GetE2E() {
		t.Error("the stored metrics share the refresh's E2E message")
	}
}

// TestFastRefreshReadsTheFastPoints: a refresh's routability is read over
// the fast reads too, not over the refreshes alone. With score moves not
// published (so the saturated fast read is not stored), one saturated fast
// read and a refresh reading saturation make two in a row: unroutable.
func TestFastRefreshReadsTheFastPoints(t *testing.T) {
	fx := newFastFixtureScore(t, 5)
	sat := diagnose.DefaultThresholds().QueueSaturated + 5
	fx.now = fx.now.Add(250 * time.Millisecond)
	fx.fast(sat)
	if ok, _ := fx.routable(); !ok {
		t.Fatal("one saturated read made the node unroutable")
	}
	fx.now = fx.now.Add(250 * time.Millisecond)
	fx.src.queue = sat
	fx.refresh()
	if ok, _ := fx.routable(); ok {
		t.Fatal("a saturated fast read and a saturated refresh left the node routable")
	}
}

// TestFastNeverOverwritesNewer: a fast read completed before the last
// refresh's read (or before the last fast read) changes nothing; a refresh
// whose scrape is older than the last fast read takes that read's gauges
// and time, so the store never goes back in time.
func TestFastNeverOverwritesNewer(t *testing.T) {
	fx := newFastFixture(t)
	sat := diagnose.DefaultThresholds().QueueSaturated + 5
	refreshAt := fx.now
	// Two saturated reads completed before the refresh's: dropped.
	for range 2 {
		fx.loop.fast.apply(context.Background(), fx.n, &engine.Routing{Queue: &sat}, true, nil, refreshAt.Add(-time.Millisecond))
	}
	if ok, _ := fx.routable(); !ok {
		t.Fatal("fast reads older than the refresh changed the node")
	}
	if got := counter(fx.loop.fast.met.reads.WithLabelValues("stale")); got != 2 {
		t.Errorf("stale reads counted %v, want 2", got)
	}
	fx.now = fx.now.Add(250 * time.Millisecond)
	fx.fast(3)
	latest := fx.now
	// A read completed at the same moment as the last: dropped too.
	fx.loop.fast.apply(context.Background(), fx.n, &engine.Routing{Queue: &sat}, true, nil, latest)
	// A refresh whose scrape was observed before the fast read.
	fx.now = refreshAt.Add(100 * time.Millisecond)
	fx.src.queue = 0
	fx.refresh()
	rec, err := fx.st.Get(context.Background(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if at := rec.Metrics.GetObservedAt().AsTime(); !at.Equal(latest) || rec.Metrics.GetQueue() != 3 {
		t.Fatalf("after an older refresh the store holds queue %v observed at %v, want the fast read's 3 at %v", rec.Metrics.GetQueue(), at, latest)
	}
}

// TestFastReadDown: a failed read makes the node unroutable at once, as a
// refresh finding it down would, and its error is on the record.
func TestFastReadDown(t *testing.T) {
	fx := newFastFixture(t)
	fx.now = fx.now.Add(250 * time.Millisecond)
	fx.loop.fast.apply(context.Background(), fx.n, nil, false, errors.New("connection refused"), fx.now)
	rec, err := fx.st.Get(context.Background(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Node.GetRoutable() || rec.Metrics.GetUp() || len(rec.Metrics.GetErrors()) == 0 {
		t.Fatalf("after a failed read: routable %v, up %v, errors %q", rec.Node.GetRoutable(), rec.Metrics.GetUp(), rec.Metrics.GetErrors())
	}
}

// TestFastReadUnreadable: an answer that is an exposition but could not be
// read holds the node out of routing, as a refresh reading nothing would.
func TestFastReadUnreadable(t *testing.T) {
	fx := newFastFixture(t)
	fx.now = fx.now.Add(250 * time.Millisecond)
	fx.loop.fast.apply(context.Background(), fx.n, nil, true, errors.New("parse: bad line"), fx.now)
	if ok, _ := fx.routable(); ok {
		t.Fatal("an unreadable answer left the node routable")
	}
}

// TestFastFetch reads an exposition of the repository through fetch: the
// values are ReadRouting's (and so the full parser's: engine's tests), the
// rest of the body is drained so the next read reuses the connection.
func TestFastFetch(t *testing.T) {
	body := expofarm.SeedBody() // the simulator's vLLM node, 172 KB
	var conns atomic.Int32
	var mode atomic.Int32 // 0 serve, 1 hang, 2 not found
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 1:
			<-r.Context().Done()
			return
		case 2:
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Accept") == "" {
			http.Error(w, "no Accept", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	f := newFastLane(FastConfig{Interval: time.Second}, diagnose.DefaultThresholds(), DefaultMinScoreChange,
		memory.New(memory.Options{}, "t"), discard(), time.Now, map[string]fleet.Node{"n": {ID: "n", URL: srv.URL, Engine: "vllm"}})
	want, err := engine.ReadRouting(bytes.NewReader(body), llmdiagv1.Engine_ENGINE_VLLM, engine.Limits{}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r, up, at, err := f.fetch(context.Background(), f.nodes["n"], llmdiagv1.Engine_ENGINE_VLLM)
		if err != nil || !up || at.IsZero() {
			t.Fatalf("fetch: up %v, at %v, %v", up, at, err)
		}
		if *r.Queue != *want.Queue || *r.Running != *want.Running || *r.KVUsage != *want.KVUsage {
			t.Fatalf("fetch read %v %v %v, want %v %v %v", *r.Queue, *r.Running, *r.KVUsage, *want.Queue, *want.Running, *want.KVUsage)
		}
	}
	if !want.Stopped {
		t.Fatal("the read of the seed body did not stop early: the drain is not exercised")
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("3 reads opened %d connections, want 1 (the body drained)", n)
	}
	// Slower than the deadline: skipped, not applied (the node has been
	// refreshed: a node never refreshed is not read at all).
	f.nodes["n"].base = &fastBase{metrics: &llmdiagv1.NodeMetrics{Node: "n", Engine: llmdiagv1.Engine_ENGINE_VLLM}}
	f.cfg.Timeout = 50 * time.Millisecond
	mode.Store(1)
	f.read(context.Background(), f.nodes["n"])
	if got := counter(f.met.skipped.WithLabelValues("slow")); got != 1 {
		t.Errorf("a read past its deadline: %v slow skips, want 1", got)
	}
	if got := counter(f.met.reads.WithLabelValues("error")) + counter(f.met.reads.WithLabelValues("no_refresh")); got != 0 {
		t.Errorf("a read past its deadline was applied (%v)", got)
	}
	// Not an exposition: an error, the node down.
	mode.Store(2)
	if _, up, _, err := f.fetch(context.Background(), f.nodes["n"], llmdiagv1.Engine_ENGINE_VLLM); err == nil || up {
		t.Fatalf("a 404: up %v, err %v", up, err)
	}
}

var _ store.Store = (*memory.Store)(nil)

// counter is c's value.
func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestFastLaneRuns: Run starts the fast lane with the refreshes; it reads
// the node's endpoint on its own schedule, far more often than the
// refresh, and each read is applied.
func TestFastLaneRuns(t *testing.T) {
	body := expofarm.SeedBody()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	now := time.Now()
	src := &oneNode{now: &now}
	loop := New(src, memory.New(memory.Options{}, "t"), nopRec{}, discard(), time.Now, Config{
		Interval:   time.Hour,
		Thresholds: diagnose.DefaultThresholds(),
		Fleet:      map[string]fleet.Node{"n": {ID: "n", URL: srv.URL, Engine: "vllm"}},
		Fast:       FastConfig{Interval: 10 * time.Millisecond},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "three fast reads applied", func() bool {
		return counter(loop.fast.met.reads.WithLabelValues("ok")) >= 3
	})
	cancel()
	<-done // Run waits for the lane's reads in flight
	if got := counter(loop.fast.met.reads.WithLabelValues("error")); got != 0 {
		t.Errorf("%v fast reads failed", got)
	}
}
