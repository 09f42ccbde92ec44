package readinessgate_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/kubetest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/readygate"
	"github.com/llmdiag/llmdiag/sim"
)

func TestMain(m *testing.M) { clitest.Main(m) }

const (
	gate     = "llmdiag.io/routable"
	ns       = "inference"
	kubeNode = "gpu-node-1"
	pods     = 4
	// Bounds the test promises.
	falseWithin    = 2 * time.Second  // llmdiag marking a pod unroutable to its gate False
	failOpenWithin = 15 * time.Second // a graceful stop to every gate True
	takeoverWithin = 10 * time.Second // the leader's stop to the other replica writing
	wait           = 90 * time.Second // any wait: generous, the machine is loaded
)

// TestReadinessGate: see the package doc.
func TestReadinessGate(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real control plane, four simulated engines and two serve replicas for a few minutes")
	}
	c := kubetest.Start(t, kubetest.Options{ControllerManager: true})
	c.CreateNode(t, kubeNode, "127.0.0.1")
	c.Namespace(t, ns)
	c.RunKubelet(t, ns)

	// Four GLM engines, open loop, lightly loaded; 5× real time so that a
	// queue builds and drains in seconds.
	cfg := simtest.Scenario(t, "overloaded", 1)
	base := cfg.Nodes[0]
	base.Workload.Rate = 1
	cfg.Nodes = nil
	for i := range pods {
		n := base
		n.ID = fmt.Sprintf("glm-4.6-%d", i)
		cfg.Nodes = append(cfg.Nodes, n)
	}
	cfg.Speed, cfg.Warmup = 5, 2*time.Minute
	rec := newRecorder(t, c)
	// The pod's IP is not a loopback one (an EndpointSlice takes none);
	// llmdiag scrapes it where an annotation says, the proxy to its engine.
	fl := gatedPods(t, c, ns, cfg, func(_ string, engine *url.URL) string { return proxy(t, engine) })
	// The kubelet stand-in holds them not Ready: the gate's condition does
	// not exist yet.
	var last string
	clitest.WaitFor(t, "every pod not Ready for want of its gate", wait, func() bool {
		last = rec.describe()
		return rec.count(func(s podState) bool { return s.ready == corev1.ConditionFalse }) == pods
	}, &last)

	sd := filepath.Join(t.TempDir(), "discovery.yaml")
	writeFile(t, sd, fmt.Sprintf(discovery, c.Kubeconfig, ns))
	args := func(id string) []string {
		return []string{"serve", "--discovery", sd, "--fast-interval", "250ms", "--readiness-gate", gate,
			"--readiness-gate-lease", ns + "/llmdiag-gate", "--readiness-gate-lease-duration", "3s", "--readiness-gate-identity", id}
	}
	a := startServe(t, "a", args("replica-a"))
	clitest.WaitFor(t, "replica a to hold the gate's Lease", wait, func() bool { return a.metric("llmdiag_readiness_gate_leader") == 1 })
	b := startServe(t, "b", args("replica-b"))

	// 1. New pods: True once their engine answers and is not saturated.
	start := time.Now()
	clitest.WaitFor(t, "every gate True and every pod Ready", wait, func() bool {
		last = rec.describe()
		return rec.count(func(s podState) bool { return s.gate == corev1.ConditionTrue && s.ready == corev1.ConditionTrue }) == pods
	}, &last)
	t.Logf("measured: every gate True and pod Ready %v after replica a started", time.Since(start).Round(time.Millisecond))
	clitest.WaitFor(t, "every endpoint of service glm ready", wait, func() bool {
		last = rec.describe() + "\n" + slicesOf(t, c)
		return rec.count(func(s podState) bool { return s.endpointReady }) == pods
	}, &last)
	if s := rec.get("glm-0"); s.reason != readygate.ReasonRoutable {
		t.Errorf("glm-0's gate reason %q, want %q", s.reason, readygate.ReasonRoutable)
	}

	// 2. Saturate glm-0: False within 2 s of llmdiag marking it
	// unroutable, its endpoint not ready; True again once drained.
	hot, hotNode := "glm-0", ns+"/glm-0:8000"
	unroutable := a.watchRoutable(t, hotNode, http.StatusServiceUnavailable)
	if err := fl.SetRate("glm-4.6-0", 12); err != nil {
		t.Fatal(err)
	}
	var marked time.Time
	select {
	case marked = <-unroutable:
	case <-time.After(wait):
		t.Fatalf("llmdiag did not mark %s unroutable within %v of its saturation:\n%s", hotNode, wait, a.stderr.String())
	}
	clitest.WaitFor(t, hot+"'s gate False", wait, func() bool { last = rec.describe(); return rec.get(hot).gate == corev1.ConditionFalse }, &last)
	s := rec.get(hot)
	gateFalse := s.gateAt.Sub(marked)
	t.Logf("measured: %s's gate False %v after llmdiag marked it unroutable (bound %v): reason %s, message %q", hot, gateFalse.Round(time.Millisecond), falseWithin, s.reason, s.message)
	if gateFalse > falseWithin {
		t.Errorf("%s's gate turned False %v after llmdiag marked it unroutable, want within %v", hot, gateFalse, falseWithin)
	}
	if s.reason == "" || s.reason == readygate.ReasonRoutable || !strings.HasPrefix(s.message, "llmdiag: ") {
		t.Errorf("%s's False gate: reason %q message %q, want the cause and the verdict", hot, s.reason, s.message)
	}
	clitest.WaitFor(t, hot+"'s endpoint not ready", wait, func() bool { return !rec.get(hot).endpointReady && rec.get(hot).ready == corev1.ConditionFalse })
	s = rec.get(hot)
	t.Logf("measured: %s not Ready %v and its endpoint not ready %v after llmdiag marked it unroutable", hot,
		s.readyAt.Sub(marked).Round(time.Millisecond), s.endpointAt.Sub(marked).Round(time.Millisecond))
	if n := rec.count(func(s podState) bool { return s.gate == corev1.ConditionTrue && s.endpointReady }); n != pods-1 {
		t.Errorf("%d other pods ready, want %d:\n%s", n, pods-1, rec.describe())
	}
	if err := fl.SetRate("glm-4.6-0", 0); err != nil {
		t.Fatal(err)
	}
	clitest.WaitFor(t, hot+"'s gate True and endpoint ready once drained", 3*wait, func() bool {
		s := rec.get(hot)
		last = rec.describe()
		return s.gate == corev1.ConditionTrue && s.endpointReady
	}, &last)
	t.Logf("%s back: %s", hot, rec.describe())
	if err := fl.SetRate("glm-4.6-0", 1); err != nil {
		t.Fatal(err)
	}

	// 3. Saturate every pod: at most half held False, the others spared.
	rec.resetMaxFalse()
	for i := range pods {
		if err := fl.SetRate(fmt.Sprintf("glm-4.6-%d", i), 12); err != nil {
			t.Fatal(err)
		}
	}
	clitest.WaitFor(t, "llmdiag to mark every pod unroutable", wait, func() bool {
		for i := range pods {
			if a.routable(fmt.Sprintf("%s/glm-%d:8000", ns, i)) != http.StatusServiceUnavailable {
				return false
			}
		}
		return true
	})
	clitest.WaitFor(t, "two gates False and two spared", wait, func() bool {
		last = rec.describe()
		return rec.count(func(s podState) bool { return s.gate == corev1.ConditionFalse }) == pods/2 &&
			rec.count(func(s podState) bool { return s.reason == readygate.ReasonSpared }) == pods/2
	}, &last)
	t.Logf("every pod saturated: %s", rec.describe())
	if m := rec.maxFalse(); m > pods/2 {
		t.Errorf("%d gates False at once while every pod saturated, want at most %d", m, pods/2)
	}
	if got := a.metric("llmdiag_readiness_gate_spared_pods"); got != pods/2 {
		t.Errorf("llmdiag_readiness_gate_spared_pods = %v, want %d", got, pods/2)
	}
	if !strings.Contains(a.stderr.String(), "pod spared") {
		t.Errorf("replica a logged no spared pod")
	}
	for _, s := range rec.all() {
		if s.reason == readygate.ReasonSpared && !strings.Contains(s.message, "spared: ") {
			t.Errorf("%s spared with message %q, want it to say so", s.name, s.message)
		}
	}

	// 4. Only the Lease holder writes.
	aWrites, bWrites := a.metric(`llmdiag_readiness_gate_writes_total{result="ok"}`), b.metric(`llmdiag_readiness_gate_writes_total{result="ok"}`)
	t.Logf("writes so far: replica a %v, replica b %v", aWrites, bWrites)
	if aWrites == 0 || bWrites != 0 || b.metric("llmdiag_readiness_gate_leader") != 0 {
		t.Errorf("replica a (leader) wrote %v, replica b %v (leader gauge %v): want only the leader to write", aWrites, bWrites, b.metric("llmdiag_readiness_gate_leader"))
	}

	// 5. The leader stops (gracefully): it sets its False conditions back
	// to True before releasing the Lease; the other replica takes over and
	// holds the saturated pods False again, within the bound.
	rec.resetMaxFalse()
	stopped := time.Now()
	a.stop(t)
	aStop := time.Since(stopped)
	// Replica a wrote its resets before it exited, but the recorder's
	// watch may deliver them later: wait for the watch, not the process.
	clitest.WaitFor(t, "a moment with every gate True after replica a stopped (its False conditions set back)", wait, func() bool {
		last = rec.describe()
		return !rec.firstAllTrueAfter(stopped).IsZero()
	}, &last)
	t.Logf("measured: replica a stopped in %v; every gate True %v after its stop began", aStop.Round(time.Millisecond), rec.firstAllTrueAfter(stopped).Sub(stopped).Round(time.Millisecond))
	clitest.WaitFor(t, "replica b to take over and hold two gates False", wait, func() bool {
		last = rec.describe()
		return b.metric("llmdiag_readiness_gate_leader") == 1 && b.metric(`llmdiag_readiness_gate_writes_total{result="ok"}`) > 0 &&
			rec.count(func(s podState) bool { return s.gate == corev1.ConditionFalse }) == pods/2
	}, &last)
	takeover := rec.lastFalseAt().Sub(stopped)
	t.Logf("measured: replica b took over and held the saturated pods False %v after replica a's stop began (bound %v)", takeover.Round(time.Millisecond), takeoverWithin)
	if takeover > takeoverWithin {
		t.Errorf("replica b wrote %v after replica a's stop began, want within %v", takeover, takeoverWithin)
	}
	if m := rec.maxFalse(); m > pods/2 {
		t.Errorf("%d gates False at once during the takeover, want at most %d", m, pods/2)
	}

	// 6. The last replica stops: every gate True (fail open).
	stopped = time.Now()
	b.stop(t)
	clitest.WaitFor(t, "every gate True once llmdiag stopped", wait, func() bool {
		last = rec.describe()
		return rec.count(func(s podState) bool { return s.gate == corev1.ConditionTrue && s.ready == corev1.ConditionTrue }) == pods
	}, &last)
	failOpen := rec.firstAllTrueAfter(stopped).Sub(stopped)
	t.Logf("measured: every gate True %v after llmdiag's graceful stop began (bound %v): %s", failOpen.Round(time.Millisecond), failOpenWithin, rec.describe())
	if failOpen > failOpenWithin {
		t.Errorf("every gate True %v after the stop, want within %v", failOpen, failOpenWithin)
	}
	for _, s := range rec.all() {
		if s.reason == readygate.ReasonStopped {
			continue
		}
		if s.gate != corev1.ConditionTrue {
			t.Errorf("%s: gate %s after llmdiag stopped", s.name, s.gate)
		}
	}
	if m := rec.maxFalse(); m > pods/2 {
		t.Errorf("%d gates False at once, want at most %d", m, pods/2)
	}
}

