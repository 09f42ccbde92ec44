package deploy_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/llmdiag/llmdiag/deploy/deploytest"
)

// chartCases are the values under which the chart must install what an
// overlay installs.
var chartCases = []struct {
	overlay overlay
	values  map[string]any
}{
	{overlays[0], nil},
	{overlays[1], map[string]any{"store": "redis", "replicas": 3}},
}

// renderChart renders the chart as `helm install llmdiag` in the namespace
// default would.
func renderChart(t *testing.T, values map[string]any) []deploytest.Object {
	t.Helper()
	objs, err := deploytest.Helm(deploytest.Chart(), deploytest.DefaultRelease, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// helmLabels are the labels the chart puts on every object's metadata that
// the kustomize base does not.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

var kustomizeHash = regexp.MustCompile(`^(llmdiag-config)-[a-z0-9]{10}$`)

// difference is one way the chart's render is meant to differ from the
// overlay's, removed from both before they are compared. Each must occur in
// every comparison, so that the list never outlives the difference.
type difference struct {
	what, why string
	// helm and kustomize remove the difference from one object (a JSON
	// map), reporting whether they found it.
	helm, kustomize func(kind string, obj map[string]any) bool
}

var intendedDifferences = []difference{
	{
		what: "Helm's standard labels " + strings.Join(helmLabels, ", ") + " on every object's metadata",
		why: "they say which release and chart version installed an object, what helm and the Kubernetes recommended labels expect; " +
			"selectors and pod labels stay the base's app.kubernetes.io/name alone, as selectors cannot change after install",
		helm: func(_ string, obj map[string]any) bool {
			l, _ := dig(obj, "metadata", "labels").(map[string]any)
			found := false
			for _, k := range helmLabels {
				if _, ok := l[k]; ok {
					found = true
					delete(l, k)
				}
			}
			return found
		},
	},
	{
		what: "the ConfigMap's name: llmdiag-config-HASH from kustomize's configMapGenerator, llmdiag-config from the chart",
		why:  "kustomize names the ConfigMap after a hash of its content so that a change rolls the pods; Helm keeps one name and rolls them by the checksum/config annotation",
		kustomize: func(kind string, obj map[string]any) bool {
			switch kind {
			case "ConfigMap":
				return unhash(dig(obj, "metadata").(map[string]any), "name")
			case "Deployment":
				found := false
				vols, _ := dig(obj, "spec", "template", "spec", "volumes").([]any)
				for _, v := range vols {
					if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
						found = unhash(cm, "name") || found
					}
				}
				return found
			}
			return false
		},
	},
	{
		what: "the pod template's annotation checksum/config, the SHA-256 of the rendered ConfigMap",
		why:  "Helm's way of rolling the pods when the fleet, thresholds or discovery file changes, where kustomize renames the ConfigMap",
		helm: func(kind string, obj map[string]any) bool {
			meta, _ := dig(obj, "spec", "template", "metadata").(map[string]any)
			a, _ := meta["annotations"].(map[string]any)
			sum, ok := a["checksum/config"].(string)
			if kind != "Deployment" || !ok || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(sum) {
				return false
			}
			delete(a, "checksum/config")
			if len(a) == 0 {
				delete(meta, "annotations")
			}
			return true
		},
	},
}

func unhash(m map[string]any, key string) bool {
	s, _ := m[key].(string)
	sub := kustomizeHash.FindStringSubmatch(s)
	if sub == nil {
		return false
	}
	m[key] = sub[1]
	return true
}

func dig(obj map[string]any, keys ...string) any {
	var v any = obj
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestChart renders the chart with each overlay's values, holds it to the
// same checks as the overlay, and compares it object by object with the
// overlay, less intendedDifferences.
func TestChart(t *testing.T) {
	secrets := secretLayouts(t)
	rules := rulesSpec(t)
	for _, c := range chartCases {
		t.Run(path.Base(c.overlay.dir), func(t *testing.T) {
			helmObjs := renderChart(t, c.values)
			m := decode(t, helmObjs)
			if t.Failed() {
				return
			}
			for _, err := range check(m, c.overlay, secrets, rules) {
				t.Error(err)
			}
			for _, err := range compareRenders(render(t, c.overlay.dir), helmObjs) {
				t.Error(err)
			}
		})
	}
}

// TestCompareCatchesDifferences: a difference not in the list fails.
func TestCompareCatchesDifferences(t *testing.T) {
	kust := render(t, overlays[0].dir)
	helmObjs := renderChart(t, nil)
	if errs := compareRenders(kust, helmObjs); len(errs) > 0 {
		t.Fatalf("the renders differ before a change: %v", errs)
	}
	for _, tt := range []struct {
		name, old, new, want string
	}{
		{"a changed probe", "failureThreshold: 60", "failureThreshold: 61", "startupProbe"},
		{"an extra label", "app.kubernetes.io/name: llmdiag", "app.kubernetes.io/name: llmdiag\n    team: ml", "team"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			changed := slices.Clone(helmObjs)
			i := slices.IndexFunc(changed, func(o deploytest.Object) bool { return strings.Contains(string(o.YAML), tt.old) })
			if i < 0 {
				t.Fatalf("no object holds %q", tt.old)
			}
			changed[i].YAML = []byte(strings.Replace(string(changed[i].YAML), tt.old, tt.new, 1))
			errs := compareRenders(kust, changed)
			if !strings.Contains(fmt.Sprint(errs), tt.want) {
				t.Errorf("compare found %v, want a difference naming %q", errs, tt.want)
			}
		})
	}
	t.Run("a listed difference that no longer occurs", func(t *testing.T) {
		errs := compareRenders(kust, kust)
		if !strings.Contains(fmt.Sprint(errs), "no longer occurs") {
			t.Errorf("compare of the overlay with itself found %v, want the listed differences reported absent", errs)
		}
	})
}

// compareRenders compares two renders object by object, after decoding
// each strictly into its type (so that 0440 and 288, "2" and 2 compare
// equal) and removing intendedDifferences.
func compareRenders(kustomized, helmed []deploytest.Object) []error {
	var errs []error
	seen := make([]bool, len(intendedDifferences))
	normalize := func(objs []deploytest.Object, helm bool) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, o := range objs {
			obj, err := typedJSON(o.Kind, o.YAML)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", o.Kind, o.Name, err))
				continue
			}
			for i, d := range intendedDifferences {
				f := d.kustomize
				if helm {
					f = d.helm
				}
				if f != nil && f(o.Kind, obj) {
					seen[i] = true
				}
			}
			name, _ := dig(obj, "metadata", "name").(string)
			out[o.Kind+"/"+name] = obj
		}
		return out
	}
	k, h := normalize(kustomized, false), normalize(helmed, true)
	for i, d := range intendedDifferences {
		if !seen[i] {
			errs = append(errs, fmt.Errorf("intended difference %q no longer occurs: drop it from intendedDifferences", d.what))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(k)) {
		if _, ok := h[id]; !ok {
			errs = append(errs, fmt.Errorf("%s: rendered by kustomize, not by the chart", id))
			continue
		}
		for _, p := range diffPaths("", k[id], h[id]) {
			errs = append(errs, fmt.Errorf("%s: %s", id, p))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(h)) {
		if _, ok := k[id]; !ok {
			errs = append(errs, fmt.Errorf("%s: rendered by the chart, not by kustomize", id))
		}
	}
	return errs
}

// typedJSON decodes y strictly into the type of kind, and returns it as
// JSON's generic map.
func typedJSON(kind string, y []byte) (map[string]any, error) {
	var v any
	switch kind {
	case "Deployment":
		v = &appsv1.Deployment{}
	case "Service":
		v = &corev1.Service{}
	case "ConfigMap":
		v = &corev1.ConfigMap{}
	case "ServiceAccount":
		v = &corev1.ServiceAccount{}
	case "ServiceMonitor":
		v = &monitoringv1.ServiceMonitor{}
	case "PrometheusRule":
		v = &monitoringv1.PrometheusRule{}
	case "NetworkPolicy":
		v = &networkingv1.NetworkPolicy{}
	case "PodDisruptionBudget":
		v = &policyv1.PodDisruptionBudget{}
	case "ClusterRole":
		v = &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		v = &rbacv1.ClusterRoleBinding{}
	case "Role":
		v = &rbacv1.Role{}
	case "RoleBinding":
		v = &rbacv1.RoleBinding{}
	default:
		return nil, fmt.Errorf("kind %q: the test knows no type for it", kind)
	}
	if err := yaml.UnmarshalStrict(y, v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(b, &out)
}

// diffPaths lists where a (kustomize's) and b (the chart's) differ.
func diffPaths(at string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(maps.Collect(func(yield func(string, bool) bool) {
			for k := range am {
				yield(k, true)
			}
			for k := range bm {
				yield(k, true)
			}
		}))) {
			out = append(out, diffPaths(at+"."+k, am[k], bm[k])...)
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, diffPaths(fmt.Sprintf("%s[%d]", at, i), al[i], bl[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	ay, _ := yaml.Marshal(a)
	by, _ := yaml.Marshal(b)
	return []string{fmt.Sprintf("%s: kustomize %s, chart %s", at, strings.TrimSpace(string(ay)), strings.TrimSpace(string(by)))}
}

// TestChartSchemaRejects: values.schema.json refuses a value of the wrong
// type, an unknown key and several replicas without Redis, as helm install
// does, before any template runs.
func TestChartSchemaRejects(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"replicas as a word", map[string]any{"replicas": "three"}, "replicas"},
		{"no replica", map[string]any{"replicas": 0}, "replicas"},
		{"an unknown key", map[string]any{"replica": 3}, "replica"},
		{"an unknown nested key", map[string]any{"image": map[string]any{"name": "llmdiag"}}, "name"},
		{"a tag as a number", map[string]any{"image": map[string]any{"tag": 1.2}}, "tag"},
		{"a store llmdiag lacks", map[string]any{"store": "etcd"}, "store"},
		{"several replicas in memory", map[string]any{"replicas": 3}, "store"},
		{"rbac.create as a string", map[string]any{"rbac": map[string]any{"create": "yes"}}, "create"},
		{"serviceMonitor.enabled as a string", map[string]any{"serviceMonitor": map[string]any{"enabled": "true"}}, "enabled"},
		{"an extra arg that is no flag", map[string]any{"extraArgs": []any{"serve"}}, "extraArgs"},
		{"a Secret name Kubernetes refuses", map[string]any{"secrets": map[string]any{"tls": "My_TLS"}}, "tls"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := deploytest.Helm(deploytest.Chart(), deploytest.DefaultRelease, tt.values)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "schema") {
				t.Errorf("render with %v: %v, want a schema error naming %q", tt.values, err, tt.want)
			}
		})
	}
}

