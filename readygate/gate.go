package readygate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/llmdiag/llmdiag/store"
)

// Defaults of Options.
const (
	DefaultLeaseName          = "llmdiag-readiness-gate"
	DefaultLeaseDuration      = 15 * time.Second
	DefaultQPS                = 10
	DefaultBurst              = 20
	DefaultGrace              = 30 * time.Second
	DefaultMaxUnreadyFraction = 0.5
	DefaultMaxPods            = 10000
	DefaultWriteTimeout       = 5 * time.Second
	DefaultStopDeadline       = 10 * time.Second
	DefaultResync             = time.Second
	// MessageEvery is how often, at most, a pod's condition is written
	// when only its message changed (the verdict's figures): a change of
	// status or reason is written at once.
	MessageEvery = 30 * time.Second
	// FieldManager is the field manager of every write.
	FieldManager = "llmdiag"
)

// Verdicts is where the gate reads the verdicts: the store, whose feed
// wakes it on every change.
type Verdicts interface {
	List(ctx context.Context) ([]*store.Record, error)
	LastToken(ctx context.Context) (string, error)
	Events(ctx context.Context, token string, max int, wait time.Duration) ([]store.Event, error)
}

var _ Verdicts = store.Store(nil)

// Options configures a Gate.
type Options struct {
	// Condition is the pod condition type the gate keeps
	// (serve --readiness-gate), e.g. llmdiag.io/routable.
	Condition string
	// Client talks to the API server.
	Client kubernetes.Interface
	// Verdicts are read from here.
	Verdicts Verdicts
	// Plan holds the staleness rule, the grace and the unready fraction.
	Plan Rules
	// Namespace limits the pods watched to one namespace; "" watches all.
	Namespace string
	// LeaseNamespace and LeaseName name the Lease only whose holder
	// writes; Identity is this replica's name in it (default: the host
	// name and a random suffix).
	LeaseNamespace, LeaseName, Identity string
	// LeaseDuration is how long a Lease outlives its holder's last
	// renewal (DefaultLeaseDuration); it is renewed within two thirds of
	// it, and a replica without it retries every LeaseDuration/7.5.
	LeaseDuration time.Duration
	// QPS and Burst bound the writes (DefaultQPS, DefaultBurst).
	QPS   float64
	Burst int
	// MaxPods bounds the gated pods kept (DefaultMaxPods): beyond, pods
	// are left alone and counted.
	MaxPods int
	// WriteTimeout bounds one write (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// StopDeadline bounds the fail-open writes when Run's ctx is done
	// (DefaultStopDeadline).
	StopDeadline time.Duration
	// Resync is how often the plan is made without a change to wake it
	// (DefaultResync): the grace and staleness are times.
	Resync time.Duration
	// Log and Registerer (nil: none) take the gate's logs and metrics.
	Log        *slog.Logger
	Registerer prometheus.Registerer
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Gate keeps the readiness gate condition of pods (see the package doc).
type Gate struct {
	o   Options
	log *slog.Logger
	m   *gateMetrics
	lim *rate.Limiter

	informer cache.SharedIndexInformer
	le       *leaderelection.LeaderElector
	kick     chan struct{}
	leading  atomic.Bool

	mu       sync.Mutex
	stopping bool
	sessions sync.WaitGroup
	pending  map[string]write // by pod key: the newest condition to write
	order    []string         // pending keys, oldest first
	written  map[string]written
	// messageAt is when each pod's condition was last written.
	messageAt map[string]time.Time
	wake      chan struct{}
}

// write is a pending write: the condition a pod should hold.
type write struct {
	uid  types.UID
	from *Condition
	to   Condition
}

// written is a condition this replica wrote, kept until the informer's
// copy of the pod shows it (or writtenFor passes).
type written struct {
	cond Condition
	at   time.Time
}

const writtenFor = 5 * time.Second

// minPlanEvery spaces the plans: each lists the store.
const minPlanEvery = 50 * time.Millisecond

// New checks o and returns its Gate; Run starts it.
func New(o Options) (*Gate, error) {
	if err := CheckCondition(o.Condition); err != nil {
		return nil, err
	}
	if o.Client == nil || o.Verdicts == nil {
		return nil, errors.New("readiness gate: a Kubernetes client and verdicts are required")
	}
	if o.Plan.MaxUnreadyFraction < 0 || o.Plan.MaxUnreadyFraction > 1 {
		return nil, fmt.Errorf("max unready fraction %g: want 0 to 1", o.Plan.MaxUnreadyFraction)
	}
	if o.LeaseName == "" {
		o.LeaseName = DefaultLeaseName
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = "default"
	}
	if o.Identity == "" {
		o.Identity = DefaultIdentity()
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.MaxPods <= 0 {
		o.MaxPods = DefaultMaxPods
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.StopDeadline <= 0 {
		o.StopDeadline = DefaultStopDeadline
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	g := &Gate{o: o, log: o.Log.With("condition", o.Condition), m: m, lim: rate.NewLimiter(rate.Limit(o.QPS), o.Burst),
		kick: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		pending: map[string]write{}, written: map[string]written{}, messageAt: map[string]time.Time{}}
	pods := o.Client.CoreV1().Pods(o.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, lo) },
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, lo) },
	}
	// A client that serves no streaming lists (a fake one) says so.
	g.informer = cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, o.Client), &corev1.Pod{}, 0, cache.Indexers{})
	if err := g.informer.SetTransform(g.trim); err != nil {
		return nil, err
	}
	if _, err := g.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { g.poke() },
		UpdateFunc: func(_, obj any) { g.poke() },
		DeleteFunc: func(any) { g.poke() },
	}); err != nil {
		return nil, err
	}
	return g, nil
}

