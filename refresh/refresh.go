package refresh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/tracing"
)

// Recorder receives the loop's own telemetry.
type Recorder interface {
	ObserveRefresh(d time.Duration, err error)
	SetNodeStatuses(counts map[llmdiagv1.Status]int)
	// ObserveNodeSet receives what a refresh did to the node set.
	ObserveNodeSet(NodeSet)
}

// Config configures a Loop.
type Config struct {
	// Interval between refreshes (default 5s).
	Interval time.Duration
	// Window is the default window verdicts are computed for (default
	// metrics.DefaultWindow).
	Window metrics.Window
	// Thresholds of the verdict rules.
	Thresholds diagnose.Thresholds
	// MinScoreChange is the load-score change that alone makes a health
	// event (default 0.1).
	MinScoreChange float64
	// Timeout bounds one whole refresh (default 2×Interval, at least 10s);
	// the source's own per-target deadlines must be shorter, so that what
	// arrived is stored when the slowest target is not back.
	Timeout time.Duration
	// Fleet adds what the fleet file knows (profile, model, labels) to nodes a
	// source found by itself, by node id; a source's own fleet entry wins.
	Fleet map[string]fleet.Node
	// FleetOnly keeps only the nodes Fleet has: a source's node the fleet
	// does not list is not stored. With serve --discovery reading
	// Prometheus, discovery decides which of Prometheus's series are nodes.
	FleetOnly bool
	// Retention is how long a node the source no longer presents is kept
	// (default DefaultRetention): every refresh sweeps the store of nodes
	// not written for this long and publishes a final, removed event for
	// each (see Removed).
	Retention time.Duration
	// MaxNodes caps the nodes kept (default DefaultMaxNodes): beyond it new
	// nodes are refused, logged and counted once per refresh, while known
	// ones keep refreshing.
	MaxNodes int
	// Fast is the fast lane (fast.go), for the Fleet's nodes with an
	// endpoint url; off when its Interval is 0.
	Fast FastConfig
	// TracerProvider makes each refresh a trace: a "refresh.cycle" span,
	// with the source's read ("source.refresh", and under it the source's
	// own spans: scrapes, Prometheus queries) and each node's store write
	// under it (package tracing). Nil: none.
	TracerProvider trace.TracerProvider
}

// Loop is the ingest loop.
type Loop struct {
	src   source.Source
	st    store.Store
	rec   Recorder
	log   *slog.Logger
	now   func() time.Time
	cfg   Config
	ready chan struct{}
	once  sync.Once // closes ready

	mu    sync.Mutex // one Once at a time
	nodes nodeSet
	// wrote is what this loop last stored of each node, read in place of
	// the store's copy, which is the same while the loop is the store's
	// only writer: from the start of a run (an ingest leader's term) it is
	// forgotten, and a node whose write failed is read from the store.
	wrote map[string]wrote
	// hist is the memory update reads a node's history into when the
	// store is a store.HistoryReader: one history, the longest read.
	hist store.HistoryBuf
	// slo holds the nodes' SLO windows (slowindows.go); nil without SLOs.
	slo *sloWindows
	// fast is the fast lane; nil when off.
	fast *fastLane
	// tracer makes the cycle spans.
	tracer trace.Tracer

	// fmu guards pending and latest: SetFleet's fleet, taken by the next
	// cycle (which holds mu for its whole length).
	fmu     sync.Mutex
	pending *fleetChange
	latest  map[string]fleet.Node
	// changed wakes Run when SetFleet added or dropped nodes.
	changed chan struct{}
}

// fleetChange is a fleet SetFleet gave, and the nodes to remove with it.
type fleetChange struct {
	fleet map[string]fleet.Node
	gone  map[string]bool
}

