package refresh

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/store"
)

// FastConfig configures the fast lane: between two refreshes it reads only
// what routing needs (queue, running, KV usage and capacity:
// engine.ReadRouting) from every fleet node with an endpoint url, each on
// its own schedule, and re-reads routability and the load score from them
// with the refresh's own saturation rules (diagnose.Routing). Interval 0
// leaves it off.
type FastConfig struct {
	// Interval between two fast reads of a node; 0 turns the lane off.
	Interval time.Duration
	// Jitter is the most a read is moved after its slot (default a tenth of
	// Interval): nodes' reads spread over the interval and do not move in
	// step.
	Jitter time.Duration
	// Concurrency bounds the reads in flight (default 64): a tick finding
	// every slot taken is skipped, never queued.
	Concurrency int
	// Timeout bounds one read (default Interval); a read that runs out of
	// it is skipped (llmdiag_fast_skipped_total{reason="slow"}), not
	// applied.
	Timeout time.Duration
	// MaxBodyBytes bounds the exposition read (default 16 MiB, as a scrape).
	MaxBodyBytes int64
	// DrainBytes bounds what is read past the routing families so that the
	// connection is reused (default 1 MiB); a longer remainder closes it.
	DrainBytes int64
	// Limits are the exposition's limits (serve --scrape-max-series and
	// --scrape-max-ranks).
	Limits engine.Limits
	// Client reads the endpoints (default: a client of its own whose
	// transport keeps an idle connection to every node).
	Client *http.Client
	// Registerer takes the lane's metrics (llmdiag_fast_*); nil registers
	// none.
	Registerer prometheus.Registerer
	// Rand returns a random duration in [0, n) (default math/rand/v2).
	Rand func(n time.Duration) time.Duration
}

// fastHistory bounds the points a node's fast state keeps for the
// hysteresis: 16 s at 250 ms, and at least the last refresh's.
const fastHistory = 64

// fastLane is the fast lane of a Loop.
type fastLane struct {
	cfg   FastConfig
	th    diagnose.Thresholds
	st    store.Store
	log   *slog.Logger
	now   func() time.Time
	min   float64 // MinScoreChange
	stale time.Duration
	slots chan struct{}
	// mu guards nodes, added and removed: the fleet's nodes with a url,
	// changed by setNodes (serve --discovery) while the lane runs; run
	// takes added and removed into its schedule.
	mu             sync.Mutex
	nodes          map[string]*fastNode
	added, removed []*fastNode
	// changed wakes run when the nodes changed.
	changed chan struct{}
	// memo is the series the reads have parsed, for the fleet: replicas of
	// a model expose the same ones (engine.SeriesMemo).
	memo  *engine.SeriesMemo
	sched fastSchedule
	met   fastMetrics
	// noFollow reads the nodes that do not follow redirects.
	client, noFollow *http.Client
}

// fastNode is one node of the fast lane.
type fastNode struct {
	id, url string
	follow  bool
	engine  llmdiagv1.Engine // the fleet file's; unspecified: the last refresh's
	busy    atomic.Bool      // a read is in flight

	// slot and next are the scheduler's (fastSchedule); index its heap's.
	slot, next time.Time
	index      int

	mu sync.Mutex // guards what follows; held by a fast read's apply and by the refresh's update of the node
	// gone: the node left the lane (setNodes); a read in flight is dropped.
	gone bool
	// base is the last refresh's record of the node: what a fast read
	// copies and overwrites the routing gauges of. Nil until the first
	// refresh of the node.
	base *fastBase
	// points are the recent history the hysteresis reads: the refreshes'
	// points and the fast reads', oldest first, at most fastHistory.
	points []diagnose.Point
	// fast counts the fast reads in points.
	fast int
	// last is the newest read applied (a refresh's or a fast read's): an
	// older one changes nothing. lastFast is the newest fast read's metrics
	// when it is newer than the refresh's (the refresh takes its gauges).
	last     time.Time
	lastFast *llmdiagv1.NodeMetrics
	// health is what was last stored and published of the node by either
	// the refresh or a fast read; nil when not known (a new term).
	health *llmdiagv1.NodeHealth
}

