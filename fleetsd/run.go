package fleetsd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/redact"
)

// Defaults of Options.
const (
	DefaultMaxTargets = 10000
	// DefaultDebounce is Prometheus's own: the Manager sends at most one
	// update this often.
	DefaultDebounce = 5 * time.Second
	// DefaultFirstUpdate is Options.FirstUpdate's default.
	DefaultFirstUpdate = 30 * time.Second
)

// Options configure a Discovery. Zero values take the defaults.
type Options struct {
	// Log receives the warnings (a failing discovery, refused targets) and,
	// at debug level, the discovery mechanisms' own errors.
	Log *slog.Logger
	// Registerer takes the discovery metrics (llmdiag_discovery_*) and
	// Prometheus's own (prometheus_sd_*); nil registers none.
	Registerer prometheus.Registerer
	// MaxTargets bounds the node set (default DefaultMaxTargets): targets
	// beyond, by id, are refused and counted.
	MaxTargets int
	// Debounce is the Manager's update interval (default DefaultDebounce):
	// changes within it are handed over together.
	Debounce time.Duration
	// IDLabel, when set, names the target label whose value is a node's id
	// (see Job.Nodes).
	IDLabel string
	// FirstUpdate is how long a discovery mechanism may take to send its
	// first targets before it counts as failing (default
	// DefaultFirstUpdate): Kubernetes discovery sends nothing until it
	// has listed every object, and while its API server does not answer
	// the Kubernetes client retries without a word.
	FirstUpdate time.Duration
}

// Discovery runs the discovery of a File and keeps its node set.
type Discovery struct {
	file *File
	opts Options
	log  *slog.Logger
	reg  prometheus.Registerer
	met  metrics

	mu sync.Mutex
	// failing is each provider's current error; a job fails while any of
	// its providers does.
	failing map[provider]string
	// jobFailing is the jobs announced failing (warned once).
	jobFailing map[string]bool
	// last is each job's nodes of the last update.
	last map[string][]fleet.Node
	// warned is the last refusal summary logged.
	warned string
	// restart makes a kubernetes_sd_configs provider's discoverer start
	// anew (watchKube, when its API server answers again); set by Run.
	restart map[provider]chan struct{}
}

// provider is one discovery config of a job; with api, its Kubernetes
// API server's requests (kubeRequests), which fail apart from the
// mechanism's own errors and recover apart from its updates.
type provider struct {
	job   string
	index int
	api   bool
}