// wrote is what update compares a node's new record with: its health and
// last sighting as stored.
type wrote struct {
	health   *llmdiagv1.NodeHealth
	lastSeen *timestamppb.Timestamp
	// progress and progressSince are the metrics' (see ProgressSince).
	progress      *float64
	progressSince *timestamppb.Timestamp
	// trend is what the node's last diagnosis left for fitting the next
	// one's latency trend (diagnose.TrendHint); nil before one.
	trend *diagnose.TrendHint
	// xids are the GPU figures of the last refresh that read the node's
	// XIDs, stamped (engine.StampXIDs); nil before one.
	xids *llmdiagv1.GPUMetrics
}

// New returns a Loop; call Run to start it.
func New(src source.Source, st store.Store, rec Recorder, log *slog.Logger, now func() time.Time, cfg Config) *Loop {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	cfg.Window = cfg.Window.Or(metrics.DefaultWindow)
	if cfg.Timeout <= 0 {
		cfg.Timeout = max(2*cfg.Interval, 10*time.Second)
	}
	if cfg.MinScoreChange <= 0 {
		cfg.MinScoreChange = DefaultMinScoreChange
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxNodes <= 0 {
		cfg.MaxNodes = DefaultMaxNodes
	}
	l := &Loop{src: src, st: st, rec: rec, log: log, now: now, cfg: cfg, ready: make(chan struct{}), changed: make(chan struct{}, 1), nodes: nodeSet{seen: map[string]time.Time{}, quiet: map[string]bool{}}, wrote: map[string]wrote{},
		slo: newSLOWindows(cfg.Thresholds, cfg.Window.String(), cfg.Interval)}
	l.latest = cfg.Fleet
	l.tracer = noop.NewTracerProvider().Tracer("")
	if cfg.TracerProvider != nil {
		l.tracer = cfg.TracerProvider.Tracer(tracing.Scope)
	}
	if cfg.Fast.Interval > 0 {
		l.fast = newFastLane(cfg.Fast, cfg.Thresholds, cfg.MinScoreChange, st, log, now, cfg.Fleet)
	}
	return l
}

// FastNodes is how many nodes the fast lane reads (0 when it is off): the
// Fleet's nodes with an endpoint url. The others' routability is as fresh
// as the refresh (and, from Prometheus, as Prometheus's scrape).
func (l *Loop) FastNodes() int {
	return l.fast.count()
}

// SetFleet makes fleet the Loop's Config.Fleet from the next refresh on,
// and the fast lane's nodes at once (serve --discovery calls it with every
// change). When it adds or drops nodes, Run refreshes at once rather than
// at its next tick (and ticks on from there), so that a node set follows
// its source within a refresh, not an Interval. With removeGone, a node of
// the fleet before that fleet no longer has is removed at the next refresh, unless a later SetFleet
// brings it back first: forgotten by the store (store.Remover) and the
// loop, with a final removed event on the health feed (Removed), as the
// retention's sweep does. Without removeGone (a source that finds nodes by
// itself, as Prometheus does) such a node stays until its source stops
// presenting it and the retention passes. At most MaxNodes removals wait
// for a refresh; beyond, the retention's sweep removes the nodes. A source
// that scrapes the fleet must have been given the new fleet first, so that
// the refresh that removes a node does not read it again.
func (l *Loop) SetFleet(f map[string]fleet.Node, removeGone bool) {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if l.pending == nil {
		l.pending = &fleetChange{gone: map[string]bool{}}
	}
	if removeGone {
		for id := range l.latest {
			// At most MaxNodes wait (a replica that does not refresh
			// keeps them until it leads): beyond, the retention's sweep
			// removes them.
			if _, ok := f[id]; !ok && len(l.pending.gone) < l.cfg.MaxNodes {
				l.pending.gone[id] = true
			}
		}
	}
	changed := len(f) != len(l.latest)
	for id := range f {
		delete(l.pending.gone, id)
		if _, ok := l.latest[id]; !ok {
			changed = true
		}
	}
	l.pending.fleet, l.latest = f, f
	l.fast.setNodes(f)
	if changed {
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}
}

// takeFleet makes the fleet SetFleet gave the cycle's, and returns the
// nodes to remove; l.mu is held.
func (l *Loop) takeFleet() []string {
	l.fmu.Lock()
	p := l.pending
	l.pending = nil
	l.fmu.Unlock()
	if p == nil {
		return nil
	}
	l.cfg.Fleet = p.fleet
	gone := make([]string, 0, len(p.gone))
	for id := range p.gone {
		gone = append(gone, id)
	}
	return gone
}

// Ready is closed after the first completed refresh: the source answered
// and its nodes were stored, even when some of its targets failed (they are
// stored as down or unknown) or some nodes could not be written.
func (l *Loop) Ready() <-chan struct{} { return l.ready }

// Timeout is the deadline of one refresh: sources' own deadlines (a scrape,
// a query) must be shorter.
func (l *Loop) Timeout() time.Duration { return l.cfg.Timeout }

// Run refreshes at once and then every Interval until ctx is done, and at
// once when SetFleet adds or drops nodes. A failed
// refresh is logged and counted; the loop goes on. Run may be called again
// after it returned (an ingest leader runs it once per lease term).
func (l *Loop) Run(ctx context.Context) {
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	l.mu.Lock()
	l.nodes.seeded = false // a new term: another leader may have written since
	clear(l.wrote)
	l.fast.forget(true)
	l.mu.Unlock()
	if l.fast != nil {
		// The fast lane runs with the refreshes, in the same term (and
		// with its fence), and ends with them.
		fctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); l.fast.run(fctx) }()
		defer func() { stop(); <-done }()
	}
	for {
		// This cycle takes every change SetFleet made so far.
		select {
		case <-l.changed:
		default:
		}
		complete, err := l.cycle(ctx)
		switch {
		case err == nil, ctx.Err() != nil:
		case complete:
			l.log.Warn("refresh incomplete", "err", err)
		default:
			l.log.Warn("refresh failed", "err", err)
		}
		if complete {
			l.once.Do(func() { close(l.ready) })
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.changed:
			t.Reset(l.cfg.Interval)
		}
	}
}

