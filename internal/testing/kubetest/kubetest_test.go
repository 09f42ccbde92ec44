package kubetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestEndpointSliceListsReadyPod: a Service selecting a pod the kubelet
// would have started gets an EndpointSlice listing the pod's IP once the
// pod is Ready, from the real EndpointSlice controller.
func TestEndpointSliceListsReadyPod(t *testing.T) {
	c := Start(t, Options{ControllerManager: true})
	c.InstallInferencePool(t)
	inferencePools := dynamic.NewForConfigOrDie(c.Config).Resource(InferencePoolResource)
	if _, err := inferencePools.Namespace("default").List(ctx(t), metav1.ListOptions{}); err != nil {
		t.Fatalf("list InferencePools after installing the CRD: %v", err)
	}

	const ns, podIP = "fleet", "10.244.1.7"
	c.Namespace(t, ns)
	c.CreateNode(t, "gpu-node-1", "192.0.2.10")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vllm-0", Labels: map[string]string{"app": "vllm"}},
		Spec: corev1.PodSpec{
			NodeName:   "gpu-node-1",
			Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "vllm"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "vllm"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := c.MarkPodReady(t, ns, "vllm-0", podIP)
	if ready.Status.HostIP != "192.0.2.10" {
		t.Errorf("hostIP = %q, want the node's InternalIP 192.0.2.10", ready.Status.HostIP)
	}

	var last string
	waitFor(t, "an EndpointSlice of service vllm listing "+podIP+" ready", func() bool {
		slices, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx(t), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=vllm"})
		if err != nil {
			last = err.Error()
			return false
		}
		last = describe(slices.Items)
		return listsReady(slices.Items, podIP, "vllm-0")
	})
	t.Logf("endpoint slices: %s", last)
}

func listsReady(items []discoveryv1.EndpointSlice, ip, pod string) bool {
	for _, s := range items {
		for _, e := range s.Endpoints {
			ready := e.Conditions.Ready != nil && *e.Conditions.Ready
			if ready && slices.Contains(e.Addresses, ip) && e.TargetRef != nil && e.TargetRef.Name == pod {
				return true
			}
		}
	}
	return false
}

func describe(items []discoveryv1.EndpointSlice) string {
	var b strings.Builder
	for _, s := range items {
		b.WriteString(s.Name + ":")
		for _, e := range s.Endpoints {
			b.WriteString(" " + strings.Join(e.Addresses, ","))
		}
		b.WriteString("; ")
	}
	return b.String()
}

// TestServiceAccountLeastPrivilege: a ServiceAccount token bound to a Role
// that may only list pods lists pods and is forbidden to list services;
// a certificate user with no binding is forbidden both.
func TestServiceAccountLeastPrivilege(t *testing.T) {
	c := Start(t, Options{})
	const ns = "fleet"
	c.Namespace(t, ns)
	sa := kubernetes.NewForConfigOrDie(c.ServiceAccount(t, ns, "llmdiag"))
	c.Grant(t, ns, "pod-lister", ServiceAccountSubject(ns, "llmdiag"), rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"},
	})

	if _, err := sa.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{}); err != nil {
		t.Fatalf("service account with list pods: list pods: %v", err)
	}
	_, err := sa.CoreV1().Services(ns).List(ctx(t), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("service account with only list pods: list services: err = %v, want Forbidden", err)
	}
	if _, err := sa.CoreV1().Pods("default").List(ctx(t), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("service account with list pods in %s: list pods in default: err = %v, want Forbidden", ns, err)
	}

	nobody := kubernetes.NewForConfigOrDie(c.UserConfig(t, "nobody"))
	if _, err := nobody.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("user without a binding: list pods: err = %v, want Forbidden", err)
	}
	// The kubeconfig file is the admin's.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Services(ns).List(ctx(t), metav1.ListOptions{}); err != nil {
		t.Errorf("admin from %s: list services: %v", c.Kubeconfig, err)
	}
}

// TestCacheDirMatchesScript: the directory the helper looks in is the one
// scripts/k8sbins.sh builds into.
func TestCacheDirMatchesScript(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("bash", filepath.Join(root, BuildScript), "-n").Output() // exits 1 when not built
	want := strings.TrimSpace(string(out))
	got, err := CacheDir(root, runtime.Version())
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("CacheDir = %s\n%s -n prints %s", got, BuildScript, want)
	}
	if !strings.Contains(got, "/.cache/llmdiag/k8sbins/k8s-v1.37.2-etcd-v3.7.3-"+runtime.Version()+"-") {
		t.Errorf("CacheDir = %s: want it to name the versions", got)
	}
}

// TestMissingBinsSayHowToBuildThem: the failure names the build command.
func TestMissingBinsSayHowToBuildThem(t *testing.T) {
	t.Setenv(EnvBins, "")
	dir, get, err := binsDir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(get, "&& "+BuildScript+"`") || !strings.Contains(get, EnvBins) {
		t.Errorf("hint %q: want the build command and %s", get, EnvBins)
	}
	msg := testkit.Fails(t, func(tb testing.TB) {
		_, err := testkit.Program{Name: "etcd", Candidates: []string{filepath.Join(t.TempDir(), "etcd")}, Get: get}.Find()
		tb.Fatal(err)
	})
	if !strings.Contains(msg, BuildScript) {
		t.Errorf("failure %q: want %s", msg, BuildScript)
	}
	t.Setenv(EnvBins, "/opt/k8s")
	if dir, _, _ = binsDir(); dir != "/opt/k8s" {
		t.Errorf("%s=/opt/k8s: dir = %s", EnvBins, dir)
	}
}

// TestGuardKillsWhenTheTestBinaryDies: the guard kills the process group
// of each wrapped process when its pipe closes without "done", and nothing
// after "done".
func TestGuardKillsWhenTheTestBinaryDies(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on PATH")
	}
	for _, released := range []bool{false, true} {
		dir := t.TempDir()
		g := startGuard(t, dir)
		cmd := exec.Command(g.wrap(t, sleep), "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as envtest starts them
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		pidFile := filepath.Join(g.pids, "sleep.pid")
		waitFor(t, "the wrapper to record its pid", func() bool {
			b, err := os.ReadFile(pidFile)
			return err == nil && strings.TrimSpace(string(b)) != ""
		})
		if released {
			g.release()
			select {
			case err := <-exited:
				t.Fatalf("after done, the process exited: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			continue
		}
		g.w.Close() // as when the test binary dies
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatal("the guard did not kill the process when its pipe closed")
		}
		_ = g.cmd.Wait()
	}
}
