package deploy_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	clientfeatures "k8s.io/client-go/features"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/kubetest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// discoveryJobs are the jobs of the discovery file TestDiscoveryRBAC runs
// serve with, one per kind of Kubernetes discovery, each in a namespace
// of its own (so that each finds its own pods), and the resources each
// reads: Prometheus's pod role watches pods; its endpointslice role
// EndpointSlices, their Services and pods; the inferencepool role
// InferencePools and pods.
var discoveryJobs = []struct {
	job, role string
	reads     []string
}{
	{"pods", "pod", []string{"pods"}},
	{"slices", "endpointslice", []string{"endpointslices", "services", "pods"}},
	{"pools", "inferencepool", []string{"inferencepools", "pods"}},
}

// rbacBound bounds each wait of TestDiscoveryRBAC: discovery answers
// within a debounce (200 ms) of the API server's, so this only guards
// against two busy cores.
const rbacBound = 30 * time.Second

// TestDiscoveryRBAC proves the ClusterRole of deploy/base/rbac.yaml (read
// from the rendered single overlay) is what serve --discovery needs, as
// it runs in the cluster: a ServiceAccount token bound to exactly those
// rules, a pod, an endpointslice and an inferencepool job. With every
// rule, serve lists each job's pods (unreachable: listed DOWN), follows
// pods added later (the watches work) and reports no discovery failure
// (llmdiag_discovery_failing and _failures_total 0 on --metrics-listen).
// Then, for each verb of each resource of the role, the same run with
// that one verb taken away reports the jobs that read the resource
// failing (llmdiag_discovery_failures_total), within a second: no
// permission is granted that discovery does not use. (get is not in the
// role: the informers list and watch, and never get one object; with it
// taken away discovery did not notice.)
func TestDiscoveryRBAC(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts etcd, kube-apiserver and kube-controller-manager, and serve")
	}
	disco, _, _, _ := roles(decode(t, render(t, overlays[0].dir)))
	rules := disco.Rules
	c := kubetest.Start(t, kubetest.Options{ControllerManager: true})
	c.InstallInferencePool(t)
	c.CreateNode(t, "node-a", "10.0.0.1")
	k := &kubeFleet{c: c}
	for _, j := range discoveryJobs {
		c.Namespace(t, j.job)
	}
	for i := range 2 {
		for _, j := range discoveryJobs {
			k.pod(t, j.job, fmt.Sprintf("engine-%d", i))
		}
	}
	k.service(t, "slices")
	k.pool(t, "pools")

	t.Run("every rule", func(t *testing.T) {
		s := k.serve(t, "disco-all", rules)
		s.waitNodes(t, k.ids())
		// Pods added now are found through the watches.
		for _, j := range discoveryJobs {
			k.pod(t, j.job, "engine-late")
		}
		s.waitNodes(t, k.ids())
		for _, j := range discoveryJobs {
			for _, m := range []string{"llmdiag_discovery_failing", "llmdiag_discovery_failures_total"} {
				if v := s.metric(t, m, j.job); v != "0" {
					t.Errorf("%s{job=%q} = %s, want 0: discovery failed with every rule of the role\n%s", m, j.job, v, s.log.String())
				}
			}
		}
	})

	n := 0
	for ri, r := range rules {
		for _, res := range r.Resources {
			for _, verb := range r.Verbs {
				n++
				t.Run("without "+verb+" "+res, func(t *testing.T) {
					if verb == "list" {
						// client-go lists through a WATCH (a streaming
						// list) where the API server serves one, as
						// kubetest's does, and falls back to LIST where
						// it does not: take that path.
						noWatchList(t)
					}
					s := k.serve(t, fmt.Sprintf("disco-%d", n), without(rules, ri, res, verb))
					var jobs []string
					for _, j := range discoveryJobs {
						if slices.Contains(j.reads, res) {
							jobs = append(jobs, j.job)
						}
					}
					last := ""
					clitest.WaitFor(t, fmt.Sprintf("jobs %v to report a discovery failure without %s on %s", jobs, verb, res), rbacBound, func() bool {
						var got []string
						failed := true
						for _, j := range jobs {
							v := s.metric(t, "llmdiag_discovery_failures_total", j)
							got = append(got, j+"="+v)
							failed = failed && v != "" && v != "0"
						}
						last = "llmdiag_discovery_failures_total " + strings.Join(got, " ") + "\n" + s.log.String()
						return failed
					}, &last)
				})
			}
		}
	}
}

// noWatchList turns client-go's WatchListClient off in this process until
// t ends: its informers then LIST, then WATCH, as against an API server
// that serves no streaming lists.
func noWatchList(t *testing.T) {
	prev := clientfeatures.FeatureGates()
	clientfeatures.ReplaceFeatureGates(withoutWatchList{prev})
	t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(prev) })
}

type withoutWatchList struct{ clientfeatures.Gates }

