package deploy_test

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/kubetest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

const (
	gateCondition = "llmdiag.io/routable"
	gatedNS       = "gated"
	gateNS        = "llmdiag" // llmdiag's own namespace: its Lease
)

// TestReadinessGateRBAC proves the readiness gate's rules of
// deploy/base/rbac.yaml (read from the rendered single overlay: the
// ClusterRole llmdiag-readiness-gate and the Role of the same name) are
// what serve --readiness-gate needs, as it runs in the cluster: a
// ServiceAccount token bound to discovery's ClusterRole, the gate's
// ClusterRole and, in llmdiag's namespace, the gate's Role. With every
// rule, the gate takes its Lease and writes the condition of a new gated
// pod, with no refused call. Then, for each verb of the gate's rules, the
// same run with that one verb taken away reports the failure it causes:
// without patch on pods/status a failed write
// (llmdiag_readiness_gate_writes_total{result="error"}), without create,
// get or update on leases a refused Lease call of that op
// (llmdiag_readiness_gate_lease_errors_total{op}): no permission is
// granted that the gate does not use.
func TestReadinessGateRBAC(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts etcd and kube-apiserver, and serve")
	}
	m := decode(t, render(t, overlays[0].dir))
	disco, gate, _, _ := roles(m)
	if disco == nil || gate == nil || len(m.roles) != 1 {
		t.Fatalf("the single overlay lacks discovery's or the readiness gate's roles")
	}
	leaseRules := m.roles[0].Rules
	lease := gate.Name // the Role's one Lease is named as the roles
	c := kubetest.Start(t, kubetest.Options{})
	c.CreateNode(t, "node-a", "10.0.0.1")
	c.Namespace(t, gatedNS)
	c.Namespace(t, gateNS)

	n := 0
	run := func(t *testing.T, gateRules, leases []rbacv1.PolicyRule) (*gateServing, string) {
		n++
		name := fmt.Sprintf("gate-%d", n)
		// A new gated pod, with no condition yet: the gate must write one.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "engine"}},
			Spec: corev1.PodSpec{NodeName: "node-a", ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gateCondition}},
				Containers: []corev1.Container{{Name: "engine", Image: "vllm", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: enginePort}}}}},
		}
		if _, err := c.Client.CoreV1().Pods(gatedNS).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.MarkPodReady(t, gatedNS, name, fmt.Sprintf("192.0.2.%d", n)) // TEST-NET-1: nothing answers
		// No Lease yet: the gate must create it.
		if err := c.Client.CoordinationV1().Leases(gateNS).Delete(t.Context(), lease, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		sa := c.ServiceAccount(t, gateNS, name)
		subject := kubetest.ServiceAccountSubject(gateNS, name)
		c.Grant(t, "", name, subject, append(slices.Clone(disco.Rules), gateRules...)...)
		c.Grant(t, gateNS, name, subject, leases...)
		kc := c.WriteKubeconfig(t, sa, name+".kubeconfig")
		sd := clitest.WriteFile(t, "discovery.yaml", fmt.Sprintf("scrape_configs:\n  - job_name: pods\n    kubernetes_sd_configs:\n      - role: pod\n        kubeconfig_file: %s\n        namespaces: {names: [%s]}\n", kc, gatedNS))
		addr, metrics := testkit.FreeAddr(t), testkit.FreeAddr(t)
		log := clitest.Background(t, nil, "serve", "--listen", addr, "--metrics-listen", metrics, "--discovery", sd,
			"--discovery-debounce", "200ms", "--interval", "1s", "--scrape-timeout", "500ms", "--log-level", "debug",
			"--readiness-gate", gateCondition, "--readiness-gate-lease", gateNS+"/"+lease, "--readiness-gate-grace", "0s",
			"--readiness-gate-lease-duration", "3s")
		return &gateServing{metrics: "http://" + metrics + "/metrics", log: log}, name
	}
	condition := func(t *testing.T, pod string) *corev1.PodCondition {
		p, err := c.Client.CoreV1().Pods(gatedNS).Get(t.Context(), pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Status.Conditions {
			if string(p.Status.Conditions[i].Type) == gateCondition {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}

	t.Run("every rule", func(t *testing.T) {
		s, pod := run(t, gate.Rules, leaseRules)
		last := ""
		clitest.WaitFor(t, "the gate to hold its Lease and write "+pod+"'s condition", rbacBound, func() bool {
			last = s.log.String()
			return s.metric(`llmdiag_readiness_gate_leader`) == 1 && condition(t, pod) != nil
		}, &last)
		t.Logf("%s: %+v", pod, *condition(t, pod))
		for _, series := range []string{`llmdiag_readiness_gate_writes_total{result="error"}`, `llmdiag_readiness_gate_lease_errors_total{op="get"}`,
			`llmdiag_readiness_gate_lease_errors_total{op="create"}`, `llmdiag_readiness_gate_lease_errors_total{op="update"}`} {
			if v := s.metric(series); v != 0 {
				t.Errorf("%s = %v with every rule, want 0\n%s", series, v, s.log.String())
			}
		}
	})

	type cut struct {
		rules  []rbacv1.PolicyRule
		lease  bool // a rule of the Role, else of the ClusterRole
		ri     int
		verb   string
		series string
	}
	var cuts []cut
	for ri, r := range gate.Rules {
		for _, v := range r.Verbs {
			cuts = append(cuts, cut{gate.Rules, false, ri, v, `llmdiag_readiness_gate_writes_total{result="error"}`})
		}
	}
	for ri, r := range leaseRules {
		for _, v := range r.Verbs {
			cuts = append(cuts, cut{leaseRules, true, ri, v, fmt.Sprintf(`llmdiag_readiness_gate_lease_errors_total{op=%q}`, v)})
		}
	}
	for _, k := range cuts {
		res := strings.Join(k.rules[k.ri].Resources, ",")
		t.Run("without "+k.verb+" "+res, func(t *testing.T) {
			gateRules, leases := gate.Rules, leaseRules
			if k.lease {
				leases = withoutVerb(leaseRules, k.ri, k.verb)
			} else {
				gateRules = withoutVerb(gate.Rules, k.ri, k.verb)
			}
			s, _ := run(t, gateRules, leases)
			last := ""
			clitest.WaitFor(t, fmt.Sprintf("%s > 0 without %s on %s", k.series, k.verb, res), rbacBound, func() bool {
				last = s.log.String()
				return s.metric(k.series) > 0
			}, &last)
			for line := range strings.Lines(s.log.String()) {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "readiness gate") {
					t.Logf("serve warned: %s", strings.TrimSpace(line))
					break
				}
			}
		})
	}
}

// withoutVerb is rules with verb taken off rules[ri], the rule left out
// when it has no verb left; resource names are kept.
func withoutVerb(rules []rbacv1.PolicyRule, ri int, verb string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for i, r := range rules {
		r = *r.DeepCopy()
		if i == ri {
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
		}
		if len(r.Verbs) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// gateServing is one serve --readiness-gate run.
type gateServing struct {
	metrics string
	log     *testkit.SyncBuffer
}

// metric is the value of the series (name and labels as exposed) on
// --metrics-listen, -1 when it is not there.
func (s *gateServing) metric(series string) float64 {
	resp, err := http.Get(s.metrics)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
