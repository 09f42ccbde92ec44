package readygate_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/readygate"
	"github.com/llmdiag/llmdiag/store"
)

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		cause llmdiagv1.Cause
		want  string
	}{
		{llmdiagv1.Cause_CAUSE_OVERLOADED, "Overloaded"},
		{llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, "KVExhausted"},
		{llmdiagv1.Cause_CAUSE_TARGET_DOWN, "TargetDown"},
		{llmdiagv1.Cause_CAUSE_STALLED, "Stalled"},
		{llmdiagv1.Cause_CAUSE_LORA_CONTENTION, "LoRAContention"},
		{llmdiagv1.Cause_CAUSE_NO_DATA, "NoData"},
		{llmdiagv1.Cause_CAUSE_UNSPECIFIED, "NotRoutable"},
		{llmdiagv1.Cause(9999), "NotRoutable"},
	} {
		if got := readygate.Reason(tc.cause); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.cause, got, tc.want)
		}
	}
	if got := readygate.CamelCase("QUEUE_SATURATED"); got != "QueueSaturated" {
		t.Errorf("CamelCase(QUEUE_SATURATED) = %q", got)
	}
}

// TestReasonsAreValid: every cause's reason is one Kubernetes takes
// (metav1.Condition's rule: a letter, then letters, digits, _ , :).
func TestReasonsAreValid(t *testing.T) {
	for v := range llmdiagv1.Cause_name {
		r := readygate.Reason(llmdiagv1.Cause(v))
		if r == "" || len(r) > 1024 || !(r[0] >= 'A' && r[0] <= 'Z') || strings.ContainsFunc(r, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
		}) {
			t.Errorf("cause %v: reason %q is not CamelCase", llmdiagv1.Cause(v), r)
		}
	}
	for _, r := range []string{readygate.ReasonRoutable, readygate.ReasonNoFreshData, readygate.ReasonNoVerdict, readygate.ReasonSpared, readygate.ReasonStopped, readygate.ReasonSaturated} {
		if errs := validation.IsQualifiedName(r); len(errs) > 0 {
			t.Errorf("reason %q: %v", r, errs)
		}
	}
}

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// rec is a node's record observed at, routable or not, with a status,
// cause, load score and labels.
func rec(id string, at time.Time, status llmdiagv1.Status, cause llmdiagv1.Cause, routable bool, load float64, labels map[string]string) readygate.Node {
	return readygate.Node{ID: id, Record: &store.Record{
		Node:      &llmdiagv1.Node{Id: id, Model: "glm-4.6", Status: status, RootCause: cause, Routable: routable, LoadScore: load, Labels: labels},
		Metrics:   &llmdiagv1.NodeMetrics{ObservedAt: timestamppb.New(at)},
		Diagnosis: &llmdiagv1.Diagnosis{Summary: "the verdict of " + id},
	}}
}

func ok(id string, load float64) readygate.Node {
	return rec(id, t0, llmdiagv1.Status_STATUS_OK, llmdiagv1.Cause_CAUSE_HEALTHY, true, load, nil)
}

func saturated(id string, load float64) readygate.Node {
	return rec(id, t0, llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_OVERLOADED, false, load, nil)
}

var rules = readygate.Rules{StaleAfter: 30 * time.Second, Grace: 30 * time.Second, MaxUnreadyFraction: 1}