func (g withoutWatchList) Enabled(f clientfeatures.Feature) bool {
	return f != clientfeatures.WatchListClient && g.Gates.Enabled(f)
}

// without is rules with verb taken off res in rules[ri], one rule per
// resource (a resource left with no verb is left out).
func without(rules []rbacv1.PolicyRule, ri int, res, verb string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for i, r := range rules {
		for _, x := range r.Resources {
			verbs := slices.Clone(r.Verbs)
			if i == ri && x == res {
				verbs = slices.DeleteFunc(verbs, func(v string) bool { return v == verb })
			}
			if len(verbs) > 0 {
				out = append(out, rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: []string{x}, Verbs: verbs})
			}
		}
	}
	return out
}

// kubeFleet is TestDiscoveryRBAC's cluster: engine pods on node-a, a
// Service over the slices namespace's, an InferencePool over the pools
// namespace's.
type kubeFleet struct {
	c    *kubetest.Cluster
	pods []string // namespace/name
}

const enginePort = 8000

func (k *kubeFleet) pod(t *testing.T, ns, name string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "engine"}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{
			Name: "engine", Image: "vllm",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: enginePort}},
		}}},
	}
	if _, err := k.c.Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// 192.0.2.0/24 (TEST-NET-1): nothing answers there.
	k.c.MarkPodReady(t, ns, name, fmt.Sprintf("192.0.2.%d", len(k.pods)+1))
	k.pods = append(k.pods, ns+"/"+name)
}

func (k *kubeFleet) service(t *testing.T, ns string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "engine"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "engine"},
			Ports:    []corev1.ServicePort{{Name: "metrics", Port: enginePort}},
		},
	}
	if _, err := k.c.Client.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (k *kubeFleet) pool(t *testing.T, ns string) {
	t.Helper()
	dc, err := dynamic.NewForConfig(k.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
		"metadata": map[string]any{"namespace": ns, "name": "engines"},
		"spec": map[string]any{
			"selector":    map[string]any{"matchLabels": map[string]any{"app": "engine"}},
			"targetPorts": []any{map[string]any{"number": int64(enginePort)}},
		},
	}}
	if _, err := dc.Resource(kubetest.InferencePoolResource).Namespace(ns).Create(t.Context(), pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ids are the node ids discovery must find: every pod's, on the engine
// port.
func (k *kubeFleet) ids() []string {
	var out []string
	for _, p := range k.pods {
		out = append(out, fmt.Sprintf("%s:%d", p, enginePort))
	}
	slices.Sort(out)
	return out
}

// serving is one serve --discovery run.
type serving struct {
	api     *client.Client
	metrics string
	log     *testkit.SyncBuffer
}

// serve runs serve --discovery with the discovery jobs, as the
// ServiceAccount name bound to rules alone.
func (k *kubeFleet) serve(t *testing.T, name string, rules []rbacv1.PolicyRule) *serving {
	t.Helper()
	sa := k.c.ServiceAccount(t, "default", name)
	k.c.Grant(t, "", name, kubetest.ServiceAccountSubject("default", name), rules...)
	kc := k.c.WriteKubeconfig(t, sa, name+".kubeconfig")
	var b strings.Builder
	b.WriteString("scrape_configs:\n")
	for _, j := range discoveryJobs {
		fmt.Fprintf(&b, "  - job_name: %s\n    kubernetes_sd_configs:\n      - role: %s\n        kubeconfig_file: %s\n        namespaces: {names: [%s]}\n", j.job, j.role, kc, j.job)
	}
	sd := clitest.WriteFile(t, "discovery.yaml", b.String())
	addr, metrics := testkit.FreeAddr(t), testkit.FreeAddr(t)
	log := clitest.Background(t, nil, "serve", "--listen", addr, "--metrics-listen", metrics, "--discovery", sd,
		"--discovery-debounce", "200ms", "--interval", "1s", "--scrape-timeout", "500ms", "--log-level", "debug")
	api, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	return &serving{api: api, metrics: "http://" + metrics + "/metrics", log: log}
}

// waitNodes waits until ListNodes lists exactly ids.
func (s *serving) waitNodes(t *testing.T, ids []string) {
	t.Helper()
	last := ""
	clitest.WaitFor(t, fmt.Sprintf("ListNodes to list %v", ids), rbacBound, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		resp, err := s.api.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
		if err != nil {
			last = err.Error()
			return false
		}
		var got []string
		for _, n := range resp.Msg.GetNodes() {
			got = append(got, n.GetId())
		}
		slices.Sort(got)
		last = fmt.Sprint(got) + "\n" + s.log.String()
		return slices.Equal(got, ids)
	}, &last)
}

// metric is the value of name{job="job"} on --metrics-listen, "" when it
// is not there.
func (s *serving) metric(t *testing.T, name, job string) string {
	t.Helper()
	resp, err := http.Get(s.metrics)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	want := fmt.Sprintf("%s{job=%q} ", name, job)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			return v
		}
	}
	return ""
}