// Once performs one refresh: it reads the source, admits the observations
// (valid ids, within MaxNodes), diagnoses, stores and publishes each node on
// its own (one whose write fails is logged and the others go on), then
// sweeps the nodes unseen for Retention. Once returns an error when the
// source could not be read or any node was not stored (the refresh then
// counts as failed in the Recorder).
func (l *Loop) Once(ctx context.Context) error {
	_, err := l.cycle(ctx)
	return err
}

// maxNodeErrors is how many nodes' errors a failed refresh's error quotes.
const maxNodeErrors = 3

// cycle performs one refresh; complete reports whether it counts towards
// Ready: the source answered, and some node was stored or none failed.
func (l *Loop) cycle(ctx context.Context) (complete bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.now()
	defer func() { l.rec.ObserveRefresh(l.now().Sub(start), err) }()
	ctx, span := l.tracer.Start(ctx, "refresh.cycle", trace.WithNewRoot())
	defer func() { tracing.End(span, err) }()

	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	// Nodes the fleet no longer has leave before the source is read.
	gone, gerr := l.remove(ctx, l.takeFleet())
	if gerr != nil {
		return false, gerr
	}
	sctx, sspan := tracing.Child(ctx, "source.refresh")
	obs, err := l.src.Refresh(sctx, l.cfg.Window.String())
	tracing.End(sspan, err)
	if err != nil {
		return false, fmt.Errorf("read source: %w", err)
	}
	if l.cfg.FleetOnly {
		obs = slices.DeleteFunc(obs, func(o source.Observation) bool {
			_, ok := l.cfg.Fleet[o.Node.ID]
			return !ok
		})
	}
	obs, nodeSet := l.admit(ctx, obs)
	nodeSet.Removed = gone
	defer func() {
		nodeSet.Kept = len(l.nodes.seen)
		l.rec.ObserveNodeSet(nodeSet)
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("llmdiag.nodes", len(obs)), attribute.Int("llmdiag.nodes.kept", nodeSet.Kept),
				attribute.Int("llmdiag.nodes.refused", nodeSet.Refused), attribute.Int("llmdiag.nodes.removed", len(nodeSet.Removed)))
		}
	}()
	if l.slo != nil {
		// The SLO windows may take half the refresh's time at most: the
		// nodes must still be stored.
		sctx, scancel := context.WithTimeout(ctx, l.cfg.Timeout/2)
		l.slo.read(sctx, l.src, l.log, start, obs, l.cfg.Thresholds, l.modelOf)
		scancel()
	}
	byModel := make(map[string][]*llmdiagv1.NodeMetrics)
	filled := make(map[string]bool) // models of which a node takes the fleet's model
	var nodes int
	for _, o := range obs {
		if o.Metrics != nil {
			// Before the peers are grouped: a node's peers are those of its role.
			l.applyRole(o)
			byModel[o.Metrics.GetModel()] = append(byModel[o.Metrics.GetModel()], o.Metrics)
			filled[o.Metrics.GetModel()] = filled[o.Metrics.GetModel()] || l.fillsModel(o)
			nodes++
		}
	}
	// Each model's peers are prepared once for the diagnoses of all its
	// nodes, unless a node's model changes on the way (update fills it in
	// from the fleet file, which its later peers see): such a group is
	// passed as it is to each node.
	groups := make(map[string]*diagnose.PeerGroup, len(byModel))
	for model, group := range byModel {
		if !filled[model] {
			groups[model] = diagnose.NewPeerGroup(group, l.cfg.Thresholds)
		}
	}
	counts := make(map[llmdiagv1.Status]int)
	var (
		stored int
		errs   []error
		fenced bool
	)
	for _, o := range obs {
		if o.Metrics == nil {
			continue
		}
		if ctx.Err() != nil || fenced {
			// Past the refresh's deadline, or no longer the writer: every
			// write left would fail the same way.
			break
		}
		var peers []*llmdiagv1.NodeMetrics
		group := groups[o.Metrics.GetModel()]
		if group == nil {
			peers = peersOf(o.Metrics, byModel[o.Metrics.GetModel()])
		}
		status, err := l.update(ctx, o, peers, group)
		if err != nil {
			l.log.Debug("node not stored", "node", o.Node.ID, "err", err)
			errs = append(errs, err)
			fenced = errors.Is(err, store.ErrFenced)
			continue
		}
		stored++
		counts[status]++
	}
	l.rec.SetNodeStatuses(counts)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("llmdiag.nodes.stored", stored), attribute.Int("llmdiag.nodes.errors", len(errs)))
	}
	removed, serr := l.sweep(ctx)
	nodeSet.Removed = append(nodeSet.Removed, removed...)
	if serr == nil {
		nodeSet.Quiet, serr = l.quieten(ctx)
	}
	if failed := nodes - stored; failed > 0 {
		shown := errs[:min(len(errs), maxNodeErrors)]
		if ctx.Err() != nil && len(errs) < failed {
			shown = append(shown, fmt.Errorf("refresh deadline (%s): %w", l.cfg.Timeout, ctx.Err()))
		}
		return stored > 0, errors.Join(fmt.Errorf("%d of %d nodes not stored: %w", failed, nodes, errors.Join(shown...)), serr)
	}
	if serr != nil {
		return true, serr
	}
	return true, nil
}

