package inferencepool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/util/strutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)

// Resource is the InferencePool resource the discoverer watches.
var Resource = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// The labels a target carries besides the pod's (see the package doc).
const (
	metaPrefix      = model.MetaLabelPrefix + "kubernetes_"
	PoolLabel       = model.MetaLabelPrefix + "inferencepool_name"
	PortLabel       = model.MetaLabelPrefix + "inferencepool_target_port"
	PortIndexLabel  = model.MetaLabelPrefix + "inferencepool_target_port_index"
	NamespaceLabel  = metaPrefix + "namespace"
	PodNameLabel    = metaPrefix + "pod_name"
	podIPLabel      = metaPrefix + "pod_ip"
	podReadyLabel   = metaPrefix + "pod_ready"
	podPhaseLabel   = metaPrefix + "pod_phase"
	podNodeLabel    = metaPrefix + "pod_node_name"
	podHostIPLabel  = metaPrefix + "pod_host_ip"
	podUIDLabel     = metaPrefix + "pod_uid"
	podLabelPrefix  = metaPrefix + "pod_label_"
	podLabelPresent = metaPrefix + "pod_labelpresent_"
	podAnnPrefix    = metaPrefix + "pod_annotation_"
	podAnnPresent   = metaPrefix + "pod_annotationpresent_"
)

// DefaultMinInterval is the least time between two updates sent.
const DefaultMinInterval = time.Second

// SDConfig selects the InferencePools to watch and how to reach the API
// server, with the keys kubernetes_sd_configs has for them. In a scrape
// config it is inferencepool_sd_configs (Register).
type SDConfig struct {
	// KubeconfigFile, when set, is read for the API server and the
	// credentials; empty: in-cluster (the pod's service account).
	KubeconfigFile string `yaml:"kubeconfig_file,omitempty"`
	// Namespaces to watch; no names: every namespace.
	Namespaces Namespaces `yaml:"namespaces,omitempty"`
	// MinInterval is the least time between two updates sent; 0 is
	// DefaultMinInterval.
	MinInterval time.Duration `yaml:"-"`
}

// Namespaces names the namespaces to watch.
type Namespaces struct {
	Names []string `yaml:"names,omitempty"`
}

var (
	_            discovery.Config        = (*SDConfig)(nil)
	_            promcfg.DirectorySetter = (*SDConfig)(nil)
	registerOnce sync.Once
)

// Register makes inferencepool_sd_configs a key of Prometheus's scrape
// configs (its config package keeps one registry for the process), once.
func Register() { registerOnce.Do(func() { discovery.RegisterConfig(&SDConfig{}) }) }

// SetDirectory resolves a relative kubeconfig_file against dir, the
// directory of the file it was read from.
func (c *SDConfig) SetDirectory(dir string) {
	c.KubeconfigFile = promcfg.JoinDir(dir, c.KubeconfigFile)
}

// Name names the mechanism.
func (*SDConfig) Name() string { return "inferencepool" }

// NewDiscovererMetrics has no metrics of its own: client-go's reflector
// and the discovery manager's count what there is to count.
func (*SDConfig) NewDiscovererMetrics(prometheus.Registerer, discovery.RefreshMetricsInstantiator) discovery.DiscovererMetrics {
	return noMetrics{}
}

type noMetrics struct{}

func (noMetrics) Register() error { return nil }
func (noMetrics) Unregister()     {}

// NewDiscoverer reads c's credentials and returns its Discoverer.
func (c *SDConfig) NewDiscoverer(o discovery.DiscovererOptions) (discovery.Discoverer, error) {
	var rc *rest.Config
	var err error
	if c.KubeconfigFile != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", c.KubeconfigFile)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("inferencepool: API server: %w", err)
	}
	return NewDiscoverer(rc, c.Namespaces.Names, c.MinInterval, o.Logger)
}

// Discoverer watches InferencePools and pods.
type Discoverer struct {
	pods       kubernetes.Interface
	pools      dynamic.Interface
	namespaces []string
	every      time.Duration
	log        *slog.Logger
	reach      *reach
}

// NewDiscoverer watches the pools of namespaces (every one when empty)
// through the API server rc names.
func NewDiscoverer(rc *rest.Config, namespaces []string, minInterval time.Duration, log *slog.Logger) (*Discoverer, error) {
	r := &reach{}
	rc = rest.CopyConfig(rc)
	rc.Wrap(r.wrap)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("inferencepool: %w", err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("inferencepool: %w", err)
	}
	if minInterval <= 0 {
		minInterval = DefaultMinInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(namespaces) == 0 {
		namespaces = []string{corev1.NamespaceAll}
	}
	return &Discoverer{pods: cs, pools: dc, namespaces: slices.Clone(namespaces), every: minInterval, log: log, reach: r}, nil
}

// reach counts the discoverer's requests that got no answer (or a 5xx)
// and those answered: client-go retries the first without a word.
type reach struct {
	mu               sync.Mutex
	failed, answered uint64
	err              string
}

// reachCounts are reach's counts at one time.
type reachCounts struct{ failed, answered uint64 }

func (r *reach) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil && req.Context().Err() != nil {
			// Cancelled here (an informer stopped to watch anew): it says
			// nothing of the server, and counting it would report the
			// server away just after it came back.
			return resp, err
		}
		r.mu.Lock()
		switch {
		case err != nil:
			r.failed++
			r.err = err.Error()
		case resp.StatusCode >= 500:
			r.failed++
			r.err = resp.Status
		default:
			r.answered++
		}
		r.mu.Unlock()
		return resp, err
	})
}

