package discovery_test

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	yamlv2 "go.yaml.in/yaml/v2"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/fleetsd"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/kubetest"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// sameTarget is one target as both sides are compared: a Prometheus
// target after relabeling, or an llmdiag node, in the shape fleetsd gives
// a target (fleetsd's package comment):
//
//   - id: llmdiag's node id; for Prometheus the label node, else the
//     target's address (host:port of its scrape URL), llmdiag's default id
//     for a target that is not a Kubernetes pod (every Kubernetes case here
//     sets node, by its rules or the default ones).
//   - url: Prometheus's scrapeUrl; llmdiag's node URL.
//   - model, engine, role: Prometheus's labels of those names; llmdiag's
//     node fields (engine and role as the names fleet.EngineName and
//     fleet.RoleName give). Without the label llmdiag's field is what the
//     engine reports, which Prometheus has no label for: not compared.
//   - labels: every other label of the Prometheus target (job included;
//     no __ label: /api/v1/targets shows none), except instance when it is
//     the target's address (llmdiag drops it: the URL holds it); llmdiag's
//     node labels. An instance rewritten by relabeling stays a label on
//     both sides.
//   - dcgm_url sets the node's DCGM exporter URL, which ListNodes does not
//     show: a target with that label cannot be compared, and none of these
//     cases gives one.
type sameTarget struct {
	ID, URL, Model, Engine, Role string
	Labels                       map[string]string
}

func (s sameTarget) String() string {
	keys := slices.Sorted(maps.Keys(s.Labels))
	var ls []string
	for _, k := range keys {
		ls = append(ls, k+"="+strconv.Quote(s.Labels[k]))
	}
	return fmt.Sprintf("%s url=%s model=%q engine=%q role=%q {%s}", s.ID, s.URL, s.Model, s.Engine, s.Role, strings.Join(ls, ", "))
}

// fromPrometheus maps one of Prometheus's active targets.
func fromPrometheus(scrapeURL string, labels map[string]string) (sameTarget, error) {
	u, err := url.Parse(scrapeURL)
	if err != nil {
		return sameTarget{}, err
	}
	ls := maps.Clone(labels)
	s := sameTarget{URL: scrapeURL, ID: u.Host}
	take := func(name string, into *string) {
		if v, ok := ls[name]; ok {
			*into = v
			delete(ls, name)
		}
	}
	take(fleetsd.LabelNode, &s.ID)
	take(fleetsd.LabelModel, &s.Model)
	take(fleetsd.LabelEngine, &s.Engine)
	take(fleetsd.LabelRole, &s.Role)
	if _, ok := ls[fleetsd.LabelDCGMURL]; ok {
		return s, fmt.Errorf("target %s has a %s label, which ListNodes does not show", scrapeURL, fleetsd.LabelDCGMURL)
	}
	if ls["instance"] == u.Host {
		delete(ls, "instance")
	}
	s.Labels = ls
	return s, nil
}