// slicesOf describes the EndpointSlices of the namespace.
func slicesOf(t *testing.T, c *kubetest.Cluster) string {
	l, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, s := range l.Items {
		fmt.Fprintf(&b, "slice %s labels %v:", s.Name, s.Labels)
		for _, ep := range s.Endpoints {
			fmt.Fprintf(&b, " %v ref=%v ready=%v;", ep.Addresses, ep.TargetRef, ep.Conditions.Ready)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// discovery is the discovery file: role pod in the test's namespace, the
// default rules' labels, the address from the pod's annotation
// test.llmdiag.io/address, the node id the default rules give.
const discovery = `scrape_configs:
  - job_name: pods
    kubernetes_sd_configs:
      - role: pod
        kubeconfig_file: %q
        namespaces: {names: [%s]}
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_container_port_name]
        regex: metrics
        action: keep
      - source_labels: [__meta_kubernetes_pod_annotation_test_llmdiag_io_address]
        target_label: __address__
      - action: labelmap
        regex: __meta_kubernetes_pod_label_(.+)
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
      - source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_name, __meta_kubernetes_pod_container_port_number]
        regex: '(.+);(.+);(.+)'
        replacement: $1/$2:$3
        target_label: node
`

// proxy forwards a free loopback port to the engine until the test ends,

// gatedPods starts cfg's engines (glm-4.6-N) and the Service glm
// (selecting app=glm), and in front of each engine a pod glm-N of the
// service, declaring the gate, marked running at 10.244.0.(20+N); front
// gives the address the pod's annotation names, where llmdiag scrapes it
// and requests reach its engine.
func gatedPods(t *testing.T, c *kubetest.Cluster, ns string, cfg sim.Config, front func(pod string, engine *url.URL) string) *sim.Fleet {
	t.Helper()
	fl, _ := simtest.Start(t, cfg)
	engines := map[string]*url.URL{}
	for _, n := range fl.FleetFile().Nodes {
		u, err := url.Parse(strings.TrimSuffix(n.URL, "/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		engines[n.ID] = u
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "glm"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "glm"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromString("metrics")}}},
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		name, podIP := fmt.Sprintf("glm-%d", i), fmt.Sprintf("10.244.0.%d", 20+i)
		addr := front(name, engines[fmt.Sprintf("glm-4.6-%d", i)])
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "glm", "model": "glm-4.6", "engine": "sglang"},
				Annotations: map[string]string{"test.llmdiag.io/address": addr}},
			Spec: corev1.PodSpec{
				NodeName:       kubeNode,
				Containers:     []corev1.Container{{Name: "sglang", Image: "engine", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8000}}}},
				ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.MarkPodReady(t, ns, name, podIP)
	}
	return fl
}

