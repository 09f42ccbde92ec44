package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/llmdiag/llmdiag/deploy/deploytest"
	"github.com/llmdiag/llmdiag/internal/testing/kubetest"
)

// The Prometheus Operator's CustomResourceDefinitions of ServiceMonitor and
// PrometheusRule, which the API server needs to take the manifests'
// ServiceMonitor and PrometheusRule, are testdata/crds/, copied unchanged
// from example/prometheus-operator-crd/ of the Go module
// github.com/prometheus-operator/prometheus-operator at
// prometheusOperatorCRDVersion. The module the manifests' types come from,
// github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
// (go.mod), holds Go code only; the main module holds the CRDs, and
// prometheusOperatorCRDVersion is the newest version of it the module
// proxy serves. To update them: go mod download -json
// github.com/prometheus-operator/prometheus-operator@VERSION, then copy the
// two files from its Dir, keeping the three comment lines on top.
const prometheusOperatorCRDVersion = "v0.85.0"

// applyNamespace is the namespace the chart is installed into for the
// dry-run (helm install -n): created by the test, where the overlays go to
// default, the namespace their ClusterRoleBinding names.
const applyNamespace = "llmdiag"

// applier sends objects to an API server as server-side apply, dry-run,
// with strict field validation: what `kubectl apply --server-side
// --dry-run=server --validate=strict` does. The API server runs its
// validation and admission on each object (the CRDs' schemas for the
// custom resources) and persists nothing.
type applier struct {
	client dynamic.Interface
	mapper meta.RESTMapper
}

// newApplier starts a control plane with the CustomResourceDefinitions the
// manifests need (ServiceMonitor, PrometheusRule, InferencePool) and the
// namespace applyNamespace.
func newApplier(t *testing.T) *applier {
	t.Helper()
	c := kubetest.Start(t, kubetest.Options{})
	var crds [][]byte
	for _, name := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		crds = append(crds, b)
	}
	c.InstallCRDs(t, append(crds, kubetest.InferencePoolCRD)...)
	c.Namespace(t, applyNamespace)
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{client: client, mapper: restmapper.NewDiscoveryRESTMapper(groups)}
}

// apply dry-runs one object: into namespace when it is namespaced and
// names none.
func (a *applier) apply(ctx context.Context, o deploytest.Object, namespace string) error {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(o.YAML, &obj.Object); err != nil {
		return err
	}
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var r dynamic.ResourceInterface = a.client.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() != "" {
			namespace = obj.GetNamespace()
		}
		r = a.client.Resource(m.Resource).Namespace(namespace)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = r.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		DryRun:          []string{metav1.DryRunAll},
		FieldManager:    "llmdiag-deploy-test",
		Force:           new(true),
		FieldValidation: metav1.FieldValidationStrict,
	})
	return err
}

// TestManifestsApplyToAnAPIServer dry-runs every object of both overlays
// (into default) and of the chart's default and redis renders (into
// applyNamespace, as `helm install -n`) on a real kube-apiserver with
// server-side apply and strict field validation: a field the API server
// or a CRD's schema refuses, or does not know, fails the test. Then it
// shows the check bites: objects the API server must refuse are refused.
func TestManifestsApplyToAnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts etcd and kube-apiserver")
	}
	a := newApplier(t)
	type rendered struct {
		name, namespace string
		objs            []deploytest.Object
	}
	var renders []rendered
	for _, o := range overlays {
		renders = append(renders, rendered{o.dir, "default", render(t, o.dir)})
	}
	for _, c := range chartCases {
		objs, err := deploytest.Helm(deploytest.Chart(), deploytest.Release{Name: "llmdiag", Namespace: applyNamespace}, c.values)
		if err != nil {
			t.Fatal(err)
		}
		renders = append(renders, rendered{"chart as " + c.overlay.dir, applyNamespace, objs})
	}
	for _, r := range renders {
		kinds := map[string]bool{}
		for _, o := range r.objs {
			kinds[o.Kind] = true
			if err := a.apply(t.Context(), o, r.namespace); err != nil {
				t.Errorf("%s: %s %s: the API server refused it: %v", r.name, o.Kind, o.Name, err)
			}
		}
		for _, k := range []string{"Deployment", "Service", "ConfigMap", "ServiceMonitor", "PrometheusRule", "NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			if !kinds[k] {
				t.Errorf("%s: no %s was applied", r.name, k)
			}
		}
		t.Logf("%s: %d objects accepted (dry-run)", r.name, len(r.objs))
	}

	// It bites: each object is one of the single overlay's, broken.
	objs := render(t, overlays[0].dir)
	find := func(kind string) deploytest.Object {
		for _, o := range objs {
			if o.Kind == kind {
				return o
			}
		}
		t.Fatalf("the single overlay has no %s", kind)
		return deploytest.Object{}
	}
	broken := []struct {
		what, kind, from, to, want string
	}{
		{"a container port out of range", "Deployment", "containerPort: 8443", "containerPort: 84430", "containerPort"},
		{"a field Deployment does not have", "Deployment", "replicas: 1", "replicas: 1\n  replica: 1", ".spec.replica: field not declared in schema"},
		{"a field ServiceMonitor's schema does not have", "ServiceMonitor", "endpoints:", "endpoint: []\n  endpoints:", ".spec.endpoint: field not declared in schema"},
		{"a PrometheusRule whose group has no name", "PrometheusRule", "- name: ", "- nam: ", `omits all key fields ["name"]`},
	}
	for _, b := range broken {
		o := find(b.kind)
		if !strings.Contains(string(o.YAML), b.from) {
			t.Fatalf("%s: %s holds no %q to break", b.what, b.kind, b.from)
		}
		o.YAML = []byte(strings.Replace(string(o.YAML), b.from, b.to, 1))
		err := a.apply(t.Context(), o, "default")
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: the API server answered %v, want a refusal naming %s", b.what, err, b.want)
		}
	}
}