// CheckCondition refuses a condition type that is not a qualified name
// with a domain prefix (llmdiag.io/routable): Kubernetes reserves the
// unprefixed ones for its own conditions.
func CheckCondition(c string) error {
	if errs := validation.IsQualifiedName(c); len(errs) > 0 {
		return fmt.Errorf("readiness gate condition %q: %s", c, strings.Join(errs, "; "))
	}
	if !strings.Contains(c, "/") {
		return fmt.Errorf("readiness gate condition %q: want a domain-prefixed type such as llmdiag.io/routable", c)
	}
	return nil
}

// DefaultIdentity is the host name (a pod's name) and a random suffix, so
// that two processes on one host are two candidates.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strings.Trim(host+"_"+hex.EncodeToString(b[:]), "_")
}

// Identity is this replica's name in the Lease.
func (g *Gate) Identity() string { return g.o.Identity }

func (g *Gate) poke() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// trim keeps of a pod what the gate reads: its name, uid, creation and
// deletion times, and, when it declares the gate, the gate and the gate's
// condition; so a cluster's other pods cost a few hundred bytes each.
func (g *Gate) trim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
	}}
	for _, rg := range p.Spec.ReadinessGates {
		if string(rg.ConditionType) == g.o.Condition {
			t.Spec.ReadinessGates = []corev1.PodReadinessGate{rg}
			for _, c := range p.Status.Conditions {
				if string(c.Type) == g.o.Condition {
					t.Status.Conditions = []corev1.PodCondition{c}
				}
			}
		}
	}
	return t, nil
}

