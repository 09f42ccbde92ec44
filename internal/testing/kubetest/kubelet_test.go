package kubetest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPodReady: the Ready condition as the kubelet generates it, from the
// containers' readiness and the readiness gates' conditions.
func TestPodReady(t *testing.T) {
	const gate = "llmdiag.io/routable"
	pod := func(ready []bool, gates []string, conds map[string]corev1.ConditionStatus) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		for i, r := range ready {
			name := string(rune('a' + i))
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: name})
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Ready: r})
		}
		for _, g := range gates {
			p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: corev1.PodConditionType(g)})
		}
		for typ, st := range conds {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodConditionType(typ), Status: st})
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		status  corev1.ConditionStatus
		reason  string
		message string
	}{
		{"containers ready, no gate", pod([]bool{true, true}, nil, nil), corev1.ConditionTrue, "", ""},
		{"a container not ready", pod([]bool{true, false}, []string{gate}, map[string]corev1.ConditionStatus{gate: corev1.ConditionTrue}),
			corev1.ConditionFalse, ReasonContainersNotReady, "containers with unready status: [b]"},
		{"the gate's condition absent", pod([]bool{true}, []string{gate}, nil),
			corev1.ConditionFalse, ReasonReadinessGatesNotReady, `corresponding condition of pod readiness gate "llmdiag.io/routable" does not exist.`},
		{"the gate False", pod([]bool{true}, []string{gate}, map[string]corev1.ConditionStatus{gate: corev1.ConditionFalse}),
			corev1.ConditionFalse, ReasonReadinessGatesNotReady, `the status of pod readiness gate "llmdiag.io/routable" is not "True", but False`},
		{"the gate True", pod([]bool{true}, []string{gate}, map[string]corev1.ConditionStatus{gate: corev1.ConditionTrue}), corev1.ConditionTrue, "", ""},
		{"two gates, one Unknown", pod([]bool{true}, []string{gate, "example.com/b"}, map[string]corev1.ConditionStatus{gate: corev1.ConditionTrue, "example.com/b": corev1.ConditionUnknown}),
			corev1.ConditionFalse, ReasonReadinessGatesNotReady, `the status of pod readiness gate "example.com/b" is not "True", but Unknown`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := PodReady(tc.pod)
			if c.Type != corev1.PodReady || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message {
				t.Errorf("PodReady = %+v, want %s %q %q", c, tc.status, tc.reason, tc.message)
			}
		})
	}
	succeeded := pod([]bool{true}, nil, nil)
	succeeded.Status.Phase = corev1.PodSucceeded
	if c := PodReady(succeeded); c.Status != corev1.ConditionFalse || c.Reason != ReasonPodCompleted {
		t.Errorf("succeeded pod: %+v, want False %s", c, ReasonPodCompleted)
	}
}