// fromLLMDiag maps one of llmdiag's nodes; like, its Prometheus
// counterpart (ok false when there is none), says which of model, engine
// and role are compared.
func fromLLMDiag(n *llmdiagv1.Node, like sameTarget, ok bool) sameTarget {
	s := sameTarget{ID: n.GetId(), URL: n.GetUrl(), Labels: maps.Clone(n.GetLabels())}
	if like.Model != "" || !ok {
		s.Model = n.GetModel()
	}
	if like.Engine != "" || !ok {
		s.Engine = fleet.EngineName(n.GetEngine())
	}
	if like.Role != "" || !ok {
		s.Role = fleet.RoleName(n.GetRole())
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	return s
}

// sameCase is one discovery file given to both.
type sameCase struct {
	name string
	// kube says the case discovers from the Kubernetes API server (and
	// runs the Prometheus promtest.KubernetesSD returns; the others run
	// promtest's usual one, the Debian package's).
	kube bool
	// setup makes the case's objects and returns the discovery file.
	setup func(t *testing.T, env *sameEnv) string
	// prometheus turns the file's jobs into Prometheus's; nil gives them
	// as they are.
	prometheus func(t *testing.T, jobs []map[string]any)
	// wantActive and wantDropped are how many targets Prometheus keeps and
	// drops.
	wantActive, wantDropped int
}

// sameEnv is what the cases share: a simulated fleet (its engines serve
// every target's /metrics) and, for the Kubernetes cases, an API server.
type sameEnv struct {
	dir   string
	nodes []fleet.Node // the simulated engines, by id
	kube  *kubetest.Cluster
}

// addr is the host:port of the i-th simulated engine.
func (e *sameEnv) addr(i int) string {
	return strings.TrimSuffix(strings.TrimPrefix(e.nodes[i].URL, "http://"), "/metrics")
}

func (e *sameEnv) port(t *testing.T, i int) int32 {
	_, p, _ := strings.Cut(e.addr(i), ":")
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// pod creates a pod on node gpu-a with podIP 127.0.0.1, Ready.
func (e *sameEnv) pod(t *testing.T, ns, name string, labels, annotations map[string]string, containers ...corev1.Container) {
	t.Helper()
	for i := range containers {
		containers[i].Image = "vllm/vllm-openai"
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: "gpu-a", Containers: containers},
	}
	if _, err := e.kube.Client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kube.MarkPodReady(t, ns, name, "127.0.0.1")
}

func ports(ps ...any) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for i := 0; i+1 < len(ps); i += 2 {
		out = append(out, corev1.ContainerPort{Name: ps[i].(string), ContainerPort: ps[i+1].(int32)})
	}
	return out
}

// unusedPort is a container port nothing scrapes: every target on it is
// dropped by relabeling.
const unusedPort, unusedPort2 int32 = 9, 19