// New returns a Discovery of f; Run starts it. Its metrics are registered
// on opts.Registerer here.
func New(f *File, opts Options) (*Discovery, error) {
	if opts.MaxTargets <= 0 {
		opts.MaxTargets = DefaultMaxTargets
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.FirstUpdate <= 0 {
		opts.FirstUpdate = DefaultFirstUpdate
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry() // nobody reads it
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	for _, j := range f.Jobs {
		met.targets.WithLabelValues(j.Name()).Set(0)
		met.failing.WithLabelValues(j.Name()).Set(0)
		met.failures.WithLabelValues(j.Name())
	}
	return &Discovery{file: f, opts: opts, log: opts.Log, reg: reg, met: met,
		failing: map[provider]string{}, jobFailing: map[string]bool{}, last: map[string][]fleet.Node{}, restart: map[provider]chan struct{}{}}, nil
}

// Run runs Prometheus's discovery Manager over the file's jobs until ctx is
// done, and calls apply with the whole node set, sorted by id, after every
// update the Manager sends (at most one per Options.Debounce) that changes
// it, and after the first whatever it holds: a mechanism may send the same
// targets again (file_sd reads one rewrite of its file on two file
// events). apply is called from Run's goroutine, one call at a time.
func (d *Discovery) Run(ctx context.Context, apply func([]fleet.Node)) error {
	kube := &kubeFailures{}
	sdMetrics, err := discovery.CreateAndRegisterSDMetrics(watchRegisterer{Registerer: d.reg, seen: kube.seen})
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mgr := discovery.NewManager(mctx, d.log, d.reg, sdMetrics, discovery.Updatert(d.opts.Debounce), discovery.Name("llmdiag"))
	if mgr == nil {
		return errors.New("discovery: the Manager could not register its metrics")
	}
	defer mgr.UnregisterMetrics()
	cfgs := make(map[string]discovery.Configs, len(d.file.Jobs))
	for _, j := range d.file.Jobs {
		var cs discovery.Configs
		for i, c := range j.Config.ServiceDiscoveryConfigs {
			w := &watched{Config: c, d: d, p: provider{job: j.Name(), index: i}}
			if c.Name() == "kubernetes" {
				w.restart = make(chan struct{}, 1)
				d.restart[w.p] = w.restart
			}
			cs = append(cs, w)
		}
		cfgs[j.Name()] = cs
	}
	if err := mgr.ApplyConfig(cfgs); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Run() }()
	defer func() { cancel(); <-done }()
	if kp := d.kubeProviders(); len(kp) > 0 {
		kdone := make(chan struct{})
		go func() { defer close(kdone); d.watchKube(mctx, kube, kp) }()
		defer func() { cancel(); <-kdone }()
	}
	var last []fleet.Node
	for applied := false; ; {
		select {
		case <-ctx.Done():
			return nil
		case tsets, ok := <-mgr.SyncCh():
			if !ok {
				return nil
			}
			nodes := d.Build(tsets)
			if applied && slices.EqualFunc(last, nodes, func(a, b fleet.Node) bool { return reflect.DeepEqual(a, b) }) {
				continue
			}
			apply(nodes)
			last, applied = nodes, true
		}
	}
}

// Build makes the node set from the Manager's target groups by job: each
// job's nodes (Job.Nodes), a failing job's last nodes when it now has
// none, one node per id (the first job's), at most MaxTargets (by id). It
// sets the metrics and warns, once per change, of what it refused.
func (d *Discovery) Build(tsets map[string][]*targetgroup.Group) []fleet.Node {
	d.mu.Lock()
	defer d.mu.Unlock()
	type entry struct {
		node fleet.Node
		job  string
	}
	var all []entry
	var refused []Refusal
	for _, j := range d.file.Jobs {
		nodes, r := j.Nodes(tsets[j.Name()], d.opts.IDLabel)
		refused = append(refused, r...)
		if len(nodes) == 0 && d.jobFailing[j.Name()] && len(d.last[j.Name()]) > 0 {
			// Nothing comes from a failing job: what it had stays.
			nodes = d.last[j.Name()]
		}
		d.last[j.Name()] = nodes
		for _, n := range nodes {
			all = append(all, entry{n, j.Name()})
		}
	}
	// By id, jobs in file order: the first job's node of an id is kept.
	sort.SliceStable(all, func(a, b int) bool { return all[a].node.ID < all[b].node.ID })
	out := make([]fleet.Node, 0, min(len(all), d.opts.MaxTargets))
	perJob := map[string]int{}
	for i, e := range all {
		if i > 0 && all[i-1].node.ID == e.node.ID {
			if !sameNode(all[i-1].node, e.node) {
				refused = append(refused, Refusal{Job: e.job, Target: e.node.ID, Reason: RefusedDuplicate, Err: "another target has the same node id"})
			}
			continue
		}
		if len(out) >= d.opts.MaxTargets {
			refused = append(refused, Refusal{Job: e.job, Target: e.node.ID, Reason: RefusedMaxTargets, Err: fmt.Sprintf("more than %d targets (serve --max-nodes)", d.opts.MaxTargets)})
			continue
		}
		out = append(out, e.node)
		perJob[e.job]++
	}
	for _, j := range d.file.Jobs {
		d.met.targets.WithLabelValues(j.Name()).Set(float64(perJob[j.Name()]))
	}
	d.refused(refused)
	return out
}

// sameNode reports whether two targets make the same node (the same
// target found twice, as a pod's ports all relabeled to one).
func sameNode(a, b fleet.Node) bool {
	return a.URL == b.URL && a.Model == b.Model && a.Engine == b.Engine && a.Role == b.Role && a.DCGM == b.DCGM
}

// refused counts the refusals by reason and warns when what is refused
// changed.
func (d *Discovery) refused(rs []Refusal) {
	counts := map[string]int{RefusedInvalid: 0, RefusedDuplicate: 0, RefusedMaxTargets: 0}
	for _, r := range rs {
		counts[r.Reason]++
	}
	for reason, n := range counts {
		d.met.refused.WithLabelValues(reason).Set(float64(n))
	}
	var summary string
	if len(rs) > 0 {
		summary = fmt.Sprintf("%d invalid, %d duplicate, %d beyond the cap", counts[RefusedInvalid], counts[RefusedDuplicate], counts[RefusedMaxTargets])
	}
	if summary == d.warned {
		return
	}
	d.warned = summary
	if summary == "" {
		d.log.Info("discovery: no target refused any more")
		return
	}
	first := rs[0]
	d.log.Warn("discovery: targets refused", "refused", summary, "max_targets", d.opts.MaxTargets,
		"example_job", first.Job, "example_target", first.Target, "example_err", first.Err)
}

// fail records a provider's failure: counted, and warned once when its job
// starts failing.
func (d *Discovery) fail(p provider, err string) {
	err = redact.Text(err)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.met.failures.WithLabelValues(p.job).Inc()
	d.failing[p] = err
	if !d.jobFailing[p.job] {
		d.jobFailing[p.job] = true
		d.met.failing.WithLabelValues(p.job).Set(1)
		d.log.Warn("discovery failing: keeping the job's last targets until it answers again", "job", p.job, "err", err)
	}
}

// ok records a provider's update: its job recovers when none of its
// providers fails.
func (d *Discovery) ok(p provider) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, was := d.failing[p]; !was {
		return
	}
	delete(d.failing, p)
	for q := range d.failing {
		if q.job == p.job {
			return
		}
	}
	d.jobFailing[p.job] = false
	d.met.failing.WithLabelValues(p.job).Set(0)
	d.log.Info("discovery recovered", "job", p.job)
}