// and returns its address: the pod's port.
func proxy(t *testing.T, engine *url.URL) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(engine), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func writeFile(t *testing.T, path, data string) {
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// replica is one serve, run in process.
type replica struct {
	name   string
	addr   string
	stderr *testkit.SyncBuffer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// startServe runs serve with args until stop or the test's end.
func startServe(t *testing.T, name string, args []string) *replica {
	r := &replica{name: name, addr: testkit.FreeAddr(t), stderr: &testkit.SyncBuffer{}, done: make(chan error, 1)}
	var out testkit.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	env := cli.Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: r.stderr}
	go func() { r.done <- cli.Run(ctx, append(args, "--listen", r.addr, "--log-level", "info"), env) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels serve and waits for it, failing the test if it returns an
// error or takes more than 30 s.
func (r *replica) stop(t *testing.T) {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("serve %s: %v\n%s", r.name, err, r.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve %s did not stop within 30 s", r.name)
		}
		if t.Failed() {
			t.Logf("serve %s's log:\n%s", r.name, r.stderr.String())
		}
	})
}

// metric is the value of the series named (with its labels) on the
// replica's /metrics, -1 when it does not answer or lists no such series.
func (r *replica) metric(series string) float64 {
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// routable is GET /routable/{node}'s status, 0 without an answer.
func (r *replica) routable(node string) int {
	resp, err := http.Get("http://" + r.addr + "/routable/" + node)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// watchRoutable polls node's routability every 20 ms and sends the time
// it first answers code.
func (r *replica) watchRoutable(t *testing.T, node string, code int) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ctx := t.Context()
	go func() {
		for ctx.Err() == nil {
			if r.routable(node) == code {
				ch <- time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond) // a poll's period, not a wait for a condition
		}
	}()
	return ch
}

// podState is what the recorder saw last of one pod, and when each part
// last changed.
type podState struct {
	name            string
	gate            corev1.ConditionStatus // "" when absent
	reason, message string
	ready           corev1.ConditionStatus
	endpointReady   bool
	gateAt, readyAt time.Time
	endpointAt      time.Time
}

// recorder watches the pods and the EndpointSlices of the namespace and
// keeps each pod's state, with the times it changed.
type recorder struct {
	mu        sync.Mutex
	pods      map[string]*podState
	allTrue   []time.Time // every moment all gates turned True
	falseAt   time.Time   // the last time a gate turned False
	maxFalseN int
}

func newRecorder(t *testing.T, c *kubetest.Cluster) *recorder {
	r := &recorder{pods: map[string]*podState{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	podInf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(c.Client.CoreV1().RESTClient(), "pods", ns, fields.Everything()), &corev1.Pod{}, 0, cache.Indexers{})
	_, _ = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.pod(obj.(*corev1.Pod)) }, UpdateFunc: func(_, obj any) { r.pod(obj.(*corev1.Pod)) },
	})
	sliceInf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(c.Client.DiscoveryV1().RESTClient(), "endpointslices", ns, fields.Everything()), &discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	_, _ = sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.slice(obj.(*discoveryv1.EndpointSlice)) }, UpdateFunc: func(_, obj any) { r.slice(obj.(*discoveryv1.EndpointSlice)) },
	})
	wg.Go(func() { podInf.RunWithContext(ctx) })
	wg.Go(func() { sliceInf.RunWithContext(ctx) })
	return r
}