// fastBase is a refresh's record of a node.
type fastBase struct {
	metrics *llmdiagv1.NodeMetrics
	diag    *llmdiagv1.Diagnosis
	node    *llmdiagv1.Node
	profile *llmdiagv1.Profile
}

func newFastLane(cfg FastConfig, th diagnose.Thresholds, minScore float64, st store.Store, log *slog.Logger, now func() time.Time, nodes map[string]fleet.Node) *fastLane {
	if cfg.Jitter <= 0 {
		cfg.Jitter = max(cfg.Interval/10, 1)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = cfg.Interval
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	if cfg.DrainBytes <= 0 {
		cfg.DrainBytes = 1 << 20
	}
	if cfg.Rand == nil {
		cfg.Rand = func(n time.Duration) time.Duration { return rand.N(n) }
	}
	f := &fastLane{cfg: cfg, th: th, st: st, log: log, now: now, min: minScore, stale: th.StaleAfter,
		slots: make(chan struct{}, cfg.Concurrency), nodes: map[string]*fastNode{}, changed: make(chan struct{}, 1),
		memo: engine.NewSeriesMemo(), met: newFastMetrics(cfg.Registerer)}
	for id, n := range nodes {
		if n.URL != "" {
			f.nodes[id] = newFastNode(id, n)
		}
	}
	f.client = cfg.Client
	if f.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// An idle connection to every node, and to every read in flight
		// when nodes share a host: at 1,000 nodes the default 100 in all
		// would dial anew on most reads. No cap in all (the nodes may
		// change: serve --discovery), so at most MaxIdleConnsPerHost a
		// node's host.
		tr.MaxIdleConns = 0
		tr.MaxIdleConnsPerHost = cfg.Concurrency
		f.client = &http.Client{Transport: tr}
	}
	nf := *f.client
	nf.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	f.noFollow = &nf
	f.met.nodes.Set(float64(len(f.nodes)))
	return f
}

func newFastNode(id string, n fleet.Node) *fastNode {
	eng, _ := fleet.ParseEngine(n.Engine) // validated with the fleet
	return &fastNode{id: id, url: n.URL, follow: n.FollowRedirects, engine: eng, index: -1}
}

// node returns the fast state of a node, nil when the lane does not read it.
func (f *fastLane) node(id string) *fastNode {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id]
}

// count is how many nodes the lane reads.
func (f *fastLane) count() int {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.nodes)
}

// setNodes makes the fleet's nodes with a url the lane's: a new node is
// read from its first slot after the refresh has read it, a node gone (or
// whose url, redirects or engine changed: it is then a new node) is no
// longer read, and a read of it in flight is dropped.
func (f *fastLane) setNodes(nodes map[string]fleet.Node) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.nodes {
		nn, ok := nodes[id]
		if ok && nn.URL == n.url && nn.FollowRedirects == n.follow {
			if eng, _ := fleet.ParseEngine(nn.Engine); eng == n.engine {
				continue
			}
		}
		delete(f.nodes, id)
		n.mu.Lock()
		n.gone = true
		n.mu.Unlock()
		f.removed = append(f.removed, n)
	}
	for id, n := range nodes {
		if _, ok := f.nodes[id]; ok || n.URL == "" {
			continue
		}
		fn := newFastNode(id, n)
		f.nodes[id] = fn
		f.added = append(f.added, fn)
	}
	f.met.nodes.Set(float64(len(f.nodes)))
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// forget drops what the lane knows of nodes: a new term (their health is
// read from the store again) or nodes swept.
func (f *fastLane) forget(all bool, ids ...string) {
	if f == nil {
		return
	}
	drop := func(n *fastNode) {
		n.mu.Lock()
		n.health = nil
		if !all {
			n.base, n.points, n.fast, n.lastFast = nil, nil, 0, nil
		}
		n.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if all {
		for _, n := range f.nodes {
			drop(n)
		}
		return
	}
	for _, id := range ids {
		if n := f.nodes[id]; n != nil {
			drop(n)
		}
	}
}

// run reads the nodes on their schedules until ctx is done, then waits
// for the reads in flight.
func (f *fastLane) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	f.mu.Lock()
	f.sched.start(f.now(), f.cfg.Interval, f.cfg.Jitter, f.cfg.Rand, f.nodes)
	f.added, f.removed = nil, nil
	f.mu.Unlock()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-f.changed:
			f.mu.Lock()
			added, removed := f.added, f.removed
			f.added, f.removed = nil, nil
			f.mu.Unlock()
			f.sched.change(f.now(), added, removed)
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		wake := f.sched.due(f.now(), func(n *fastNode) { f.dispatch(ctx, &wg, n) })
		// Reads due within a millisecond go together: one wake-up for them.
		timer.Reset(max(wake.Sub(f.now()), time.Millisecond))
	}
}