// TestChartValues: the switches that the overlays' comparison leaves at
// their defaults do what values.yaml says.
func TestChartValues(t *testing.T) {
	kinds := func(objs []deploytest.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.Kind)
		}
		return out
	}
	t.Run("without RBAC, ServiceAccount, ServiceMonitor, PrometheusRule, NetworkPolicy", func(t *testing.T) {
		objs := renderChart(t, map[string]any{
			"rbac": map[string]any{"create": false}, "serviceAccount": map[string]any{"create": false},
			"serviceMonitor": map[string]any{"enabled": false}, "prometheusRule": map[string]any{"enabled": false},
			"networkPolicy": map[string]any{"enabled": false},
		})
		m := decode(t, objs)
		if got := slices.Sorted(slices.Values(kinds(objs))); !slices.Equal(got, []string{"ConfigMap", "Deployment", "PodDisruptionBudget", "Service"}) {
			t.Errorf("kinds %v, want ConfigMap, Deployment, PodDisruptionBudget and Service alone", got)
		}
		if len(m.deployments) == 1 {
			if sa := m.deployments[0].Spec.Template.Spec.ServiceAccountName; sa != "default" {
				t.Errorf("serviceAccountName %q, want default", sa)
			}
		}
	})
	t.Run("an existing ServiceAccount bound by the chart", func(t *testing.T) {
		m := decode(t, renderChart(t, map[string]any{"serviceAccount": map[string]any{"create": false, "name": "discovery"}}))
		if len(m.serviceAccounts) != 0 || len(m.bindings) != 2 || len(m.roleBindings) != 1 || len(m.deployments) != 1 {
			t.Fatalf("%d ServiceAccounts, %d cluster role bindings, %d role bindings, %d Deployments; want 0, 2, 1, 1", len(m.serviceAccounts), len(m.bindings), len(m.roleBindings), len(m.deployments))
		}
		for _, s := range [][]rbacv1.Subject{m.bindings[0].Subjects, m.bindings[1].Subjects, m.roleBindings[0].Subjects} {
			if len(s) != 1 || s[0].Name != "discovery" || m.deployments[0].Spec.Template.Spec.ServiceAccountName != "discovery" {
				t.Errorf("binding subjects %+v, pod's account %q; want discovery for both", s, m.deployments[0].Spec.Template.Spec.ServiceAccountName)
			}
		}
	})
	t.Run("another release in another namespace", func(t *testing.T) {
		objs, err := deploytest.Helm(deploytest.Chart(), deploytest.Release{Name: "diag", Namespace: "ml"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := decode(t, objs)
		if len(m.bindings) != 2 || len(m.deployments) != 1 || len(m.clusterRoles) != 2 || len(m.roles) != 1 || len(m.roleBindings) != 1 {
			t.Fatal("want two cluster role bindings and roles, one Role and RoleBinding, one Deployment")
		}
		disco, gate, discoB, _ := roles(m)
		if s := discoB.Subjects; len(s) != 1 || s[0].Name != "diag-llmdiag" || s[0].Namespace != "ml" || disco.Name != "diag-llmdiag" || gate.Name != "diag-llmdiag-readiness-gate" {
			t.Errorf("binding subjects %+v, roles %s and %s; want the ServiceAccount diag-llmdiag in ml, the roles diag-llmdiag and diag-llmdiag-readiness-gate", s, disco.Name, gate.Name)
		}
		if r, b := m.roles[0], m.roleBindings[0]; r.Name != "diag-llmdiag-readiness-gate" || b.Subjects[0].Namespace != "ml" {
			t.Errorf("Role %s bound to %+v, want diag-llmdiag-readiness-gate for the ServiceAccount in ml", r.Name, b.Subjects)
		}
		if errs := checkRBAC(m); len(errs) > 0 {
			t.Error(errs)
		}
	})
	t.Run("a discovery file, an extra flag, an image tag", func(t *testing.T) {
		m := decode(t, renderChart(t, map[string]any{
			"config":    map[string]any{"discovery": "kubernetes_sd_configs:\n  - role: pod\n"},
			"extraArgs": []any{"--interval=10s"},
			"image":     map[string]any{"tag": "v1.2.3"},
		}))
		if len(m.deployments) != 1 || len(m.configMaps) != 1 {
			t.Fatal("want one Deployment and one ConfigMap")
		}
		c := *container(&m)
		if !slices.Contains(c.Args, "--discovery=/etc/llmdiag/config/discovery.yaml") || !slices.Contains(c.Args, "--interval=10s") {
			t.Errorf("args %q, want --discovery and --interval", c.Args)
		}
		if got := m.configMaps[0].Data["discovery.yaml"]; got != "kubernetes_sd_configs:\n  - role: pod\n" {
			t.Errorf("ConfigMap discovery.yaml %q", got)
		}
		if c.Image != "llmdiag:v1.2.3" {
			t.Errorf("image %s, want llmdiag:v1.2.3", c.Image)
		}
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--fleet") }) {
			t.Errorf("args %q: --fleet with --discovery, which serve refuses", c.Args)
		}
	})
	t.Run("the readiness gate", func(t *testing.T) {
		m := decode(t, renderChart(t, map[string]any{
			"config":        map[string]any{"discovery": "kubernetes_sd_configs:\n  - role: pod\n"},
			"readinessGate": map[string]any{"enabled": true, "maxUnreadyFraction": 0.25},
		}))
		fs, errs := serveFlags(*container(&m))
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for flag, want := range map[string]string{"readiness-gate": "llmdiag.io/routable", "readiness-gate-lease": "default/llmdiag-readiness-gate", "max-unready-fraction": "0.25"} {
			if got := fs.Lookup(flag).Value.String(); got != want {
				t.Errorf("--%s=%s, want %s", flag, got, want)
			}
		}
		if errs := checkRBAC(m); len(errs) > 0 {
			t.Error(errs)
		}
		// With the fleet file (its nodes labeled namespace and pod).
		m = decode(t, renderChart(t, map[string]any{"readinessGate": map[string]any{"enabled": true}}))
		if fs, errs := serveFlags(*container(&m)); len(errs) > 0 || fs.Lookup("readiness-gate").Value.String() != "llmdiag.io/routable" {
			t.Errorf("readinessGate with the fleet file: %v", errs)
		}
	})
}