// Failing returns the jobs failing now, sorted, each with one provider's
// error.
func (d *Discovery) Failing() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]string{}
	for p, err := range d.failing {
		out[p.job] = err
	}
	return out
}

// kubeProvider is a provider of Kubernetes discovery (role pod, …, or
// inferencepool) and the API server it talks to.
type kubeProvider struct {
	provider
	// host is the API server's host:port ("" when not known: any).
	host string
	// prom is Prometheus's kubernetes_sd_configs (its failures counter is
	// the mechanism's), not inferencepool's.
	prom bool
}

// kubeProviders are the providers of Kubernetes discovery.
func (d *Discovery) kubeProviders() []kubeProvider {
	var ps []kubeProvider
	for _, j := range d.file.Jobs {
		for i, c := range j.Config.ServiceDiscoveryConfigs {
			switch c.Name() {
			case "kubernetes", "inferencepool":
				ps = append(ps, kubeProvider{provider: provider{job: j.Name(), index: i}, host: apiHost(c), prom: c.Name() == "kubernetes"})
			}
		}
	}
	return ps
}

// watchKube reads, every Debounce, Kubernetes discovery's failed LIST
// and WATCH requests two ways, both of which the Kubernetes client's
// retries leave out of the discoverer's log:
//
//   - Prometheus's prometheus_sd_kubernetes_failures_total (a LIST or
//     WATCH answered with an error, as for want of RBAC): when it rose,
//     every kubernetes_sd_configs provider is failing (the counter is the
//     mechanism's, not a job's), and recovers with its next update, as
//     the others do;
//   - the Kubernetes client's requests to each kubernetes_sd_configs
//     provider's API server (kubeRequests): when some got no answer (or a
//     5xx) since the last look, the provider's API server is failing (a
//     provider of its own, api); when none failed and some were answered,
//     it recovers. So an API server that goes away after the first list,
//     which the client retries without a word while the informers keep
//     their last objects, is warned about and counted within a Debounce
//     or two. While it is away, the API server is asked every Debounce
//     whether it is back (GET /version, with the provider's credentials);
//     once it answers, the provider's discoverer starts anew (a fresh
//     LIST) rather than waiting for the client's next retry, which backs
//     off up to a minute. (inferencepool watches its own client's
//     requests and does the same.)
func (d *Discovery) watchKube(ctx context.Context, k *kubeFailures, ps []kubeProvider) {
	t := time.NewTicker(d.opts.Debounce)
	defer t.Stop()
	last := k.value()
	away := map[provider]bool{}
	probes := newProbes(d.file, d.opts.Debounce)
	lastReqs := map[string]kubeCounts{}
	for _, p := range ps {
		lastReqs[p.host] = kubeReqs.counts(p.host)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if v := k.value(); v > last {
			err := fmt.Sprintf("%.0f Kubernetes API requests (list or watch) failed; the Kubernetes client retries them and logs why", v-last)
			last = v
			for _, p := range ps {
				if p.prom {
					d.fail(p.provider, err)
				}
			}
		}
		now := map[string]kubeCounts{}
		for _, p := range ps {
			if _, ok := now[p.host]; !ok {
				now[p.host] = kubeReqs.counts(p.host)
			}
		}
		for _, p := range ps {
			if !p.prom {
				continue // inferencepool watches its own client's requests
			}
			was, is := lastReqs[p.host], now[p.host]
			api := provider{job: p.job, index: p.index, api: true}
			switch {
			case is.failed > was.failed && !away[p.provider]:
				away[p.provider] = true
				host := p.host
				if host == "" {
					host = "(any)"
				}
				d.fail(api, fmt.Sprintf("the Kubernetes API server %s did not answer %d requests (list or watch) in the last %s; the Kubernetes client retries them quietly and discovery keeps the last pods meanwhile",
					host, is.failed-was.failed, d.opts.Debounce))
			case away[p.provider] && (is.answered > was.answered && is.failed == was.failed || probes.ok(ctx, p)):
				// Back: list anew now rather than when the client's
				// watches next retry (they back off up to a minute).
				away[p.provider] = false
				d.ok(api)
				select {
				case d.restart[p.provider] <- struct{}{}:
				default:
				}
			}
		}
		lastReqs = now
	}
}