var sameCases = []sameCase{
	{
		name: "file_sd with relabel_configs",
		setup: func(t *testing.T, e *sameEnv) string {
			var b strings.Builder
			for i, n := range e.nodes {
				fmt.Fprintf(&b, "- targets: [%q]\n  labels: {served: %q, engine: %q, squad: %q", e.addr(i), n.Model, n.Engine, []string{"a", "b"}[i%2])
				if i != 3 { // without a node label: the address is its id
					fmt.Fprintf(&b, ", id: %q", n.ID)
				}
				if i == len(e.nodes)-1 {
					b.WriteString(", retired: \"yes\"")
				}
				b.WriteString("}\n")
			}
			targets := filepath.Join(e.dir, "targets.yaml")
			if err := os.WriteFile(targets, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf(`scrape_configs:
  - job_name: files
    file_sd_configs:
      - files: [%q]
    relabel_configs:
      - source_labels: [retired]
        regex: "yes"
        action: drop
      - source_labels: [id]
        target_label: node
      - source_labels: [served]
        target_label: model
      - source_labels: [squad]
        regex: (.+)
        replacement: team-$1
        target_label: team
      - action: labeldrop
        regex: id|served|squad
`, targets)
		},
		wantActive: 4, wantDropped: 1,
	},
	{
		name: "kubernetes role pod with relabel_configs",
		kube: true,
		setup: func(t *testing.T, e *sameEnv) string {
			const ns = "explicit"
			e.kube.Namespace(t, ns)
			for i := range 3 {
				n := e.nodes[i]
				labels := map[string]string{"llm-model": n.Model, "engine": n.Engine, "team": []string{"a", "b"}[i%2]}
				cs := []corev1.Container{{Name: "engine", Ports: ports("metrics", e.port(t, i), "grpc", unusedPort)}}
				if i == 0 {
					cs = append(cs, corev1.Container{Name: "sidecar", Ports: ports("admin", unusedPort2)})
				}
				e.pod(t, ns, fmt.Sprintf("engine-%d", i), labels, nil, cs...)
			}
			// No port named metrics: dropped.
			e.pod(t, ns, "gateway", map[string]string{"team": "a"}, nil, corev1.Container{Name: "gw", Ports: ports("grpc", unusedPort)})
			return fmt.Sprintf(`scrape_configs:
  - job_name: pods
    kubernetes_sd_configs:
      - role: pod
        kubeconfig_file: %q
        namespaces: {names: [%s]}
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_container_port_name]
        regex: metrics
        action: keep
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: node
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: instance
      - source_labels: [__meta_kubernetes_pod_label_llm_model]
        target_label: model
      - source_labels: [__meta_kubernetes_pod_label_engine]
        target_label: engine
      - source_labels: [__meta_kubernetes_pod_label_team]
        target_label: team
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_node_name]
        target_label: k8s_node
`, e.kube.Kubeconfig, ns)
		},
		wantActive: 3, wantDropped: 5, // engine-0's grpc and admin, engine-1's and engine-2's grpc, the gateway's grpc
	},
	{
		name: "kubernetes role pod with the default rules",
		kube: true,
		setup: func(t *testing.T, e *sameEnv) string {
			const ns = "defaults"
			e.kube.Namespace(t, ns)
			n0, n1 := e.nodes[0], e.nodes[1]
			// Port metrics, and grpc (dropped).
			e.pod(t, ns, "vllm-0", map[string]string{"app.kubernetes.io/name": "vllm", "model": n0.Model, "engine": n0.Engine, "team": "a"}, nil,
				corev1.Container{Name: "engine", Ports: ports("metrics", e.port(t, 0), "grpc", unusedPort)})
			// Port http, the label app.
			e.pod(t, ns, "vllm-1", map[string]string{"app": "inference", "engine": n1.Engine}, nil,
				corev1.Container{Name: "engine", Ports: ports("http", e.port(t, 1))})
			// Annotated: scraped on the annotation's port and path; its
			// two ports become the same target, which both keep once.
			e.pod(t, ns, "annotated", map[string]string{"team": "b"},
				map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": strconv.Itoa(int(e.port(t, 2))), "prometheus.io/path": "/metrics"},
				corev1.Container{Name: "engine", Ports: ports("api", unusedPort, "http", unusedPort2)})
			// Annotated out: dropped though its port is named metrics.
			e.pod(t, ns, "opted-out", map[string]string{"team": "b"}, map[string]string{"prometheus.io/scrape": "false"},
				corev1.Container{Name: "engine", Ports: ports("metrics", e.port(t, 0))})
			return fmt.Sprintf(`scrape_configs:
  - job_name: pods
    kubernetes_sd_configs:
      - role: pod
        kubeconfig_file: %q
        namespaces: {names: [%s]}
`, e.kube.Kubeconfig, ns)
		},
		// Prometheus gets llmdiag's default rules for the role, copied from
		// fleetsd.Defaults: they are plain Prometheus relabeling.
		prometheus: func(t *testing.T, jobs []map[string]any) {
			b, err := yamlv2.Marshal(fleetsd.Defaults()["pod"])
			if err != nil {
				t.Fatal(err)
			}
			var rules []any
			if err := yaml.Unmarshal(b, &rules); err != nil {
				t.Fatal(err)
			}
			jobs[0]["relabel_configs"] = rules
		},
		wantActive: 3, wantDropped: 2, // vllm-0's grpc, opted-out
	},
}

// TestSameTargetsAsPrometheus gives one discovery file's scrape_configs to
// a real Prometheus and to `llmdiag serve --discovery`, and compares
// Prometheus's targets (/api/v1/targets: each active target's scrape URL
// and labels, how many were dropped) with llmdiag's nodes (ListNodes), as
// sameTarget maps them: the same file finds the same targets with the
// same labels.
func TestSameTargetsAsPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real Prometheus, a Kubernetes API server and llmdiag serve over the same discovery file")
	}
	_, fleetPath := simtest.Start(t, simtest.Scenario(t, "seed", 1))
	f, err := fleet.Load(fleetPath)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(f.Nodes, func(a, b fleet.Node) int { return strings.Compare(a.ID, b.ID) })
	var kube *kubetest.Cluster
	if slices.ContainsFunc(sameCases, func(c sameCase) bool { return c.kube }) {
		kube = kubetest.Start(t, kubetest.Options{})
		kube.CreateNode(t, "gpu-a", "127.0.0.1")
	}
	for _, tc := range sameCases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			env := &sameEnv{dir: t.TempDir(), nodes: f.Nodes, kube: kube}
			file := tc.setup(t, env)
			path := filepath.Join(env.dir, "discovery.yaml")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				ScrapeConfigs []map[string]any `yaml:"scrape_configs"`
			}
			if err := yaml.Unmarshal([]byte(file), &doc); err != nil {
				t.Fatal(err)
			}
			if tc.prometheus != nil {
				tc.prometheus(t, doc.ScrapeConfigs)
			}
			jobs, err := yaml.Marshal(doc.ScrapeConfigs)
			if err != nil {
				t.Fatal(err)
			}
			opts := promtest.Options{ExtraScrapeConfigs: string(jobs)}
			if tc.kube {
				// The Debian package's Prometheus has no Kubernetes
				// discovery: a build of the Prometheus module's.
				opts.Binary = promtest.KubernetesSD(t)
			}
			prom := promtest.Start(t, opts)

			addr := testkit.FreeAddr(t)
			clitest.Background(t, nil, "serve", "--listen", addr, "--discovery", path, "--discovery-debounce", "200ms",
				"--interval", "1s", "--scrape-timeout", "800ms", "--log-level", "warn")
			c, err := client.New("http://" + addr)
			if err != nil {
				t.Fatal(err)
			}

			// Prometheus: every target found, those kept up.
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			var want []sameTarget
			var last string
			clitest.WaitFor(t, fmt.Sprintf("Prometheus to keep %d targets, all up, and drop %d", tc.wantActive, tc.wantDropped), 60*time.Second, func() bool {
				res, err := prom.API().Targets(ctx)
				if err != nil {
					last = err.Error()
					return false
				}
				want = want[:0]
				up := 0
				var lines []string
				for _, at := range res.Active {
					ls := map[string]string{}
					for k, v := range at.Labels {
						ls[string(k)] = string(v)
					}
					s, err := fromPrometheus(at.ScrapeURL, ls)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, s)
					if at.Health == "up" {
						up++
					}
					lines = append(lines, fmt.Sprintf("%s (%s %s)", s, at.Health, at.LastError))
				}
				last = fmt.Sprintf("%d active, %d up, %d dropped:\n%s", len(res.Active), up, len(res.Dropped), strings.Join(lines, "\n"))
				return len(res.Active) == tc.wantActive && up == tc.wantActive && len(res.Dropped) == tc.wantDropped
			}, &last)
			slices.SortFunc(want, func(a, b sameTarget) int { return strings.Compare(a.ID, b.ID) })
			byID := map[string]sameTarget{}
			for _, w := range want {
				byID[w.ID] = w
			}

			// llmdiag: the same targets, the same labels.
			var got []sameTarget
			same := func() bool {
				resp, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
				if err != nil {
					return false
				}
				got = got[:0]
				for _, n := range resp.Msg.GetNodes() {
					like, ok := byID[n.GetId()]
					got = append(got, fromLLMDiag(n, like, ok))
				}
				slices.SortFunc(got, func(a, b sameTarget) int { return strings.Compare(a.ID, b.ID) })
				return slices.EqualFunc(got, want, func(a, b sameTarget) bool { return a.String() == b.String() })
			}
			w := testkit.Wait{For: 30 * time.Second, Every: 100 * time.Millisecond}
			w.Last = func() string { return "\nllmdiag:\n" + list(got) + "\nPrometheus:\n" + list(want) }
			w.Until(t, "llmdiag's nodes to be Prometheus's targets", same)
			t.Logf("%d targets the same on both sides (%d dropped) in %v:\n%s", len(want), tc.wantDropped, time.Since(start).Round(time.Millisecond), list(want))
		})
	}
}

func list(ts []sameTarget) string {
	var b strings.Builder
	for _, s := range ts {
		b.WriteString("  " + s.String() + "\n")
	}
	return b.String()
}