// modelOf is the model o's diagnosis is made for: its own, or the fleet
// file's (update fills it in).
func (l *Loop) modelOf(o source.Observation) string {
	if l.fillsModel(o) {
		return l.cfg.Fleet[o.Node.ID].Model
	}
	return o.Metrics.GetModel()
}

// fillsModel reports whether update gives o's metrics the fleet file's
// model.
func (l *Loop) fillsModel(o source.Observation) bool {
	f, ok := l.cfg.Fleet[o.Node.ID]
	return ok && o.Node.Model == "" && f.Model != ""
}

// update diagnoses, stores and publishes one node; its peers are group,
// or peers when group is nil.
func (l *Loop) update(ctx context.Context, o source.Observation, peers []*llmdiagv1.NodeMetrics, group *diagnose.PeerGroup) (llmdiagv1.Status, error) {
	if f, ok := l.cfg.Fleet[o.Node.ID]; ok {
		if o.Node.Profile == (fleet.Profile{}) {
			o.Node.Profile = f.Profile
		}
		if len(o.Node.Labels) == 0 {
			o.Node.Labels = f.Labels
		}
		if o.Node.Role == "" {
			o.Node.Role = f.Role
		}
		if o.Node.Model == "" && f.Model != "" {
			o.Node.Model = f.Model
			o.Metrics.Model = f.Model
		}
	}
	m := o.Metrics
	fn := l.fast.node(o.Node.ID)
	if fn != nil {
		// Between the fast lane's reads of the node: see fastNode.refreshed.
		fn.mu.Lock()
		defer fn.mu.Unlock()
		fn.overlay(m)
	}
	prev, known := l.wrote[o.Node.ID]
	if !known {
		rec, err := l.st.Get(ctx, o.Node.ID)
		if err != nil && !isNotFound(err) {
			return 0, fmt.Errorf("read %s: %w", o.Node.ID, err)
		}
		if rec != nil {
			prev, known = wrote{health: Health(rec.Node, rec.Metrics.GetObservedAt()), lastSeen: rec.Node.GetLastSeen(), progress: rec.Metrics.Progress, progressSince: rec.Metrics.GetProgressSince(), xids: xidsOf(rec.Metrics.GetGpu(), nil)}, true
		}
	}
	if fn != nil && fn.health != nil {
		prev.health, known = fn.health, true // a fast read's, when newer
	}
	m.ProgressSince = ProgressSince(prev.progress, prev.progressSince, m)
	engine.StampXIDs(prev.xids, m.GetGpu(), m.GetObservedAt().AsTime())
	var hist []diagnose.Point
	var err error
	if hr, ok := l.st.(store.HistoryReader); ok {
		// The diagnosis keeps none of the history's points (nor pointers
		// into them): the next node's may take their place.
		hist, err = hr.HistoryInto(ctx, o.Node.ID, &l.hist)
	} else {
		hist, err = l.st.History(ctx, o.Node.ID)
	}
	if err != nil && !isNotFound(err) {
		return 0, fmt.Errorf("read history of %s: %w", o.Node.ID, err)
	}
	profile := Profile(o)
	point := PointOf(m)
	trend := prev.trend
	if trend == nil {
		trend = new(diagnose.TrendHint)
	}
	d := diagnose.Diagnose(diagnose.Input{
		Metrics: m,
		History: append(hist, point),
		Profile: profile,
		Peers:   peers,
		Group:   group,
		Windows: l.slo.use(o.Node.ID, m.GetObservedAt().AsTime()),
		Trend:   trend,
	}, l.cfg.Thresholds, llmdiagv1.Language_LANGUAGE_EN)
	point.Status = d.GetStatus()

	node := &llmdiagv1.Node{
		Id:        o.Node.ID,
		Model:     m.GetModel(),
		Engine:    m.GetEngine(),
		Profile:   profile,
		Status:    d.GetStatus(),
		RootCause: d.GetRootCause(),
		Routable:  d.GetRoutable(),
		LoadScore: d.GetLoadScore(),
		Staleness: m.GetStaleness(),
		Url:       redact.URL(o.Node.URL), // answers never show a password
		LastSeen:  m.GetObservedAt(),
		Labels:    maps.Clone(o.Node.Labels),
		Role:      m.GetRole(),
	}
	if !m.GetUp() && known {
		node.LastSeen = prev.lastSeen
	}
	if fn != nil {
		fn.refreshed(m, d, node, profile, point, l.cfg.Thresholds)
	}
	pctx, span := tracing.Child(ctx, "store.put", trace.WithAttributes(attribute.String("llmdiag.node", o.Node.ID)))
	err = l.st.Put(pctx, &store.Record{Node: node, Metrics: m, Diagnosis: d}, point)
	tracing.End(span, err)
	if err != nil {
		delete(l.wrote, o.Node.ID) // what the store holds now is its to say
		return 0, fmt.Errorf("write %s: %w", o.Node.ID, err)
	}
	h := Health(node, m.GetObservedAt())
	l.wrote[o.Node.ID] = wrote{health: h, lastSeen: node.LastSeen, progress: m.Progress, progressSince: m.GetProgressSince(), trend: trend, xids: xidsOf(m.GetGpu(), prev.xids)}
	if fn != nil {
		fn.health = h
	}
	// A node the feed was told went quiet is news again, whatever it reads.
	back := l.nodes.quiet[o.Node.ID]
	if !known || back || Changed(prev.health, h, l.cfg.MinScoreChange) {
		pctx, span := tracing.Child(ctx, "store.publish", trace.WithAttributes(attribute.String("llmdiag.node", o.Node.ID)))
		_, err := l.st.Publish(pctx, h)
		tracing.End(span, err)
		if err != nil {
			return 0, fmt.Errorf("publish %s: %w", o.Node.ID, err)
		}
		delete(l.nodes.quiet, o.Node.ID)
		if known {
			// Status, cause and routability changes are news; a load score
			// drifting past the threshold is not.
			level := slog.LevelDebug
			if Changed(prev.health, h, math.Inf(1)) {
				level = slog.LevelInfo
			}
			l.log.Log(ctx, level, "node health changed", "node", node.Id, "status", node.Status, "cause", node.RootCause, "routable", node.Routable, "score", round2(node.LoadScore))
		}
	}
	return d.GetStatus(), nil
}