func (r *reach) counts() reachCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return reachCounts{r.failed, r.answered}
}

func (r *reach) lastErr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// watch is one namespace's informers.
type watch struct {
	pods  cache.SharedIndexInformer
	pools cache.SharedIndexInformer
}

// Run sends the groups on up at every change, at most once per
// MinInterval, until ctx ends. When its API server stops answering (its
// client's requests get no answer or a 5xx), Run logs an error once and
// then asks the server every MinInterval whether it is back; once it is,
// it lists everything anew at once, rather than when client-go's watches
// next retry (they back off up to a minute), and sends the groups.
func (d *Discoverer) Run(ctx context.Context, up chan<- []*targetgroup.Group) {
	ctx = Context(ctx)
	sent := map[string]bool{} // sources sent non-empty
	for {
		ictx, stop := context.WithCancel(ctx)
		again := d.run(ictx, up, sent)
		stop()
		if !again || ctx.Err() != nil {
			return
		}
	}
}

// run watches until ctx ends (false) or until the API server answers again
// after it did not (true: watch anew).
func (d *Discoverer) run(ctx context.Context, up chan<- []*targetgroup.Group, sent map[string]bool) bool {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	var ws []watch
	for _, ns := range d.namespaces {
		pf := informers.NewSharedInformerFactoryWithOptions(d.pods, 0, informers.WithNamespace(ns))
		df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(d.pools, 0, ns, nil)
		w := watch{pods: pf.Core().V1().Pods().Informer(), pools: df.ForResource(Resource).Informer()}
		for _, inf := range []cache.SharedIndexInformer{w.pods, w.pools} {
			if _, err := inf.AddEventHandler(handler); err != nil {
				d.log.Error("inferencepool: watch", "err", err)
				return false
			}
			if err := inf.SetWatchErrorHandlerWithContext(d.watchError); err != nil {
				d.log.Error("inferencepool: watch", "err", err)
				return false
			}
			go inf.RunWithContext(ctx)
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		if !cache.WaitForCacheSync(ctx.Done(), w.pods.HasSynced, w.pools.HasSynced) {
			return false
		}
	}
	health := time.NewTicker(d.every)
	defer health.Stop()
	seen := d.reach.counts()
	away := false
	var last time.Time
	for {
		if wait := d.every - time.Since(last); !last.IsZero() && wait > 0 {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(wait):
			}
		}
		var pools []*infv1.InferencePool
		var pods []*corev1.Pod
		for _, w := range ws {
			for _, o := range w.pools.GetStore().List() {
				if p, err := toPool(o); err != nil {
					d.log.Warn("inferencepool: unreadable pool", "err", err)
				} else {
					pools = append(pools, p)
				}
			}
			for _, o := range w.pods.GetStore().List() {
				if p, ok := o.(*corev1.Pod); ok {
					pods = append(pods, p)
				}
			}
		}
		groups := Groups(pools, pods)
		now := map[string]bool{}
		for _, g := range groups {
			now[g.Source] = true
		}
		for _, src := range slices.Sorted(maps.Keys(sent)) {
			if !now[src] {
				groups = append(groups, &targetgroup.Group{Source: src}) // the pool went away
			}
		}
		clear(sent)
		maps.Copy(sent, now)
		select {
		case <-ctx.Done():
			return false
		case up <- groups:
		}
		last = time.Now()
	wait:
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			if away {
				// The informers' own retry got through before the
				// health check did: their lists are fresh already.
				away, seen = false, d.reach.counts()
				d.log.Info("inferencepool: the Kubernetes API server answers again; its watches listed anew")
			}
		case <-health.C:
			c := d.reach.counts()
			switch {
			case !away && c.failed > seen.failed:
				away = true
				d.log.Error("inferencepool: the Kubernetes API server does not answer; the last pods stay until it does", "err", d.reach.lastErr())
			case away:
				if err := d.pods.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err == nil {
					d.log.Info("inferencepool: the Kubernetes API server answers again; listing anew")
					return true
				}
			}
			seen = c
			goto wait
		}
	}
}

// ownKey marks the context of the discoverer's requests.
type ownKey struct{}

// Context is ctx marked as the discoverer's: Run's requests carry it, so
// that one who counts every Kubernetes client's requests in the process
// (client-go's metrics) can tell the discoverer's apart (Own).
func Context(ctx context.Context) context.Context { return context.WithValue(ctx, ownKey{}, true) }