// dispatch starts a read of n unless its previous read is still in flight
// or every slot is taken: then this tick of n is skipped, never queued.
func (f *fastLane) dispatch(ctx context.Context, wg *sync.WaitGroup, n *fastNode) bool {
	if !n.busy.CompareAndSwap(false, true) {
		f.met.skipped.WithLabelValues("busy").Inc()
		return false
	}
	select {
	case f.slots <- struct{}{}:
	default:
		n.busy.Store(false)
		f.met.skipped.WithLabelValues("concurrency").Inc()
		return false
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { <-f.slots; n.busy.Store(false) }()
		f.read(ctx, n)
	}()
	return true
}

// read reads n once and applies what it read.
func (f *fastLane) read(ctx context.Context, n *fastNode) {
	eng := n.engine
	n.mu.Lock()
	refreshed := n.base != nil
	if refreshed && eng == llmdiagv1.Engine_ENGINE_UNSPECIFIED {
		eng = n.base.metrics.GetEngine()
	}
	n.mu.Unlock()
	if !refreshed || eng == llmdiagv1.Engine_ENGINE_UNSPECIFIED {
		// A read needs the refresh's record to apply to (and the engine,
		// when the fleet file does not say it): none is made before.
		f.met.reads.WithLabelValues("no_refresh").Inc()
		return
	}
	start := f.now()
	rctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	r, up, at, err := f.fetch(rctx, n, eng)
	cancel()
	end := f.now()
	f.met.latency.Observe(end.Sub(start).Seconds())
	if at.IsZero() {
		at = end // no answer
	}
	switch {
	case ctx.Err() != nil:
		return // shutting down
	case errors.Is(err, errSlow):
		// Slower than the deadline: this tick is skipped. A slow read says
		// nothing of the node's load; a node that does not answer at all
		// is found down by the refresh's scrape.
		f.met.skipped.WithLabelValues("slow").Inc()
		return
	}
	f.apply(ctx, n, r, up, err, at)
}

// drainBufs are the buffers reads drain the rest of a body into.
var drainBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// drainSink is io.Discard without its ReadFrom, so that io.CopyBuffer reads
// into the buffer it is given.
type drainSink struct{}

func (drainSink) Write(p []byte) (int, error) { return len(p), nil }

// errSlow is a read that ran out of the fast lane's deadline.
var errSlow = errors.New("no answer within the fast lane's deadline")

// fetch GETs n's exposition as a scrape does (source/scrape: the Accept
// header, status and content-type checks, the body limit) and reads its
// routing families (engine.ReadRouting). up reports an answer that is an
// exposition, even one that could not be read.
// at is when the node answered (its headers came), zero when it did not:
// the values are the engine's of then, however long reading them took
// (the refresh's scrape is timed the same way).
func (f *fastLane) fetch(ctx context.Context, n *fastNode, eng llmdiagv1.Engine) (r *engine.Routing, up bool, at time.Time, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url, nil)
	if err != nil {
		return nil, false, at, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	client := f.noFollow
	if n.follow {
		client = f.client
	}
	resp, err := client.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, false, at, errSlow
	}
	if err != nil {
		return nil, false, at, err
	}
	defer resp.Body.Close()
	at = f.now()
	if resp.StatusCode != http.StatusOK {
		return nil, false, at, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if ct := mediaType(resp.Header); ct != "none" && ct != "text/plain" && ct != "application/openmetrics-text" {
		return nil, false, at, fmt.Errorf("HTTP 200 with content type %s, not a Prometheus text exposition", ct)
	}
	lr := &io.LimitedReader{R: resp.Body, N: f.cfg.MaxBodyBytes + 1}
	r, err = engine.ReadRouting(lr, eng, f.cfg.Limits, at, f.memo)
	if lr.N <= 0 {
		return nil, true, at, fmt.Errorf("body exceeds %d bytes", f.cfg.MaxBodyBytes)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, true, at, errSlow
	}
	if err != nil {
		return nil, true, at, err
	}
	if r.Stopped {
		// The rest of the body is not wanted, but read up to DrainBytes of
		// it so that the connection is reused; a longer one is closed.
		// Into a buffer of 64 KiB: io.Discard's own reads 8 KiB at a time.
		buf := drainBufs.Get().(*[]byte)
		_, _ = io.CopyBuffer(drainSink{}, io.LimitReader(lr, f.cfg.DrainBytes), *buf)
		drainBufs.Put(buf)
	}
	return r, true, at, nil
}