// Run watches pods and, while this replica holds the Lease, keeps the
// gate condition of every gated pod, until ctx is done. Then, if it holds
// the Lease, it sets every condition it holds False back to True (within
// StopDeadline) and releases the Lease.
func (g *Gate) Run(ctx context.Context) error {
	infCtx, stopInf := context.WithCancel(context.Background())
	defer stopInf()
	infDone := make(chan struct{})
	go func() { defer close(infDone); g.informer.RunWithContext(infCtx) }()
	defer func() { stopInf(); <-infDone }()

	lock := &watchedLock{g: g, failing: map[string]bool{}, Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: g.o.LeaseNamespace, Name: g.o.LeaseName},
		Client:     g.o.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: g.o.Identity},
	}}
	d := g.o.LeaseDuration
	elCtx, stopEl := context.WithCancel(context.Background())
	defer stopEl()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: d, RenewDeadline: d * 2 / 3, RetryPeriod: time.Duration(float64(d) / 7.5),
		ReleaseOnCancel: true, Name: "llmdiag-readiness-gate",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) { g.session(ctx, lctx) },
			OnStoppedLeading: func() {
				if !g.leading.Swap(false) {
					return
				}
				g.m.leader.Set(0)
				g.mu.Lock()
				stopping := g.stopping
				g.mu.Unlock()
				if stopping {
					g.log.Info("readiness gate: stopped; the lease is released", "lease", g.o.LeaseNamespace+"/"+g.o.LeaseName, "identity", g.o.Identity)
					return
				}
				g.log.Warn("readiness gate: lost the lease; writing stops", "lease", g.o.LeaseNamespace+"/"+g.o.LeaseName, "identity", g.o.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("readiness gate lease: %w", err)
	}
	g.mu.Lock()
	g.le = le
	g.mu.Unlock()
	g.log.Info("readiness gate: watching pods; writing while this replica holds the lease",
		"lease", g.o.LeaseNamespace+"/"+g.o.LeaseName, "identity", g.o.Identity, "qps", g.o.QPS, "burst", g.o.Burst,
		"grace", g.o.Plan.Grace, "max_unready_fraction", g.o.Plan.MaxUnreadyFraction)
	elDone := make(chan struct{})
	go func() {
		defer close(elDone)
		for elCtx.Err() == nil {
			le.Run(elCtx) // returns when the lease is lost: campaign again
		}
	}()
	<-ctx.Done()
	g.mu.Lock()
	g.stopping = true
	g.mu.Unlock()
	g.sessions.Wait() // a leader has failed open
	stopEl()
	<-elDone // the lease is released
	return nil
}

// holds reports whether this replica may write: it leads, the Lease names
// it, and its last renewal is within the lease duration (so no other
// replica can have taken it), by this replica's clock.
func (g *Gate) holds() bool {
	g.mu.Lock()
	le := g.le
	g.mu.Unlock()
	return g.leading.Load() && le != nil && le.IsLeader() && le.Check(0) == nil
}

// Leading reports whether this replica holds the Lease.
func (g *Gate) Leading() bool { return g.leading.Load() }

// session is one tenure as the Lease holder: plan and write until the
// lease is lost (lctx) or Run's ctx is done; in the latter case, fail
// open while the lease is still held.
func (g *Gate) session(ctx, lctx context.Context) {
	g.mu.Lock()
	if g.stopping {
		g.mu.Unlock()
		return
	}
	g.sessions.Add(1)
	g.pending, g.order, g.written, g.messageAt = map[string]write{}, nil, map[string]written{}, map[string]time.Time{}
	g.mu.Unlock()
	defer g.sessions.Done()
	g.leading.Store(true)
	g.m.leader.Set(1)
	g.log.Info("readiness gate: holding the lease; writing", "identity", g.o.Identity)

	wctx, cancel := context.WithCancel(lctx)
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { g.follow(wctx) })
	wg.Go(func() { g.writer(wctx, lctx) })
	if cache.WaitForCacheSync(wctx.Done(), g.informer.HasSynced) {
		g.loop(wctx)
	}
	cancel()
	wg.Wait()
	if ctx.Err() != nil && lctx.Err() == nil {
		g.failOpen(lctx)
	}
}

