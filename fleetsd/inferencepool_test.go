package fleetsd_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/fleetsd"
	"github.com/llmdiag/llmdiag/inferencepool"
)

// TestInferencePoolRole: kubernetes_sd_configs with role inferencepool is
// read as inferencepool_sd_configs, with its kubeconfig_file (from the
// file's directory) and namespaces, beside the job's other entries; with
// no relabel_configs its default rules make one node per selected pod and
// target port, the pool a label.
func TestInferencePoolRole(t *testing.T) {
	f, err := fleetsd.Parse([]byte(`scrape_configs:
  - job_name: pools
    kubernetes_sd_configs:
      - role: inferencepool
        kubeconfig_file: kube.yaml
        namespaces: {names: [serving]}
`), "/etc/llmdiag", nil)
	if err != nil {
		t.Fatal(err)
	}
	j := f.Jobs[0]
	if len(j.Config.ServiceDiscoveryConfigs) != 1 {
		t.Fatalf("%d discovery configs, want 1", len(j.Config.ServiceDiscoveryConfigs))
	}
	c, ok := j.Config.ServiceDiscoveryConfigs[0].(*inferencepool.SDConfig)
	if !ok || c.KubeconfigFile != "/etc/llmdiag/kube.yaml" || !reflect.DeepEqual(c.Namespaces.Names, []string{"serving"}) {
		t.Fatalf("discovery config %#v, want inferencepool with /etc/llmdiag/kube.yaml and namespace serving", j.Config.ServiceDiscoveryConfigs[0])
	}
	if j.Defaulted != "kubernetes inferencepool" {
		t.Errorf("defaults %q, want kubernetes inferencepool", j.Defaulted)
	}

	pool := &infv1.InferencePool{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "qwen-pool"}}
	pool.Spec.Selector.MatchLabels = map[infv1.LabelKey]infv1.LabelValue{"app": "qwen"}
	pool.Spec.TargetPorts = []infv1.Port{{Number: 8000}, {Number: 8001}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "qwen-0", Labels: map[string]string{"app": "qwen"}},
		Status:     corev1.PodStatus{PodIP: "10.2.0.7", Phase: corev1.PodRunning},
	}
	nodes, refused := j.Nodes(inferencepool.Groups([]*infv1.InferencePool{pool}, []*corev1.Pod{pod}), "")
	if len(refused) > 0 {
		t.Fatalf("refused %v", refused)
	}
	labels := map[string]string{"job": "pools", "namespace": "serving", "pod": "qwen-0", "pool": "qwen-pool", "app": "qwen"}
	want := []fleet.Node{
		{ID: "serving/qwen-0:8000", URL: "http://10.2.0.7:8000/metrics", Labels: labels},
		{ID: "serving/qwen-0:8001", URL: "http://10.2.0.7:8001/metrics", Labels: labels},
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Errorf("nodes\n%+v\nwant\n%+v", nodes, want)
	}

	// Beside a pod role, in one job: only with relabel_configs of its own.
	if _, err := fleetsd.Parse([]byte(`scrape_configs:
  - job_name: both
    kubernetes_sd_configs: [{role: pod}, {role: inferencepool}]
`), "", nil); err == nil {
		t.Error("a job with the pod and inferencepool roles and no relabel_configs was accepted")
	}
}