// mediaType is the media type of h's Content-Type: "none" when absent.
func mediaType(h http.Header) string {
	ct := h.Get("Content-Type")
	if ct == "" {
		return "none"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "invalid"
	}
	return mt
}

// apply makes a fast read n's routing state: the last refresh's metrics
// with the read's gauges, a history point, routability and load score by
// diagnose.Routing; what changed as the publisher's rules say (Changed) is
// stored and published at once. A read no newer than the newest applied
// (a refresh's or a fast read's) changes nothing.
func (f *fastLane) apply(ctx context.Context, n *fastNode, r *engine.Routing, up bool, rerr error, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.gone:
		return // no longer the lane's (setNodes): nothing is written
	case n.base == nil:
		f.met.reads.WithLabelValues("no_refresh").Inc()
		return
	case !at.After(n.last):
		f.met.reads.WithLabelValues("stale").Inc()
		return
	}
	b := n.base
	// m is the base with this read's gauges: a shallow copy, sharing the
	// base's messages, lists and maps, which nothing here changes (the
	// errors are clipped so that an append copies them). Most reads change
	// nothing that is stored; one that does stores a deep copy.
	m := shallow(b.metrics)
	m.Errors = slices.Clip(m.Errors)
	m.ObservedAt, m.Staleness, m.Stale, m.Up = timestamppb.New(at), durationpb.New(0), false, up
	m.Queue, m.Running, m.QueueRunningRatio, m.KvPressure, m.KvCapacityTokens = nil, nil, nil, nil, nil
	switch {
	case rerr != nil:
		f.met.reads.WithLabelValues("error").Inc()
		m.Errors = append(m.Errors, fmt.Sprintf("fast read %s: %v", redact.URL(n.url), rerr))
		f.log.Debug("fast read failed", "node", n.id, "err", rerr)
	default:
		f.met.reads.WithLabelValues("ok").Inc()
		m.Queue, m.Running, m.KvPressure, m.KvCapacityTokens = r.Queue, r.Running, r.KVUsage, r.KVCapacityTokens
		m.QueueRunningRatio = metrics.QueueRunningRatio(r.Queue, r.Running)
		for _, e := range r.Errors {
			if !slices.Contains(m.Errors, e) {
				m.Errors = append(m.Errors, e)
			}
		}
	}
	point := diagnose.Point{At: at.Truncate(time.Millisecond), Up: m.Up, Queue: round32(m.Queue), Running: round32(m.Running), KVPressure: round32(m.KvPressure), Status: b.diag.GetStatus()}
	routable, score := diagnose.Routing(diagnose.Input{Metrics: m, History: n.points, Profile: b.profile}, b.diag, f.th)
	if rerr != nil {
		// An answer that could not be read says nothing of the node's
		// load: not routable, as a refresh reading nothing makes it
		// UNKNOWN.
		routable = false
	}
	n.push(point)
	n.fast++
	n.last, n.lastFast = at, m

	h := Health(b.node, m.ObservedAt)
	h.Routable, h.LoadScore, h.Staleness = routable, score, m.Staleness
	if n.health != nil && !Changed(n.health, h, f.min) {
		return
	}
	node := proto.Clone(b.node).(*llmdiagv1.Node)
	node.Routable, node.LoadScore, node.Staleness = routable, score, m.Staleness
	if m.Up {
		node.LastSeen = m.ObservedAt
	}
	d := proto.Clone(b.diag).(*llmdiagv1.Diagnosis)
	d.Routable, d.LoadScore, d.ObservedAt, d.Staleness, d.Stale = routable, score, m.ObservedAt, m.Staleness, false
	rec := &store.Record{Node: node, Metrics: proto.Clone(m).(*llmdiagv1.NodeMetrics), Diagnosis: d}
	var err error
	if rw, ok := f.st.(store.RecordWriter); ok {
		// The point stays in the lane's own history (n.points): in the
		// store's, the refreshes' readers would count it as a refresh.
		err = rw.PutRecord(ctx, rec)
	} else {
		err = f.st.Put(ctx, rec, point)
	}
	if err != nil {
		f.met.writes.WithLabelValues("error").Inc()
		f.log.Debug("fast read not stored", "node", n.id, "err", err)
		return
	}
	if _, err := f.st.Publish(ctx, h); err != nil {
		f.met.writes.WithLabelValues("error").Inc()
		f.log.Debug("fast read not published", "node", n.id, "err", err)
		return
	}
	f.met.writes.WithLabelValues("ok").Inc()
	if n.health == nil || n.health.GetRoutable() != h.GetRoutable() {
		f.log.Debug("node routability changed by a fast read", "node", n.id, "routable", routable, "score", round2(score))
	}
	n.health = h
}