// kubeFailures is Kubernetes discovery's failures counter, found as it is
// registered.
type kubeFailures struct {
	mu      sync.Mutex
	counter prometheus.Metric
}

// seen keeps c when it is prometheus_sd_kubernetes_failures_total.
func (k *kubeFailures) seen(c prometheus.Collector) {
	m, ok := c.(prometheus.Counter)
	if !ok {
		return
	}
	ch := make(chan *prometheus.Desc, 1)
	m.Describe(ch)
	if desc := <-ch; strings.Contains(desc.String(), `"prometheus_sd_kubernetes_failures_total"`) {
		k.mu.Lock()
		k.counter = m
		k.mu.Unlock()
	}
}

func (k *kubeFailures) value() float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var m dto.Metric
	if k.counter == nil || k.counter.Write(&m) != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// watchRegisterer passes every collector registered to seen.
type watchRegisterer struct {
	prometheus.Registerer
	seen func(prometheus.Collector)
}

func (w watchRegisterer) Register(c prometheus.Collector) error {
	w.seen(c)
	return w.Registerer.Register(c)
}

func (w watchRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		w.seen(c)
	}
	w.Registerer.MustRegister(cs...)
}

// watched is one provider's config as the Manager runs it: its discoverer's
// updates mark it answering, and errors it logs mark it failing.
type watched struct {
	discovery.Config
	d *Discovery
	p provider
	// restart, when set, makes the discoverer start anew.
	restart chan struct{}
}

func (w *watched) NewDiscoverer(opts discovery.DiscovererOptions) (discovery.Discoverer, error) {
	opts.Logger = slog.New(&capture{inner: opts.Logger.Handler(), fail: func(err string) { w.d.fail(w.p, err) }})
	inner, err := w.Config.NewDiscoverer(opts)
	if err != nil {
		w.d.fail(w.p, err.Error())
		return nil, err
	}
	return &watchedDiscoverer{inner: inner, w: w, opts: opts}, nil
}

