package kubetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// The kubelet's reasons of a pod's Ready condition (pkg/kubelet/status).
const (
	ReasonContainersNotReady     = "ContainersNotReady"
	ReasonReadinessGatesNotReady = "ReadinessGatesNotReady"
	ReasonPodCompleted           = "PodCompleted"
)

// PodReady is the pod's Ready condition as the kubelet generates it
// (GeneratePodReadyCondition in Kubernetes's pkg/kubelet/status): not
// Ready, with ContainersReady's reason and message, unless every container
// is ready; else not Ready (ReadinessGatesNotReady) unless every readiness
// gate's condition exists and is True; else Ready. Only the type, status,
// reason and message are set.
func PodReady(pod *corev1.Pod) corev1.PodCondition {
	ctrs := ContainersReady(pod)
	if ctrs.Status != corev1.ConditionTrue {
		return corev1.PodCondition{Type: corev1.PodReady, Status: ctrs.Status, Reason: ctrs.Reason, Message: ctrs.Message}
	}
	var unready []string
	for _, rg := range pod.Spec.ReadinessGates {
		c := condition(pod.Status.Conditions, rg.ConditionType)
		switch {
		case c == nil:
			unready = append(unready, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		case c.Status != corev1.ConditionTrue:
			unready = append(unready, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), c.Status))
		}
	}
	if len(unready) > 0 {
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: ReasonReadinessGatesNotReady, Message: strings.Join(unready, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
}

// ContainersReady is the pod's ContainersReady condition as the kubelet
// generates it (GenerateContainersReadyCondition) for a pod without init
// containers: False (PodCompleted) once the pod has succeeded, False
// (ContainersNotReady) naming the containers without a ready status, else
// True.
func ContainersReady(pod *corev1.Pod) corev1.PodCondition {
	if pod.Status.Phase == corev1.PodSucceeded {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: ReasonPodCompleted}
	}
	var unknown, unready []string
	for _, c := range pod.Spec.Containers {
		i := slices.IndexFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == c.Name })
		switch {
		case i < 0:
			unknown = append(unknown, c.Name)
		case !pod.Status.ContainerStatuses[i].Ready:
			unready = append(unready, c.Name)
		}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %v", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %v", unready))
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: ReasonContainersNotReady, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
}

func condition(conds []corev1.PodCondition, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// setCondition puts c in conds, moving lastTransitionTime only when the
// status changes, and reports whether anything changed.
func setCondition(conds *[]corev1.PodCondition, c corev1.PodCondition, now metav1.Time) bool {
	old := condition(*conds, c.Type)
	if old == nil {
		c.LastTransitionTime = now
		*conds = append(*conds, c)
		return true
	}
	if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
		return false
	}
	if old.Status != c.Status {
		old.LastTransitionTime = now
	}
	old.Status, old.Reason, old.Message = c.Status, c.Reason, c.Message
	return true
}

// RunKubelet keeps, until the test ends, the ContainersReady and Ready
// conditions of every running pod of namespace (every namespace when "")
// as a kubelet would, recomputing them (ContainersReady, PodReady) on
// every change of a pod, its readiness gates' conditions included: there
// is no kubelet here, and without one a readiness gate changes nothing.
// Pods not yet Running (MarkPodReady makes them so) are left alone.
func (c *Cluster) RunKubelet(t testing.TB, namespace string) {
	t.Helper()
	pods := c.Client.CoreV1().Pods(namespace)
	lw := cache.NewListWatchFromClient(c.Client.CoreV1().RESTClient(), "pods", namespace, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	sync := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return
		}
		if !needsSync(p) {
			return
		}
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			cur, err := pods.Get(context.Background(), p.Name, metav1.GetOptions{})
			if err != nil || cur.UID != p.UID {
				return err
			}
			now := metav1.NewTime(time.Now().Truncate(time.Second))
			changed := setCondition(&cur.Status.Conditions, ContainersReady(cur), now)
			changed = setCondition(&cur.Status.Conditions, PodReady(cur), now) || changed
			if !changed {
				return nil
			}
			_, err = c.Client.CoreV1().Pods(cur.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{FieldManager: "kubetest-kubelet"})
			return err
		})
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Logf("kubetest kubelet: pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj any) { sync(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the kubelet's pod informer to sync", inf.HasSynced)
}

// needsSync reports whether p's ContainersReady or Ready condition differs
// from what the kubelet would write.
func needsSync(p *corev1.Pod) bool {
	for _, want := range []corev1.PodCondition{ContainersReady(p), PodReady(p)} {
		c := condition(p.Status.Conditions, want.Type)
		if c == nil || c.Status != want.Status || c.Reason != want.Reason || c.Message != want.Message {
			return true
		}
	}
	return false
}