// shallow returns a copy of m whose fields hold m's values: its messages,
// lists and maps are shared, not copied. Setting a field of the copy leaves
// m alone; changing what a shared field holds changes m.
func shallow[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return dst.Interface().(M)
}

// push appends p to n's points, dropping the oldest beyond fastHistory.
func (n *fastNode) push(p diagnose.Point) {
	if len(n.points) >= fastHistory {
		if n.points[0].At.After(n.points[len(n.points)-1].At) {
			return
		}
		n.points = append(n.points[:0], n.points[1:]...)
	}
	n.points = append(n.points, p)
}

// refreshed is the refresh's part in the fast lane, called by update with
// n.mu held between the diagnosis and the store: m becomes the node's base
// (with the gauges, up and observed_at of a fast read newer than it, which
// update does before diagnosing: overlay), and when fast reads are among
// the recent points the refresh's routability and load score are re-read
// over them, so that a refresh does not undo what the fast reads held
// (its own history has only the refreshes).
func (n *fastNode) refreshed(m *llmdiagv1.NodeMetrics, d *llmdiagv1.Diagnosis, node *llmdiagv1.Node, profile *llmdiagv1.Profile, point diagnose.Point, th diagnose.Thresholds) {
	if n.fast > 0 {
		routable, score := diagnose.Routing(diagnose.Input{Metrics: m, History: n.points, Profile: profile}, d, th)
		d.Routable, d.LoadScore = routable, score
		node.Routable, node.LoadScore = routable, score
	}
	at := m.GetObservedAt().AsTime()
	if len(n.points) == 0 || point.At.After(n.points[len(n.points)-1].At) {
		n.push(point)
	}
	if at.After(n.last) {
		n.last = at
	}
	n.lastFast = nil
	n.base = &fastBase{metrics: m, diag: d, node: node, profile: profile}
}

// overlay gives m the gauges, up and observed_at of the newest fast read
// when it is newer than m: a refresh's scrape that began before it does
// not take the node back in time (nor, in a shared store, write a record
// older than the stored one).
func (n *fastNode) overlay(m *llmdiagv1.NodeMetrics) {
	fm := n.lastFast
	if fm == nil || !fm.GetObservedAt().AsTime().After(m.GetObservedAt().AsTime()) {
		return
	}
	m.ObservedAt, m.Staleness, m.Stale, m.Up = fm.ObservedAt, fm.Staleness, fm.Stale, fm.Up
	m.Queue, m.Running, m.QueueRunningRatio, m.KvPressure, m.KvCapacityTokens = fm.Queue, fm.Running, fm.QueueRunningRatio, fm.KvPressure, fm.KvCapacityTokens
	if !fm.Up && len(fm.Errors) > 0 {
		m.Errors = append(m.Errors, fm.Errors[len(fm.Errors)-1])
	}
}