// loop plans on every change and every Resync until ctx is done.
func (g *Gate) loop(ctx context.Context) {
	t := time.NewTicker(g.o.Resync)
	defer t.Stop()
	for {
		g.reconcile(ctx)
		// At most one plan per minPlanEvery: a fast lane's events come
		// in bursts.
		pause := time.NewTimer(minPlanEvery)
		select {
		case <-ctx.Done():
			pause.Stop()
			return
		case <-pause.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-g.kick:
		case <-t.C:
		}
	}
}

// follow wakes the loop on every event of the verdicts' feed.
func (g *Gate) follow(ctx context.Context) {
	token, err := g.o.Verdicts.LastToken(ctx)
	for ctx.Err() == nil {
		if err == nil {
			var evs []store.Event
			evs, err = g.o.Verdicts.Events(ctx, token, 256, time.Second)
			if err == nil {
				if len(evs) > 0 {
					token = evs[len(evs)-1].Token
					g.poke()
				}
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, store.ErrTokenExpired) {
			g.log.Warn("readiness gate: reading the verdicts' feed failed; planning every resync meanwhile", "err", err)
			t := time.NewTimer(g.o.Resync)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		g.poke()
		token, err = g.o.Verdicts.LastToken(ctx)
	}
}

// gated is every pod that declares the gate, not being deleted, sorted by
// key, at most MaxPods.
func (g *Gate) gated() []*corev1.Pod {
	var out []*corev1.Pod
	for _, obj := range g.informer.GetStore().List() {
		p, ok := obj.(*corev1.Pod)
		if ok && len(p.Spec.ReadinessGates) > 0 && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(key(a), key(b)) })
	refused := max(len(out)-g.o.MaxPods, 0)
	g.m.refused.Set(float64(refused))
	if refused > 0 {
		out = out[:g.o.MaxPods]
	}
	g.m.pods.Set(float64(len(out)))
	return out
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// current is the gate condition p holds, or the one this replica wrote
// last when the informer has not shown it yet.
func (g *Gate) current(p *corev1.Pod, now time.Time) *Condition {
	var cur *Condition
	if len(p.Status.Conditions) > 0 {
		c := p.Status.Conditions[0]
		cur = &Condition{Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	k := key(p)
	if w, ok := g.written[k]; ok {
		if (cur != nil && cur.Same(w.cond)) || now.Sub(w.at) > writtenFor {
			delete(g.written, k)
		} else {
			return &w.cond
		}
	}
	return cur
}

// reconcile plans every gated pod and queues the writes of those whose
// condition differs.
func (g *Gate) reconcile(ctx context.Context) {
	now := g.o.Now()
	recs, err := g.o.Verdicts.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn("readiness gate: listing the verdicts failed; no node has a verdict for this plan", "err", err)
		}
		recs = nil
	}
	byPod := map[string][]Node{}
	for _, r := range recs {
		l := r.Node.GetLabels()
		if l["namespace"] == "" || l["pod"] == "" {
			continue
		}
		k := l["namespace"] + "/" + l["pod"]
		byPod[k] = append(byPod[k], Node{ID: r.Node.GetId(), Record: r})
	}
	pods := g.gated()
	g.mu.Lock()
	defer g.mu.Unlock()
	in := make([]Pod, len(pods))
	for i, p := range pods {
		in[i] = Pod{Key: key(p), Appeared: p.CreationTimestamp.Time, Current: g.current(p, now), Nodes: byPod[key(p)]}
	}
	spared := 0
	plan := Plan(in, now, g.o.Plan)
	Admit(in, plan, g.o.Plan.MaxUnreadyFraction)
	for i, d := range plan {
		if d.Spared {
			spared++
		}
		k := d.Key
		cur := in[i].Current
		if d.Cond != nil && cur != nil && cur.Status == d.Cond.Status && cur.Reason == d.Cond.Reason &&
			now.Sub(g.messageAt[k]) < MessageEvery {
			// Only the message moved (its figures): not worth a write yet.
			d.Cond = cur
		}
		if d.Cond == nil || (cur != nil && cur.Same(*d.Cond)) {
			if _, ok := g.pending[k]; ok {
				delete(g.pending, k)
				g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == k })
			}
			continue
		}
		if _, ok := g.pending[k]; !ok {
			g.order = append(g.order, k)
		}
		g.pending[k] = write{uid: pods[i].UID, from: in[i].Current, to: *d.Cond}
	}
	// What is noted of pods gone goes with them.
	kept := make(map[string]bool, len(in))
	for _, p := range in {
		kept[p.Key] = true
	}
	for k := range g.messageAt {
		if !kept[k] {
			delete(g.messageAt, k)
		}
	}
	for k := range g.written {
		if !kept[k] {
			delete(g.written, k)
		}
	}
	g.m.sparedNow.Set(float64(spared))
	g.m.queue.Set(float64(len(g.pending)))
	if len(g.pending) > 0 {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

// writer writes the pending conditions, oldest first, at the rate limit,
// until ctx is done: a write the limit defers waits its turn and is
// counted, never dropped. Each write runs on lctx, the lease's.
func (g *Gate) writer(ctx, lctx context.Context) {
	for {
		g.mu.Lock()
		var k string
		var w write
		if len(g.order) > 0 {
			k = g.order[0]
			w = g.pending[k]
		}
		g.mu.Unlock()
		if k == "" {
			select {
			case <-ctx.Done():
				return
			case <-g.wake:
				continue
			}
		}
		if !g.wait(ctx) {
			return
		}
		g.mu.Lock()
		w, ok := g.pending[k] // the newest condition, planned while waiting
		if ok {
			delete(g.pending, k)
			g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == k })
		}
		g.m.queue.Set(float64(len(g.pending)))
		g.mu.Unlock()
		if !ok {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if !g.holds() {
			// The lease is in doubt (a renewal late): not a write until
			// it is renewed; the next plan queues the pod again.
			t := time.NewTimer(g.o.Resync)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		g.mu.Lock()
		g.written[k] = written{cond: w.to, at: g.o.Now()} // in flight: not planned again
		g.mu.Unlock()
		// A write begun ends (within WriteTimeout) even when the stop
		// comes meanwhile, so that fail-open knows what landed; losing
		// the lease cuts it short.
		g.patch(lctx, k, w)
	}
}

// wait takes a token of the rate limit, counting a write it defers.
func (g *Gate) wait(ctx context.Context) bool {
	r := g.lim.Reserve()
	d := r.Delay()
	if d == 0 {
		return true
	}
	g.m.deferred.Inc()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		r.Cancel()
		return false
	case <-t.C:
		return true
	}
}

// patch writes one pod's gate condition: a strategic merge patch of
// pods/status keyed by the condition type, with the pod's uid as a
// precondition; lastTransitionTime only when the status changes.
func (g *Gate) patch(ctx context.Context, k string, w write) {
	ns, name, _ := strings.Cut(k, "/")
	now := g.o.Now()
	cond := map[string]any{"type": g.o.Condition, "status": w.to.Status, "reason": w.to.Reason, "message": w.to.Message}
	if w.from == nil || w.from.Status != w.to.Status {
		cond["lastTransitionTime"] = metav1.NewTime(now).Rfc3339Copy()
	}
	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": w.uid},
		"status":   map[string]any{"conditions": []any{cond}},
	})
	wctx, cancel := context.WithTimeout(ctx, g.o.WriteTimeout)
	defer cancel()
	_, err := g.o.Client.CoreV1().Pods(ns).Patch(wctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	switch {
	case err == nil:
		g.m.writes.WithLabelValues(WriteOK).Inc()
		g.mu.Lock()
		g.written[k] = written{cond: w.to, at: now}
		g.messageAt[k] = now
		g.mu.Unlock()
		g.logTransition(k, w)
		if w.to.Status == corev1.ConditionTrue {
			g.poke() // a pod released: one waiting may turn False now
		}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		g.forget(k, w.to)
		g.m.writes.WithLabelValues(WriteGone).Inc()
		g.log.Debug("readiness gate: pod gone before its write", "pod", k, "err", err)
	case ctx.Err() != nil:
		// Cut short by the stop or the lease's loss: it may have landed,
		// so it stays noted as written (fail-open reads it).
		g.m.writes.WithLabelValues(WriteError).Inc()
	default:
		g.forget(k, w.to)
		if w.to.Status == corev1.ConditionTrue {
			g.dropPendingFalse() // admitted counting on this release
		}
		g.m.writes.WithLabelValues(WriteError).Inc()
		if ctx.Err() == nil {
			g.log.Warn("readiness gate: write failed; retried at the next plan", "pod", k, "to", w.to.Status, "reason", w.to.Reason, "err", err)
		}
	}
}