// ProgressSince is when m's progress took its value: since, the previous
// refresh's, when that refresh read the same progress, else m's own
// observed_at; nil when m has no progress or is not up. A target that does
// not answer says nothing about its counters, and the next read that does
// starts afresh unless the counters are where they were.
func ProgressSince(progress *float64, since *timestamppb.Timestamp, m *llmdiagv1.NodeMetrics) *timestamppb.Timestamp {
	if m.Progress == nil || !m.GetUp() || m.GetObservedAt() == nil {
		return nil
	}
	if progress != nil && since != nil && *progress == *m.Progress && !since.AsTime().After(m.GetObservedAt().AsTime()) {
		return since
	}
	return m.GetObservedAt()
}

// DefaultMinScoreChange is the load-score move that alone publishes a
// health event: the finest change a StreamHealth subscriber can ask for.
const DefaultMinScoreChange = 0.05

// Health is the routing-relevant part of a node's record.
func Health(n *llmdiagv1.Node, observedAt *timestamppb.Timestamp) *llmdiagv1.NodeHealth {
	return &llmdiagv1.NodeHealth{
		Node:       n.GetId(),
		Model:      n.GetModel(),
		Status:     n.GetStatus(),
		RootCause:  n.GetRootCause(),
		Routable:   n.GetRoutable(),
		LoadScore:  n.GetLoadScore(),
		Staleness:  n.GetStaleness(),
		ObservedAt: observedAt,
		Labels:     n.GetLabels(),
	}
}