// fastSchedule gives every node its own slot in the interval (evenly
// spaced, by id, from a random phase) and each read a random delay of up
// to the jitter after its slot;
// a node whose slot passed by more than an interval (a stall) takes the
// next slot ahead, so that a late lane never bursts to catch up.
type fastSchedule struct {
	interval, jitter time.Duration
	rnd              func(time.Duration) time.Duration
	heap             fastHeap
}

func (s *fastSchedule) start(now time.Time, interval, jitter time.Duration, rnd func(time.Duration) time.Duration, nodes map[string]*fastNode) {
	s.interval, s.jitter, s.rnd = interval, jitter, rnd
	s.heap = s.heap[:0]
	for _, n := range nodes {
		s.heap = append(s.heap, n)
	}
	// The slots are evenly spaced, from a random phase: random slots would
	// cluster by chance, and a cluster that finds every read slot taken
	// would skip the same nodes on every interval.
	slices.SortFunc(s.heap, func(a, b *fastNode) int { return strings.Compare(a.id, b.id) })
	phase := rnd(interval)
	for i, n := range s.heap {
		n.slot = now.Add((phase + interval*time.Duration(i)/time.Duration(len(s.heap))) % interval)
		n.next = n.slot.Add(rnd(jitter))
		n.index = i
	}
	heap.Init(&s.heap)
}

// change takes nodes out of the schedule and adds others, each at a
// random slot in the next interval; the others keep their slots.
func (s *fastSchedule) change(now time.Time, added, removed []*fastNode) {
	for _, n := range removed {
		if n.index >= 0 && n.index < len(s.heap) && s.heap[n.index] == n {
			heap.Remove(&s.heap, n.index)
		}
		n.index = -1
	}
	for _, n := range added {
		if n.index >= 0 {
			continue // already scheduled
		}
		n.slot = now.Add(s.rnd(s.interval))
		n.next = n.slot.Add(s.rnd(s.jitter))
		heap.Push(&s.heap, n)
	}
}

// due calls read with every node due at now, schedules its next read, and
// returns when the next read is due (now plus an interval when there are no
// nodes).
func (s *fastSchedule) due(now time.Time, read func(*fastNode)) time.Time {
	for len(s.heap) > 0 && !s.heap[0].next.After(now) {
		n := s.heap[0]
		read(n)
		n.slot = n.slot.Add(s.interval)
		if behind := now.Sub(n.slot); behind >= 0 {
			n.slot = n.slot.Add((behind/s.interval + 1) * s.interval)
		}
		n.next = n.slot.Add(s.rnd(s.jitter))
		heap.Fix(&s.heap, 0)
	}
	if len(s.heap) == 0 {
		return now.Add(s.interval)
	}
	return s.heap[0].next
}

// fastHeap orders nodes by their next read.
type fastHeap []*fastNode

func (h fastHeap) Len() int           { return len(h) }
func (h fastHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h fastHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *fastHeap) Push(x any) { n := x.(*fastNode); n.index = len(*h); *h = append(*h, n) }
func (h *fastHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	n.index = -1
	return n
}

// fastMetrics are the lane's own metrics.
type fastMetrics struct {
	reads   *prometheus.CounterVec
	skipped *prometheus.CounterVec
	writes  *prometheus.CounterVec
	latency prometheus.Histogram
	nodes   prometheus.Gauge
}

func newFastMetrics(reg prometheus.Registerer) fastMetrics {
	m := fastMetrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_fast_reads_total",
			Help: "Fast-lane reads by result: ok, error (the node is read as down or unreadable), stale (older than the newest read applied), no_refresh (no refresh of the node yet)."}, []string{"result"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_fast_skipped_total",
			Help: "Fast-lane ticks skipped, never queued: busy (the node's previous read still in flight), concurrency (every read slot taken), slow (the read ran out of its deadline, the fast interval)."}, []string{"reason"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_fast_writes_total",
			Help: "Fast-lane store writes and StreamHealth publications (a routability, status or load-score change) by result."}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "llmdiag_fast_read_duration_seconds",
			Help: "Time of one fast-lane read: the GET and the routing families' read.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "llmdiag_fast_nodes",
			Help: "Nodes the fast lane reads: the fleet's nodes with an endpoint url (serve --fleet, --target or --discovery)."}),
	}
	if reg != nil {
		reg.MustRegister(m.reads, m.skipped, m.writes, m.latency, m.nodes)
	}
	return m
}