// dropPendingFalse drops the pending writes of False: the next plan
// admits them again from what the pods hold.
func (g *Gate) dropPendingFalse() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, w := range g.pending {
		if w.to.Status == corev1.ConditionFalse {
			delete(g.pending, k)
			g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == k })
		}
	}
}

// forget drops what this replica noted as written to k when it is cond:
// the write failed, the plan reads the pod's own condition again.
func (g *Gate) forget(k string, cond Condition) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w, ok := g.written[k]; ok && w.cond.Same(cond) {
		delete(g.written, k)
	}
}

func (g *Gate) logTransition(k string, w write) {
	from := "absent"
	if w.from != nil {
		from = string(w.from.Status)
	}
	if w.to.Reason == ReasonSpared && (w.from == nil || w.from.Reason != ReasonSpared) {
		g.m.spared.Inc()
		g.log.Warn("readiness gate: pod spared (kept ready) by --max-unready-fraction", "pod", k, "from", from, "to", w.to.Status, "message", w.to.Message)
		return
	}
	if w.from != nil && w.from.Status == w.to.Status {
		g.log.Debug("readiness gate: condition updated", "pod", k, "status", w.to.Status, "reason", w.to.Reason, "message", w.to.Message)
		return
	}
	g.log.Info("readiness gate: condition changed", "pod", k, "from", from, "to", w.to.Status, "reason", w.to.Reason, "message", w.to.Message)
}