type watchedDiscoverer struct {
	inner discovery.Discoverer
	w     *watched
	opts  discovery.DiscovererOptions
}

// Run runs the discoverer, and a new one each time w.restart says so.
func (wd *watchedDiscoverer) Run(ctx context.Context, up chan<- []*targetgroup.Group) {
	first := time.NewTimer(wd.w.d.opts.FirstUpdate)
	defer first.Stop()
	for {
		ictx, stop := context.WithCancel(ctx)
		in := make(chan []*targetgroup.Group)
		go wd.inner.Run(ictx, in)
		again := wd.forward(ctx, in, up, first)
		stop()
		if !again {
			return
		}
		inner, err := wd.w.Config.NewDiscoverer(wd.opts)
		if err != nil {
			wd.w.d.fail(wd.w.p, err.Error())
			<-ctx.Done()
			return
		}
		wd.inner = inner
		wd.w.d.log.Info("discovery: the Kubernetes API server answers again; listing anew", "job", wd.w.p.job)
	}
}

// forward hands the discoverer's updates on until ctx ends (false) or a
// restart is asked for (true).
func (wd *watchedDiscoverer) forward(ctx context.Context, in <-chan []*targetgroup.Group, up chan<- []*targetgroup.Group, first *time.Timer) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-wd.w.restart:
			return true
		case <-first.C:
			wd.w.d.fail(wd.w.p, fmt.Sprintf("%s discovery has sent no targets %s after it started (a Kubernetes API server that does not answer, …)", wd.w.Config.Name(), wd.w.d.opts.FirstUpdate))
		case tgs, ok := <-in:
			first.Stop()
			if !ok { // a discoverer should not close it; if it does, wait
				select {
				case <-ctx.Done():
					return false
				case <-wd.w.restart:
					return true
				}
			}
			wd.w.d.ok(wd.w.p)
			select {
			case up <- tgs:
			case <-ctx.Done():
				return false
			}
		}
	}
}

// capture is a discoverer's log: an error is the provider failing (and is
// logged at debug level: Discovery warns once per change), the rest
// passes.
type capture struct {
	inner slog.Handler
	fail  func(err string)
}

func (c *capture) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError || c.inner.Enabled(ctx, l)
}

func (c *capture) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return c.inner.Handle(ctx, r)
	}
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			msg += ": " + a.Value.String()
		}
		return true
	})
	c.fail(strings.TrimSpace(msg))
	d := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool { d.AddAttrs(a); return true })
	if c.inner.Enabled(ctx, slog.LevelDebug) {
		return c.inner.Handle(ctx, d)
	}
	return nil
}

func (c *capture) WithAttrs(as []slog.Attr) slog.Handler {
	return &capture{inner: c.inner.WithAttrs(as), fail: c.fail}
}

func (c *capture) WithGroup(name string) slog.Handler {
	return &capture{inner: c.inner.WithGroup(name), fail: c.fail}
}

// metrics are the discovery's own.
type metrics struct {
	targets  *prometheus.GaugeVec
	failing  *prometheus.GaugeVec
	failures *prometheus.CounterVec
	refused  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		targets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmdiag_discovery_targets",
			Help: "Nodes each discovery job contributes to the node set (serve --discovery), after relabeling and the bounds."}, []string{"job"}),
		failing: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmdiag_discovery_failing",
			Help: "1 while a discovery job fails (a bad file, an http_sd endpoint that does not answer, …): its last targets are kept."}, []string{"job"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmdiag_discovery_failures_total",
			Help: "Errors of a discovery job's mechanisms (each failed read, refresh or start)."}, []string{"job"}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "llmdiag_discovery_refused",
			Help: "Targets left out of the last node set, by reason: invalid (relabeling failed, or no valid node), duplicate (another target has its node id), max_targets (beyond serve --max-nodes)."}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.targets, m.failing, m.failures, m.refused} {
		if err := reg.Register(c); err != nil {
			return m, fmt.Errorf("discovery metrics: %w", err)
		}
	}
	return m, nil
}