func TestPlanOnePod(t *testing.T) {
	trueCond := &readygate.Condition{Status: corev1.ConditionTrue, Reason: readygate.ReasonRoutable, Message: "llmdiag: routable"}
	for _, tc := range []struct {
		name    string
		pod     readygate.Pod
		now     time.Time
		status  corev1.ConditionStatus // "" for absent
		reason  string
		message string // a part of it
	}{
		{name: "routable", pod: readygate.Pod{Nodes: []readygate.Node{ok("a", 0.2)}}, now: t0,
			status: corev1.ConditionTrue, reason: readygate.ReasonRoutable},
		{name: "overloaded", pod: readygate.Pod{Nodes: []readygate.Node{saturated("a", 0.9)}}, now: t0,
			status: corev1.ConditionFalse, reason: "Overloaded", message: "llmdiag: the verdict of a"},
		{name: "one rank of two not routable", pod: readygate.Pod{Nodes: []readygate.Node{ok("a", 0.2), saturated("b", 0.9)}}, now: t0,
			status: corev1.ConditionFalse, reason: "Overloaded", message: "node b: the verdict of b"},
		{name: "kv exhausted", pod: readygate.Pod{Nodes: []readygate.Node{rec("a", t0, llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, false, 1, nil)}}, now: t0,
			status: corev1.ConditionFalse, reason: "KVExhausted"},
		{name: "fast lane saturated under a healthy verdict", pod: readygate.Pod{Nodes: []readygate.Node{rec("a", t0, llmdiagv1.Status_STATUS_OK, llmdiagv1.Cause_CAUSE_HEALTHY, false, 1, nil)}}, now: t0,
			status: corev1.ConditionFalse, reason: readygate.ReasonSaturated, message: "saturated (queue"},
		{name: "down", pod: readygate.Pod{Nodes: []readygate.Node{rec("a", t0, llmdiagv1.Status_STATUS_DOWN, llmdiagv1.Cause_CAUSE_TARGET_DOWN, false, 0, nil)}}, now: t0,
			status: corev1.ConditionFalse, reason: "TargetDown"},
		{name: "stale fails open", pod: readygate.Pod{Nodes: []readygate.Node{saturated("a", 0.9)}}, now: t0.Add(31 * time.Second),
			status: corev1.ConditionTrue, reason: readygate.ReasonNoFreshData},
		{name: "unknown fails open", pod: readygate.Pod{Nodes: []readygate.Node{rec("a", t0, llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, false, 0, nil)}}, now: t0,
			status: corev1.ConditionTrue, reason: readygate.ReasonNoFreshData},
		{name: "unknown and routable ranks fail open", pod: readygate.Pod{Nodes: []readygate.Node{ok("a", 0), rec("b", t0.Add(-time.Minute), llmdiagv1.Status_STATUS_OK, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0, nil)}}, now: t0,
			status: corev1.ConditionTrue, reason: readygate.ReasonNoFreshData},
		{name: "new pod without a verdict waits", pod: readygate.Pod{Appeared: t0}, now: t0.Add(29 * time.Second)},
		{name: "a rank without a record waits", pod: readygate.Pod{Appeared: t0, Nodes: []readygate.Node{ok("a", 0), {ID: "b"}}}, now: t0.Add(time.Second)},
		{name: "waiting keeps what the pod holds", pod: readygate.Pod{Appeared: t0, Current: trueCond}, now: t0.Add(time.Second),
			status: corev1.ConditionTrue, reason: readygate.ReasonRoutable},
		{name: "no verdict within the grace", pod: readygate.Pod{Appeared: t0}, now: t0.Add(30 * time.Second),
			status: corev1.ConditionTrue, reason: readygate.ReasonNoVerdict, message: "within 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Key = "ns/pod"
			d := readygate.Plan([]readygate.Pod{tc.pod}, tc.now, rules)[0]
			if tc.status == "" {
				if d.Cond != nil {
					t.Fatalf("condition %+v, want none", *d.Cond)
				}
				return
			}
			if d.Cond == nil {
				t.Fatalf("no condition, want %s %s", tc.status, tc.reason)
			}
			if d.Cond.Status != tc.status || d.Cond.Reason != tc.reason || !strings.Contains(d.Cond.Message, tc.message) {
				t.Errorf("condition %+v, want %s %s with %q", *d.Cond, tc.status, tc.reason, tc.message)
			}
		})
	}
}

