package kubediscovery_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/kubetest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// The fleet's two models, one per engine, as pod labels (a label value
// has no slash) and as the simulated engines serve them.
const (
	modelVLLM   = "qwen3-8b"
	modelSGLang = "llama-3.1-8b"
	kubeNode    = "gpu-node-1"
)

// kind is what a pod is: behind pool A, behind pool B (two rank ports),
// or selected by label through role pod.
type kind int

const (
	poolA kind = iota
	poolB
	labeled
)

// pod is one pod of the test's fleet and the nodes it makes.
type pod struct {
	ns, name string
	kind     kind
	ip       string
	ports    []int
	model    string
	engine   string
	servers  []*http.Server
}

// ids are the node ids the default relabeling gives pod.
func (p *pod) ids() []string {
	var out []string
	for _, port := range p.ports {
		out = append(out, p.ns+"/"+p.name+":"+strconv.Itoa(port))
	}
	return out
}

// pool is the pool label pod's nodes carry, "" for none.
func (p *pod) pool() string {
	switch p.kind {
	case poolA:
		return "pool-a"
	case poolB:
		return "pool-b"
	}
	return ""
}

// world is a control plane, simulated engines and the pods in front of
// them.
type world struct {
	t        testing.TB
	c        *kubetest.Cluster
	pools    dynamic.NamespaceableResourceInterface
	backends map[string][]*url.URL // by engine
	mu       sync.Mutex
	pods     map[string]*pod // by ns/name
	nextIP   int
	served   int // pods created so far, for round-robin
}

// newWorld starts the control plane (with the InferencePool CRD, a Node,
// namespaces inference and batch) and four simulated engines: two vLLM
// serving qwen3-8b and two SGLang serving llama-3.1-8b.
func newWorld(t testing.TB) *world {
	c := kubetest.Start(t, kubetest.Options{})
	c.InstallInferencePool(t)
	c.CreateNode(t, kubeNode, "127.0.0.1")
	c.Namespace(t, "inference")
	c.Namespace(t, "batch")

	base := simtest.Scenario(t, "schemas", 1)
	var nodes []sim.Node
	for _, n := range base.Nodes {
		for i := range 2 {
			switch n.Engine {
			case sim.VLLM:
				n.ID, n.Model = fmt.Sprintf("vllm-%d", i), modelVLLM
			case sim.SGLang:
				n.ID, n.Model = fmt.Sprintf("sglang-%d", i), modelSGLang
			default:
				continue
			}
			nodes = append(nodes, n)
		}
	}
	base.Nodes = nodes
	base.Warmup = sim.SeedWarmup
	fl, _ := simtest.Start(t, base)
	w := &world{t: t, c: c, pools: dynamic.NewForConfigOrDie(c.Config).Resource(kubetest.InferencePoolResource),
		backends: map[string][]*url.URL{}, pods: map[string]*pod{}, nextIP: 10}
	for _, n := range fl.FleetFile().Nodes {
		u, err := url.Parse(strings.TrimSuffix(n.URL, "/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		w.backends[n.Engine] = append(w.backends[n.Engine], u)
	}
	if len(w.backends["vllm"]) != 2 || len(w.backends["sglang"]) != 2 {
		t.Fatalf("simulated engines %v, want two vllm and two sglang", w.backends)
	}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, p := range w.pods {
			p.close()
		}
	})
	return w
}

// createPools creates pool-a in inference (app=qwen, port 8000) and
// pool-b in batch (app=llama, rank ports 8000 and 8001).
func (w *world) createPools() {
	for _, p := range []struct {
		ns, name, app string
		ports         []any
	}{
		{"inference", "pool-a", "qwen", []any{map[string]any{"number": int64(8000)}}},
		{"batch", "pool-b", "llama", []any{map[string]any{"number": int64(8000)}, map[string]any{"number": int64(8001)}}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "inference.networking.k8s.io/v1",
			"kind":       "InferencePool",
			"metadata":   map[string]any{"name": p.name, "namespace": p.ns},
			"spec": map[string]any{
				"selector":    map[string]any{"matchLabels": map[string]any{"app": p.app}},
				"targetPorts": p.ports,
			},
		}}
		if _, err := w.pools.Namespace(p.ns).Create(w.t.Context(), u, metav1.CreateOptions{}); err != nil {
			w.t.Fatalf("create InferencePool %s/%s: %v", p.ns, p.name, err)
		}
	}
}

