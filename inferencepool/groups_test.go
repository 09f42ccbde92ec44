package inferencepool

import (
	"testing"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)

func pool(ns, name string, sel map[string]string, ports ...int32) *infv1.InferencePool {
	p := &infv1.InferencePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.Selector.MatchLabels = map[infv1.LabelKey]infv1.LabelValue{}
	for k, v := range sel {
		p.Spec.Selector.MatchLabels[infv1.LabelKey(k)] = infv1.LabelValue(v)
	}
	for _, n := range ports {
		p.Spec.TargetPorts = append(p.Spec.TargetPorts, infv1.Port{Number: infv1.PortNumber(n)})
	}
	return p
}

func pod(ns, name, ip string, ready bool, labels map[string]string) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: map[string]string{"prometheus.io/port": "8000"}},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

// TestGroups: one group per pool; a target per selected pod with an IP
// and target port, in the pool's namespace only, with the pod's meta
// labels as the pod role writes them and the pool's.
func TestGroups(t *testing.T) {
	pools := []*infv1.InferencePool{
		pool("b", "dp", map[string]string{"app": "qwen"}, 8000, 8001),
		pool("a", "llama", map[string]string{"app": "llama", "tier": "gpu"}, 8000),
		pool("a", "empty", map[string]string{"app": "none"}, 8000),
	}
	pods := []*corev1.Pod{
		pod("a", "llama-1", "10.0.0.1", true, map[string]string{"app": "llama", "tier": "gpu", "app.kubernetes.io/name": "vllm"}),
		pod("a", "llama-0", "10.0.0.2", false, map[string]string{"app": "llama", "tier": "gpu"}),
		pod("a", "llama-cpu", "10.0.0.3", true, map[string]string{"app": "llama", "tier": "cpu"}),
		pod("a", "llama-pending", "", false, map[string]string{"app": "llama", "tier": "gpu"}),
		pod("b", "qwen-0", "10.1.0.1", true, map[string]string{"app": "qwen"}),
		pod("a", "qwen-elsewhere", "10.0.0.9", true, map[string]string{"app": "qwen"}),
	}
	gs := Groups(pools, pods)
	type want struct {
		source  string
		targets []string // address pod port index ready
	}
	wants := []want{
		{"inferencepool/a/empty", nil},
		{"inferencepool/a/llama", []string{"10.0.0.2:8000 llama-0 8000 0 false", "10.0.0.1:8000 llama-1 8000 0 true"}},
		{"inferencepool/b/dp", []string{"10.1.0.1:8000 qwen-0 8000 0 true", "10.1.0.1:8001 qwen-0 8001 1 true"}},
	}
	if len(gs) != len(wants) {
		t.Fatalf("%d groups, want %d", len(gs), len(wants))
	}
	for i, w := range wants {
		g := gs[i]
		if g.Source != w.source || len(g.Targets) != len(w.targets) {
			t.Fatalf("group %d: %s with %d targets, want %s with %d", i, g.Source, len(g.Targets), w.source, len(w.targets))
		}
		for j, tg := range g.Targets {
			got := string(tg[model.AddressLabel]) + " " + string(tg[PodNameLabel]) + " " + string(tg[PortLabel]) + " " + string(tg[PortIndexLabel]) + " " + string(tg[podReadyLabel])
			if got != w.targets[j] {
				t.Errorf("%s target %d: %q, want %q", g.Source, j, got, w.targets[j])
			}
		}
		if g.Labels[PoolLabel] == "" || g.Labels[NamespaceLabel] == "" {
			t.Errorf("%s: group labels %v", g.Source, g.Labels)
		}
	}
	tg := gs[1].Targets[1]
	for name, v := range map[model.LabelName]model.LabelValue{
		"__meta_kubernetes_pod_label_app_kubernetes_io_name":        "vllm",
		"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name": "true",
		"__meta_kubernetes_pod_annotation_prometheus_io_port":       "8000",
		"__meta_kubernetes_pod_node_name":                           "n1",
		"__meta_kubernetes_pod_phase":                               "Running",
	} {
		if tg[name] != v {
			t.Errorf("label %s = %q, want %q", name, tg[name], v)
		}
	}
}