func TestPlanSparesTheLeastLoaded(t *testing.T) {
	pool := func(id string, load float64, routable bool, labels map[string]string) readygate.Node {
		cause, st := llmdiagv1.Cause_CAUSE_OVERLOADED, llmdiagv1.Status_STATUS_CRIT
		if routable {
			cause, st = llmdiagv1.Cause_CAUSE_HEALTHY, llmdiagv1.Status_STATUS_OK
		}
		return rec(id, t0, st, cause, routable, load, labels)
	}
	a := map[string]string{"namespace": "ns", "pool": "a"}
	b := map[string]string{"namespace": "ns", "pool": "b"}
	held := &readygate.Condition{Status: corev1.ConditionFalse, Reason: "Overloaded"}
	for _, tc := range []struct {
		name     string
		fraction float64
		pods     []readygate.Pod
		want     []corev1.ConditionStatus
		spared   []bool
	}{
		{name: "all four saturated, half may be unready: the two most loaded stay False", fraction: 0.5,
			pods: []readygate.Pod{
				{Key: "p0", Nodes: []readygate.Node{pool("0", 0.95, false, a)}},
				{Key: "p1", Nodes: []readygate.Node{pool("1", 0.80, false, a)}},
				{Key: "p2", Nodes: []readygate.Node{pool("2", 0.99, false, a)}},
				{Key: "p3", Nodes: []readygate.Node{pool("3", 0.70, false, a)}},
			},
			want:   []corev1.ConditionStatus{"False", "True", "False", "True"},
			spared: []bool{false, true, false, true}},
		{name: "within the fraction nothing is spared", fraction: 0.5,
			pods: []readygate.Pod{
				{Key: "p0", Nodes: []readygate.Node{pool("0", 0.95, false, a)}},
				{Key: "p1", Nodes: []readygate.Node{pool("1", 0.10, true, a)}},
			},
			want: []corev1.ConditionStatus{"False", "True"}, spared: []bool{false, false}},
		{name: "a pod alone in its pool cannot be unready at 0.5", fraction: 0.5,
			pods:   []readygate.Pod{{Key: "p0", Nodes: []readygate.Node{pool("0", 0.95, false, a)}}},
			want:   []corev1.ConditionStatus{"True"},
			spared: []bool{true}},
		{name: "pools count apart", fraction: 0.5,
			pods: []readygate.Pod{
				{Key: "a0", Nodes: []readygate.Node{pool("a0", 0.9, false, a)}},
				{Key: "a1", Nodes: []readygate.Node{pool("a1", 0.1, true, a)}},
				{Key: "b0", Nodes: []readygate.Node{pool("b0", 0.9, false, b)}},
				{Key: "b1", Nodes: []readygate.Node{pool("b1", 0.8, false, b)}},
			},
			want: []corev1.ConditionStatus{"False", "True", "False", "True"}, spared: []bool{false, false, false, true}},
		{name: "without a pool the model is the group", fraction: 0.5,
			pods: []readygate.Pod{
				{Key: "p0", Nodes: []readygate.Node{pool("0", 0.9, false, nil)}},
				{Key: "p1", Nodes: []readygate.Node{pool("1", 0.8, false, nil)}},
			},
			want: []corev1.ConditionStatus{"False", "True"}, spared: []bool{false, true}},
		{name: "a tie keeps the pod already False", fraction: 0.5,
			pods: []readygate.Pod{
				{Key: "p0", Nodes: []readygate.Node{pool("0", 0.9, false, a)}},
				{Key: "p1", Current: held, Nodes: []readygate.Node{pool("1", 0.9, false, a)}},
			},
			want: []corev1.ConditionStatus{"True", "False"}, spared: []bool{true, false}},
		{name: "a pod's load is its most loaded rank's", fraction: 0.5,
			pods: []readygate.Pod{
				{Key: "p0", Nodes: []readygate.Node{pool("0a", 0.5, false, a), pool("0b", 0.6, true, a)}},
				{Key: "p1", Nodes: []readygate.Node{pool("1a", 0.7, false, a), pool("1b", 0.1, true, a)}},
			},
			want: []corev1.ConditionStatus{"True", "False"}, spared: []bool{true, false}},
		{name: "fraction 0 spares every pod", fraction: 0,
			pods: []readygate.Pod{
				{Key: "p0", Nodes: []readygate.Node{pool("0", 0.9, false, a)}},
				{Key: "p1", Nodes: []readygate.Node{pool("1", 0.1, true, a)}},
			},
			want: []corev1.ConditionStatus{"True", "True"}, spared: []bool{true, false}},
		{name: "fraction 1 spares none", fraction: 1,
			pods: []readygate.Pod{
				{Key: "p0", Nodes: []readygate.Node{pool("0", 0.9, false, a)}},
				{Key: "p1", Nodes: []readygate.Node{pool("1", 0.8, false, a)}},
			},
			want: []corev1.ConditionStatus{"False", "False"}, spared: []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rules
			r.MaxUnreadyFraction = tc.fraction
			got := readygate.Plan(tc.pods, t0, r)
			for i, d := range got {
				if d.Cond == nil || d.Cond.Status != tc.want[i] || d.Spared != tc.spared[i] {
					t.Errorf("%s: %+v spared %v, want %s spared %v", d.Key, d.Cond, d.Spared, tc.want[i], tc.spared[i])
					continue
				}
				if d.Spared && (d.Cond.Reason != readygate.ReasonSpared || !strings.Contains(d.Cond.Message, "spared: ") || d.Unready == nil || d.Unready.Status != corev1.ConditionFalse) {
					t.Errorf("%s spared: %+v (would be %+v)", d.Key, *d.Cond, d.Unready)
				}
			}
		})
	}
}