// Changed reports whether b differs from a enough to tell subscribers: status,
// cause or routability changed, or the load score moved by minScore or more.
func Changed(a, b *llmdiagv1.NodeHealth, minScore float64) bool {
	return a.GetStatus() != b.GetStatus() || a.GetRootCause() != b.GetRootCause() ||
		a.GetRoutable() != b.GetRoutable() || math.Abs(a.GetLoadScore()-b.GetLoadScore()) >= minScore
}

// Profile is the node's deployment profile: the fleet file's, completed with
// what the metrics reveal (engine cores, ranks).
func Profile(o source.Observation) *llmdiagv1.Profile {
	p := o.Node.Profile.Proto()
	if o.Sample != nil {
		if p.DataParallel == 0 && o.Sample.DataParallel > 0 {
			p.DataParallel = uint32(o.Sample.DataParallel)
		}
		// One rank seen says little: SGLang exports from attention-TP rank
		// 0 only unless told otherwise, so a single tp_rank, pp_rank or
		// moe_ep_rank value is not taken as a degree of 1.
		if p.TensorParallel == 0 && o.Sample.TensorParallel > 1 {
			p.TensorParallel = uint32(o.Sample.TensorParallel)
		}
		if p.PipelineParallel == 0 && o.Sample.PipelineParallel > 1 {
			p.PipelineParallel = uint32(o.Sample.PipelineParallel)
		}
		if p.ExpertParallel == 0 && o.Sample.ExpertParallel > 1 {
			p.ExpertParallel = uint32(o.Sample.ExpertParallel)
		}
	}
	return p
}