// Own reports whether ctx is the context of a request a Discoverer made.
func Own(ctx context.Context) bool { return ctx != nil && ctx.Value(ownKey{}) != nil }

// watchError is the informers' error handler: a LIST or WATCH that
// failed, which client-go retries with backoff. A refusal (as for want of
// RBAC) is logged as an error, which fleetsd takes for the discovery
// failing (as it takes Prometheus's failures counter for
// kubernetes_sd_configs); a connection the API server did not answer is
// logged at debug level (fleetsd sees those in the Kubernetes client's
// requests), and a watch that ended or expired, as watches do, is not.
func (d *Discoverer) watchError(_ context.Context, r *cache.Reflector, err error) {
	switch {
	case err == nil, errors.Is(err, io.EOF), apierrors.IsResourceExpired(err), apierrors.IsGone(err):
	case errors.Is(err, io.ErrUnexpectedEOF), utilnet.IsConnectionRefused(err), utilnet.IsProbableEOF(err), utilnet.IsConnectionReset(err):
		d.log.Debug("inferencepool: list or watch failed; the Kubernetes client retries", "watch", r.TypeDescription(), "err", err)
	default:
		d.log.Error("inferencepool: list or watch failed; the Kubernetes client retries", "watch", r.TypeDescription(), "err", err)
	}
}

// toPool is an informer's unstructured pool as the API type.
func toPool(o any) (*infv1.InferencePool, error) {
	u, ok := o.(runtime.Unstructured)
	if !ok {
		return nil, fmt.Errorf("object of type %T", o)
	}
	var p infv1.InferencePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Source names the target group of a pool.
func Source(namespace, name string) string { return "inferencepool/" + namespace + "/" + name }

// Groups are the target groups of pools over pods: one per pool, in
// namespace and name order, whose targets are the pods of its namespace
// its selector picks that have an IP, once per target port, in pod name
// then port order.
func Groups(pools []*infv1.InferencePool, pods []*corev1.Pod) []*targetgroup.Group {
	pools = slices.Clone(pools)
	slices.SortFunc(pools, func(a, b *infv1.InferencePool) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	out := make([]*targetgroup.Group, 0, len(pools))
	for _, pool := range pools {
		g := &targetgroup.Group{Source: Source(pool.Namespace, pool.Name), Labels: model.LabelSet{
			NamespaceLabel: model.LabelValue(pool.Namespace),
			PoolLabel:      model.LabelValue(pool.Name),
		}}
		sel := selector(pool)
		for _, pod := range pods {
			if pod.Namespace != pool.Namespace || pod.Status.PodIP == "" || sel == nil || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			base := podLabels(pod)
			for i, port := range pool.Spec.TargetPorts {
				t := base.Clone()
				t[model.AddressLabel] = model.LabelValue(net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port.Number))))
				t[PortLabel] = model.LabelValue(strconv.Itoa(int(port.Number)))
				t[PortIndexLabel] = model.LabelValue(strconv.Itoa(i))
				g.Targets = append(g.Targets, t)
			}
		}
		out = append(out, g)
	}
	return out
}

// selector is pool's label selector; nil for one that selects nothing
// (no labels: an InferencePool must name some).
func selector(pool *infv1.InferencePool) labels.Selector {
	if len(pool.Spec.Selector.MatchLabels) == 0 {
		return nil
	}
	set := labels.Set{}
	for k, v := range pool.Spec.Selector.MatchLabels {
		set[string(k)] = string(v)
	}
	return labels.SelectorFromSet(set)
}

// podLabels are pod's meta labels as Prometheus's pod role writes them.
func podLabels(pod *corev1.Pod) model.LabelSet {
	ready := "unknown"
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = strings.ToLower(string(c.Status))
		}
	}
	ls := model.LabelSet{
		PodNameLabel:   model.LabelValue(pod.Name),
		podIPLabel:     model.LabelValue(pod.Status.PodIP),
		podReadyLabel:  model.LabelValue(ready),
		podPhaseLabel:  model.LabelValue(pod.Status.Phase),
		podNodeLabel:   model.LabelValue(pod.Spec.NodeName),
		podHostIPLabel: model.LabelValue(pod.Status.HostIP),
		podUIDLabel:    model.LabelValue(pod.UID),
	}
	for k, v := range pod.Labels {
		n := strutil.SanitizeLabelName(k)
		ls[model.LabelName(podLabelPrefix+n)] = model.LabelValue(v)
		ls[model.LabelName(podLabelPresent+n)] = "true"
	}
	for k, v := range pod.Annotations {
		n := strutil.SanitizeLabelName(k)
		ls[model.LabelName(podAnnPrefix+n)] = model.LabelValue(v)
		ls[model.LabelName(podAnnPresent+n)] = "true"
	}
	return ls
}