func (r *recorder) state(name string) *podState {
	s := r.pods[name]
	if s == nil {
		s = &podState{name: name}
		r.pods[name] = s
	}
	return s
}

func (r *recorder) pod(p *corev1.Pod) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.state(p.Name)
	for _, c := range p.Status.Conditions {
		switch string(c.Type) {
		case gate:
			if s.gate != c.Status {
				s.gateAt = now
				if c.Status == corev1.ConditionFalse {
					r.falseAt = now
				}
			}
			s.gate, s.reason, s.message = c.Status, c.Reason, c.Message
		case string(corev1.PodReady):
			if s.ready != c.Status {
				s.readyAt = now
			}
			s.ready = c.Status
		}
	}
	falses, trues := 0, 0
	for _, s := range r.pods {
		switch s.gate {
		case corev1.ConditionFalse:
			falses++
		case corev1.ConditionTrue:
			trues++
		}
	}
	r.maxFalseN = max(r.maxFalseN, falses)
	if trues == pods {
		r.allTrue = append(r.allTrue, now)
	}
}

func (r *recorder) slice(es *discoveryv1.EndpointSlice) {
	if es.Labels[discoveryv1.LabelServiceName] != "glm" {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ep := range es.Endpoints {
		if ep.TargetRef == nil {
			continue
		}
		s := r.state(ep.TargetRef.Name)
		ready := ep.Conditions.Ready != nil && *ep.Conditions.Ready
		if s.endpointReady != ready {
			s.endpointAt = now
		}
		s.endpointReady = ready
	}
}

func (r *recorder) get(name string) podState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *r.state(name)
}

func (r *recorder) all() []podState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []podState
	for i := range pods {
		out = append(out, *r.state(fmt.Sprintf("glm-%d", i)))
	}
	return out
}

func (r *recorder) count(f func(podState) bool) int {
	n := 0
	for _, s := range r.all() {
		if f(s) {
			n++
		}
	}
	return n
}

func (r *recorder) describe() string {
	var b strings.Builder
	for _, s := range r.all() {
		fmt.Fprintf(&b, "%s: gate=%q %s %q ready=%q endpoint=%v; ", s.name, s.gate, s.reason, s.message, s.ready, s.endpointReady)
	}
	return b.String()
}

func (r *recorder) resetMaxFalse() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxFalseN = 0
}

func (r *recorder) maxFalse() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxFalseN
}

func (r *recorder) lastFalseAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.falseAt
}

// firstAllTrueAfter is the first moment after t every gate was True, zero
// when there was none.
func (r *recorder) firstAllTrueAfter(t time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, at := range r.allTrue {
		if at.After(t) {
			return at
		}
	}
	return time.Time{}
}