// addPod starts the proxies of a new pod of kind k in ns, then creates it
// and marks it Ready with its IP, as a kubelet would once its engine
// answers. Pool pods get the next loopback address of 127.0.0.10 on;
// labeled pods 127.0.0.1 with a port of their own, named metrics.
func (w *world) addPod(ns, name string, k kind) *pod {
	t := w.t
	w.mu.Lock()
	p := &pod{ns: ns, name: name, kind: k}
	switch k {
	case poolA:
		p.model, p.engine = modelVLLM, "vllm"
	case poolB:
		p.model, p.engine = modelSGLang, "sglang"
	default:
		p.model, p.engine = modelVLLM, "vllm"
		if w.served%2 == 1 {
			p.model, p.engine = modelSGLang, "sglang"
		}
	}
	backend := w.backends[p.engine][w.served%2]
	w.served++
	var lns []net.Listener
	switch k {
	case labeled:
		p.ip = "127.0.0.1"
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			w.mu.Unlock()
			t.Fatal(err)
		}
		lns = append(lns, ln)
		p.ports = []int{ln.Addr().(*net.TCPAddr).Port}
	default:
		p.ip = fmt.Sprintf("127.0.0.%d", w.nextIP)
		w.nextIP++
		p.ports = []int{8000}
		if k == poolB {
			p.ports = append(p.ports, 8001)
		}
		for _, port := range p.ports {
			ln, err := net.Listen("tcp", net.JoinHostPort(p.ip, strconv.Itoa(port)))
			if err != nil {
				w.mu.Unlock()
				t.Fatalf("listen on %s:%d, the pod's address (Linux routes 127.0.0.0/8 to lo): %v", p.ip, port, err)
			}
			lns = append(lns, ln)
		}
	}
	for _, ln := range lns {
		srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(backend), ReadHeaderTimeout: 5 * time.Second}
		p.servers = append(p.servers, srv)
		go func() { _ = srv.Serve(ln) }()
	}
	w.pods[ns+"/"+name] = p
	w.mu.Unlock()

	labels := map[string]string{"model": p.model, "engine": p.engine}
	ctr := corev1.Container{Name: p.engine, Image: "engine"}
	switch k {
	case poolA:
		labels["app"] = "qwen"
	case poolB:
		labels["app"] = "llama"
	default:
		labels["app"] = "chat"
		ctr.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(p.ports[0])}}
	}
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: kubeNode, Containers: []corev1.Container{ctr}},
	}
	if _, err := w.c.Client.CoreV1().Pods(ns).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	w.c.MarkPodReady(t, ns, name, p.ip)
	return p
}

// deletePod deletes a pod at once (grace period 0: there is no kubelet to
// confirm a graceful stop) and stops its proxies.
func (w *world) deletePod(ns, name string) *pod {
	zero := int64(0)
	if err := w.c.Client.CoreV1().Pods(ns).Delete(w.t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		w.t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pods[ns+"/"+name]
	delete(w.pods, ns+"/"+name)
	p.close()
	return p
}

func (p *pod) close() {
	for _, s := range p.servers {
		_ = s.Close()
	}
}

// want is every node the pods make, by id.
func (w *world) want() map[string]*pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]*pod{}
	for _, p := range w.pods {
		for _, id := range p.ids() {
			out[id] = p
		}
	}
	return out
}

// writeDiscovery writes the discovery file: job pools (role
// inferencepool) and job pods (role pod), both every namespace, the
// default rules, the admin kubeconfig.
func writeDiscovery(t testing.TB, kubeconfig string) string {
	path := filepath.Join(t.TempDir(), "discovery.yaml")
	data := fmt.Sprintf(`scrape_configs:
  - job_name: pools
    kubernetes_sd_configs:
      - role: inferencepool
        kubeconfig_file: %[1]q
  - job_name: pods
    kubernetes_sd_configs:
      - role: pod
        kubeconfig_file: %[1]q
`, kubeconfig)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// listNodes is every node ListNodes lists, by id; nil when it does not
// answer.
func listNodes(ctx context.Context, c *client.Client) map[string]*llmdiagv1.Node {
	resp, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
	if err != nil {
		return nil
	}
	out := map[string]*llmdiagv1.Node{}
	for _, n := range resp.Msg.GetNodes() {
		out[n.GetId()] = n
	}
	return out
}

// mismatch says how listed differs from want (ids, model, engine, pool
// label), "" when it does not.
func mismatch(listed map[string]*llmdiagv1.Node, want map[string]*pod) string {
	var missing, extra, wrong []string
	for id, p := range want {
		n, ok := listed[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		engine := strings.ToLower(strings.TrimPrefix(n.GetEngine().String(), "ENGINE_"))
		if n.GetModel() != p.model || engine != p.engine || n.GetLabels()["pool"] != p.pool() || n.GetLabels()["namespace"] != p.ns {
			wrong = append(wrong, fmt.Sprintf("%s (model %q engine %s labels %v)", id, n.GetModel(), engine, n.GetLabels()))
		}
	}
	for id := range listed {
		if _, ok := want[id]; !ok {
			extra = append(extra, id)
		}
	}
	if len(missing)+len(extra)+len(wrong) == 0 {
		return ""
	}
	slices.Sort(missing)
	slices.Sort(extra)
	slices.Sort(wrong)
	return fmt.Sprintf("%d listed, %d wanted; missing %v; extra %v; wrong %v", len(listed), len(want), head(missing), head(extra), head(wrong))
}

func head(s []string) []string {
	if len(s) > 5 {
		return append(s[:5:5], fmt.Sprintf("… %d more", len(s)-5))
	}
	return s
}