// PointOf is the history point a refresh's metrics make. Gauges are taken
// as they are; window figures (mean and P99 E2E, generation rate) only when
// the window is covered, since figures over a lifetime or over the first
// seconds of a window are not comparable with later ones.
//
// A point keeps its time to the millisecond and its values to float32's
// seven significant digits: far finer than any threshold or trend reads,
// and it halves what a point costs in the store (see store/memory).
func PointOf(m *llmdiagv1.NodeMetrics) diagnose.Point {
	p := diagnose.Point{
		At:         m.GetObservedAt().AsTime().Truncate(time.Millisecond),
		Up:         m.GetUp(),
		Queue:      round32(m.Queue),
		Running:    round32(m.Running),
		KVPressure: round32(m.KvPressure),
	}
	if w, lifetime, err := metrics.ParseWindow(m.GetWindow()); err == nil && !lifetime && m.GetCovered().AsDuration() >= w*9/10 {
		p.GenerationRate = round32(m.GenerationTokensPerSecond)
		if e2e := m.GetE2E(); e2e != nil {
			p.E2EMean = round32(e2e.Mean)
			p.E2EP99 = round32(p99(e2e))
		}
	}
	return p
}

// p99 returns d's P99, or nil when d does not carry it or the window had no
// observations (NaN).
func p99(d *llmdiagv1.Distribution) *float64 {
	for _, p := range d.GetPercentiles() {
		if math.Abs(p.GetQuantile()-0.99) < 1e-9 {
			if v := p.GetValue(); !math.IsNaN(v) && !math.IsInf(v, 0) {
				return &v
			}
			return nil
		}
	}
	return nil
}

// round32 returns v rounded to the nearest float32, or v itself when
// float32 cannot hold it (out of range): nil stays nil, NaN stays NaN.
func round32(v *float64) *float64 {
	if v == nil || math.IsNaN(*v) || math.Abs(*v) > math.MaxFloat32 {
		return v
	}
	r := float64(float32(*v))
	return &r
}

// Restale returns a copy of m with staleness measured at now.
func Restale(m *llmdiagv1.NodeMetrics, now time.Time, staleAfter time.Duration) *llmdiagv1.NodeMetrics {
	m = proto.Clone(m).(*llmdiagv1.NodeMetrics)
	age, stale := metrics.Staleness(m.GetObservedAt().AsTime(), now, staleAfter)
	m.Staleness = durationpb.New(age)
	m.Stale = stale
	return m
}

func peersOf(m *llmdiagv1.NodeMetrics, group []*llmdiagv1.NodeMetrics) []*llmdiagv1.NodeMetrics {
	var out []*llmdiagv1.NodeMetrics
	for _, p := range group {
		if p != m {
			out = append(out, p)
		}
	}
	return out
}

func isNotFound(err error) bool { return err != nil && errors.Is(err, store.ErrNotFound) }

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// xidsOf is g when it read the node's XIDs (engine.StampXIDs's prev for
// the next read), else before: a refresh whose DCGM read failed does not
// make the next one's XIDs look new.
func xidsOf(g, before *llmdiagv1.GPUMetrics) *llmdiagv1.GPUMetrics {
	if g.GetXidRead() || len(g.GetXidErrors()) > 0 {
		return g
	}
	return before
}
