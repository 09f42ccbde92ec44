package readygate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/readygate"
	"github.com/llmdiag/llmdiag/store"
)

// verdicts is a readygate.Verdicts over records set by the test; Events
// wakes the gate when they change.
type verdicts struct {
	mu      sync.Mutex
	recs    map[string]*store.Record
	changed chan struct{}
}

func newVerdicts() *verdicts {
	return &verdicts{recs: map[string]*store.Record{}, changed: make(chan struct{}, 1)}
}

func (v *verdicts) set(pod string, routable bool) {
	status, cause := llmdiagv1.Status_STATUS_OK, llmdiagv1.Cause_CAUSE_HEALTHY
	if !routable {
		status, cause = llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_OVERLOADED
	}
	v.mu.Lock()
	v.recs[pod] = &store.Record{
		Node: &llmdiagv1.Node{Id: "ns/" + pod + ":8000", Model: "m", Status: status, RootCause: cause, Routable: routable,
			Labels: map[string]string{"namespace": "ns", "pod": pod}},
		Metrics:   &llmdiagv1.NodeMetrics{ObservedAt: timestamppb.Now()},
		Diagnosis: &llmdiagv1.Diagnosis{Summary: "verdict of " + pod},
	}
	v.mu.Unlock()
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

func (v *verdicts) List(context.Context) ([]*store.Record, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []*store.Record
	for _, r := range v.recs {
		out = append(out, r)
	}
	return out, nil
}

func (v *verdicts) LastToken(context.Context) (string, error) { return "", nil }

func (v *verdicts) Events(ctx context.Context, token string, _ int, wait time.Duration) ([]store.Event, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-v.changed:
		return []store.Event{{Token: token}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, nil
	}
}

// gatedPod is a pod of namespace ns declaring the gate.
func gatedPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now()},
		Spec:       corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "llmdiag.io/routable"}}},
	}
}

func condition(t *testing.T, cs *fake.Clientset, name string) *corev1.PodCondition {
	p, err := cs.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == "llmdiag.io/routable" {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// start runs a gate over cs and v until the returned stop is called.
func start(t *testing.T, cs *fake.Clientset, v *verdicts, o readygate.Options) (stop func(), reg *prometheus.Registry) {
	reg = prometheus.NewRegistry()
	o.Condition, o.Client, o.Verdicts, o.Registerer = "llmdiag.io/routable", cs, v, reg
	o.LeaseNamespace, o.LeaseDuration = "ns", 3*time.Second
	o.Plan = readygate.Rules{StaleAfter: time.Minute, Grace: time.Minute, MaxUnreadyFraction: 1}
	g, err := readygate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(30 * time.Second):
				t.Error("the gate did not stop within 30 s")
			}
		})
	}
	t.Cleanup(stop)
	return stop, reg
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestGateWritesEachPodOnceAtTheRateLimit: 30 new routable pods with a
// limit of 5 writes a second, burst 2: each gets True in one write, the
// writes past the burst are deferred and counted, none dropped. (At 5 a
// second the writes wait for the limit however slowly a busy machine
// makes them; at 50 a loaded run's writes came slower than the limit.)
func TestGateWritesEachPodOnceAtTheRateLimit(t *testing.T) {
	cs := fake.NewClientset()
	v := newVerdicts()
	const n = 30
	for i := range n {
		name := fmt.Sprintf("p%02d", i)
		if _, err := cs.CoreV1().Pods("ns").Create(context.Background(), gatedPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		v.set(name, true)
	}
	_, reg := start(t, cs, v, readygate.Options{QPS: 5, Burst: 2})
	testkit.Eventually(t, 30*time.Second, "every pod's condition True", func() bool {
		for i := range n {
			c := condition(t, cs, fmt.Sprintf("p%02d", i))
			if c == nil || c.Status != corev1.ConditionTrue || c.Reason != readygate.ReasonRoutable {
				return false
			}
		}
		return true
	})
	if got := counter(t, reg, "llmdiag_readiness_gate_writes_total", "result", "ok"); got != n {
		t.Errorf("%v writes, want %d: one per pod", got, n)
	}
	if got := counter(t, reg, "llmdiag_readiness_gate_deferred_writes_total"); got < 1 || got > n-2 {
		t.Errorf("%v deferred writes, want some, at most %d (past the burst)", got, n-2)
	}
	if got := counter(t, reg, "llmdiag_readiness_gate_leader"); got != 1 {
		t.Errorf("leader gauge %v, want 1", got)
	}
}

// TestGateTransitionsAndFailsOpen: a pod turns False when its node is not
// routable, with lastTransitionTime moved; True again after; and False
// once more, then the gate stopped, True with reason LlmdiagStopped.
func TestGateTransitionsAndFailsOpen(t *testing.T) {
	cs := fake.NewClientset()
	v := newVerdicts()
	if _, err := cs.CoreV1().Pods("ns").Create(context.Background(), gatedPod("p"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v.set("p", true)
	stop, reg := start(t, cs, v, readygate.Options{})
	is := func(status corev1.ConditionStatus, reason string) func() bool {
		return func() bool {
			c := condition(t, cs, "p")
			return c != nil && c.Status == status && c.Reason == reason
		}
	}
	testkit.Eventually(t, 30*time.Second, "p True", is(corev1.ConditionTrue, readygate.ReasonRoutable))
	v.set("p", false)
	testkit.Eventually(t, 30*time.Second, "p False, Overloaded", is(corev1.ConditionFalse, "Overloaded"))
	if c := condition(t, cs, "p"); c.Message != "llmdiag: verdict of p" || c.LastTransitionTime.IsZero() {
		t.Errorf("condition %+v, want the verdict as message and a transition time", *c)
	}
	v.set("p", true)
	testkit.Eventually(t, 30*time.Second, "p True again", is(corev1.ConditionTrue, readygate.ReasonRoutable))
	v.set("p", false)
	testkit.Eventually(t, 30*time.Second, "p False again", is(corev1.ConditionFalse, "Overloaded"))
	stop()
	if !is(corev1.ConditionTrue, readygate.ReasonStopped)() {
		t.Errorf("after the stop: %+v, want True %s", condition(t, cs, "p"), readygate.ReasonStopped)
	}
	if got := counter(t, reg, "llmdiag_readiness_gate_leader"); got != 0 {
		t.Errorf("leader gauge %v after the stop, want 0", got)
	}
	l, err := cs.CoordinationV1().Leases("ns").Get(context.Background(), readygate.DefaultLeaseName, metav1.GetOptions{})
	if err != nil || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") {
		t.Errorf("the Lease after the stop: %+v, %v; want it released", l, err)
	}
}