// failOpen sets every gate condition held False back to True, within
// StopDeadline and while the lease (lctx) is held.
func (g *Gate) failOpen(lctx context.Context) {
	ctx, cancel := context.WithTimeout(lctx, g.o.StopDeadline)
	defer cancel()
	g.mu.Lock()
	var todo []string
	ws := map[string]write{}
	for _, p := range g.gated() {
		// False as the informer shows it, or as this replica wrote it
		// (a write cut short by the stop may have landed).
		var c *Condition
		if len(p.Status.Conditions) > 0 && p.Status.Conditions[0].Status == corev1.ConditionFalse {
			pc := p.Status.Conditions[0]
			c = &Condition{Status: pc.Status, Reason: pc.Reason, Message: pc.Message}
		}
		if w, ok := g.written[key(p)]; ok && w.cond.Status == corev1.ConditionFalse {
			c = &w.cond
		}
		if c != nil {
			k := key(p)
			todo = append(todo, k)
			ws[k] = write{uid: p.UID, from: c, to: Condition{Status: corev1.ConditionTrue, Reason: ReasonStopped,
				Message: "llmdiag stopped: the gate fails open (the pod is ready as far as llmdiag is concerned)"}}
		}
	}
	g.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	g.log.Info("readiness gate: stopping; setting the conditions held False back to True before releasing the lease", "pods", len(todo), "deadline", g.o.StopDeadline)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, k := range todo {
		if !g.wait(ctx) || !g.holds() {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			g.patch(ctx, k, ws[k])
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		g.log.Warn("readiness gate: fail-open writes stopped at the deadline or with the lease; remaining conditions stay as written", "err", ctx.Err())
	}
}