func TestPlanLoadNotANumber(t *testing.T) {
	d := readygate.Plan([]readygate.Pod{{Key: "p", Nodes: []readygate.Node{ok("a", math.NaN())}}}, t0, rules)[0]
	if d.Load != 0 || d.Cond.Status != corev1.ConditionTrue {
		t.Errorf("%+v", d)
	}
}

func TestMessageBounded(t *testing.T) {
	n := saturated("a", 1)
	n.Record.Diagnosis.Summary = strings.Repeat("é", 2000)
	d := readygate.Plan([]readygate.Pod{{Key: "p", Nodes: []readygate.Node{n}}}, t0, rules)[0]
	if len(d.Cond.Message) > 1024 || !strings.HasSuffix(d.Cond.Message, "…") {
		t.Errorf("message of %d bytes", len(d.Cond.Message))
	}
	if strings.ToValidUTF8(d.Cond.Message, "?") != d.Cond.Message {
		t.Errorf("message cut inside a rune")
	}
}

// TestAdmit: a pod the plan turns False waits while its group's pods
// False now leave no room, so that no order of the writes ever has more
// than the allowed pods False.
func TestAdmit(t *testing.T) {
	f := &readygate.Condition{Status: corev1.ConditionFalse, Reason: "Overloaded"}
	tr := &readygate.Condition{Status: corev1.ConditionTrue, Reason: readygate.ReasonRoutable}
	sp := &readygate.Condition{Status: corev1.ConditionTrue, Reason: readygate.ReasonSpared}
	for _, tc := range []struct {
		name     string
		fraction float64
		current  []*readygate.Condition // what the pods hold
		planned  []*readygate.Condition // what Plan wants
		want     []*readygate.Condition
		waiting  int
	}{
		{"the held pods swap: the new ones wait for the releases", 0.5,
			[]*readygate.Condition{f, f, tr, tr}, []*readygate.Condition{sp, sp, f, f}, []*readygate.Condition{sp, sp, tr, tr}, 2},
		{"once released, admitted", 0.5,
			[]*readygate.Condition{sp, sp, tr, tr}, []*readygate.Condition{sp, sp, f, f}, []*readygate.Condition{sp, sp, f, f}, 0},
		{"room for one of two", 0.5,
			[]*readygate.Condition{f, tr, tr, tr}, []*readygate.Condition{sp, f, f, tr}, []*readygate.Condition{sp, f, tr, tr}, 1},
		{"a pod without a condition waits without one", 0.5,
			[]*readygate.Condition{f, f, tr, nil}, []*readygate.Condition{f, sp, tr, f}, []*readygate.Condition{f, sp, tr, nil}, 1},
		{"those held stay held", 0.5,
			[]*readygate.Condition{f, f, tr, tr}, []*readygate.Condition{f, f, tr, tr}, []*readygate.Condition{f, f, tr, tr}, 0},
		{"fraction 1: nothing waits", 1,
			[]*readygate.Condition{f, f, tr, tr}, []*readygate.Condition{f, f, f, f}, []*readygate.Condition{f, f, f, f}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []readygate.Pod
			var ds []readygate.Desired
			for i := range tc.current {
				k := fmt.Sprintf("p%d", i)
				pods = append(pods, readygate.Pod{Key: k, Current: tc.current[i]})
				ds = append(ds, readygate.Desired{Key: k, Group: "model m", Cond: tc.planned[i]})
			}
			if got := readygate.Admit(pods, ds, tc.fraction); got != tc.waiting {
				t.Errorf("%d waiting, want %d", got, tc.waiting)
			}
			for i, d := range ds {
				if d.Cond != tc.want[i] {
					t.Errorf("%s: %+v, want %+v", d.Key, d.Cond, tc.want[i])
				}
			}
		})
	}
}
