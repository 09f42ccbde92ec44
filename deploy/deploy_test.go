package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/deploy/deploytest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/server"
)

// imageUser is the numeric user the image runs as (docs/operations.md, Container image).
const imageUser = 65532

// ruleFile is the PrometheusRule the base ships, generated from `llmdiag
// rules` with the flags in rulesArgs.
const (
	ruleFile  = "base/prometheusrule.yaml"
	rulesArgs = "rules.args"
)

// overlay is what one overlay must render to besides the shared checks.
type overlay struct {
	dir          string
	replicas     int32
	minAvailable *intstr.IntOrString // nil: the base's maxUnavailable 1
	redis        bool
}

var overlays = []overlay{
	{dir: "overlays/single", replicas: 1},
	{dir: "overlays/redis", replicas: 3, minAvailable: ptr(intstr.FromInt32(2)), redis: true},
}

func ptr[T any](v T) *T { return &v }

// manifests are the objects an overlay renders to, decoded into their types.
type manifests struct {
	deployments     []appsv1.Deployment
	services        []corev1.Service
	configMaps      []corev1.ConfigMap
	serviceMonitors []monitoringv1.ServiceMonitor
	rules           []monitoringv1.PrometheusRule
	networkPolicies []networkingv1.NetworkPolicy
	pdbs            []policyv1.PodDisruptionBudget
	serviceAccounts []corev1.ServiceAccount
	clusterRoles    []rbacv1.ClusterRole
	bindings        []rbacv1.ClusterRoleBinding
	roles           []rbacv1.Role
	roleBindings    []rbacv1.RoleBinding
}

// render builds dir with kustomize's Go API.
func render(t *testing.T, dir string) []deploytest.Object {
	t.Helper()
	objs, err := deploytest.Kustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decode decodes every object strictly into its type.
func decode(t *testing.T, objs []deploytest.Object) manifests {
	t.Helper()
	var out manifests
	for _, o := range objs {
		if err := out.add(o.Kind, o.YAML); err != nil {
			t.Errorf("%s %s: %v", o.Kind, o.Name, err)
		}
	}
	return out
}

// add decodes one object, refusing a field its type does not have.
func (m *manifests) add(kind string, y []byte) error {
	switch kind {
	case "Deployment":
		return decodeInto(y, &m.deployments)
	case "Service":
		return decodeInto(y, &m.services)
	case "ConfigMap":
		return decodeInto(y, &m.configMaps)
	case "ServiceMonitor":
		return decodeInto(y, &m.serviceMonitors)
	case "PrometheusRule":
		return decodeInto(y, &m.rules)
	case "NetworkPolicy":
		return decodeInto(y, &m.networkPolicies)
	case "PodDisruptionBudget":
		return decodeInto(y, &m.pdbs)
	case "ServiceAccount":
		return decodeInto(y, &m.serviceAccounts)
	case "ClusterRole":
		return decodeInto(y, &m.clusterRoles)
	case "ClusterRoleBinding":
		return decodeInto(y, &m.bindings)
	case "Role":
		return decodeInto(y, &m.roles)
	case "RoleBinding":
		return decodeInto(y, &m.roleBindings)
	}
	return fmt.Errorf("kind %q: the test knows no type for it", kind)
}

func decodeInto[T any](y []byte, list *[]T) error {
	var v T
	if err := yaml.UnmarshalStrict(y, &v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

// secretLayouts decodes secrets/*.yaml strictly, by name.
func secretLayouts(t *testing.T) map[string]corev1.Secret {
	t.Helper()
	files, err := filepath.Glob("secrets/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("secrets/*.yaml: %v (%d files)", err, len(files))
	}
	out := map[string]corev1.Secret{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s corev1.Secret
		if err := yaml.UnmarshalStrict(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if s.Kind != "Secret" || s.APIVersion != "v1" {
			t.Errorf("%s: %s/%s, want v1/Secret", f, s.APIVersion, s.Kind)
		}
		out[s.Name] = s
	}
	return out
}

// TestSecretLayoutsHoldNoSecret: the layouts ship keys, never values.
func TestSecretLayoutsHoldNoSecret(t *testing.T) {
	for name, s := range secretLayouts(t) {
		if len(s.Data) > 0 {
			t.Errorf("secret %s: data %v, want only empty stringData", name, slices.Sorted(mapKeys(s.Data)))
		}
		for k, v := range s.StringData {
			if v != "" {
				t.Errorf("secret %s: key %s holds %d bytes; ship it empty", name, k, len(v))
			}
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestOverlays renders each overlay and checks it against the binary.
func TestOverlays(t *testing.T) {
	secrets := secretLayouts(t)
	rules := rulesSpec(t)
	for _, o := range overlays {
		t.Run(path.Base(o.dir), func(t *testing.T) {
			m := decode(t, render(t, o.dir))
			if t.Failed() {
				return
			}
			for _, err := range check(m, o, secrets, rules) {
				t.Error(err)
			}
		})
	}
}

// TestCheckCatchesMistakes breaks a rendered overlay in the ways a hand edit
// could, and expects check to name each.
func TestCheckCatchesMistakes(t *testing.T) {
	secrets := secretLayouts(t)
	rules := rulesSpec(t)
	o := overlays[1]
	objs := render(t, o.dir)
	for _, tt := range []struct {
		name   string
		break_ func(m *manifests)
		want   string
	}{
		{"a flag serve does not have", func(m *manifests) { c := container(m); c.Args = append(c.Args, "--listen-adress=:1") }, "--listen-adress"},
		{"a flag value serve refuses", func(m *manifests) { c := container(m); c.Args = append(c.Args, "--interval=soon") }, "-interval"},
		{"an environment variable for no flag", func(m *manifests) {
			c := container(m)
			c.Env = append(c.Env, corev1.EnvVar{Name: "LLMDIAG_REDIS_URL", Value: "x"})
		}, "LLMDIAG_REDIS_URL"},
		{"a probe on another port", func(m *manifests) { container(m).ReadinessProbe.GRPC.Port = 8443 }, "readinessProbe"},
		{"--health-listen moved without the probes", func(m *manifests) { setArg(container(m), "--health-listen", ":8082") }, "Probe asks port 8081"},
		{"--listen on another port than the container's", func(m *manifests) { setArg(container(m), "--listen", ":9443") }, "--listen"},
		{"no TLS on a non-loopback --listen", func(m *manifests) { dropArg(container(m), "--tls-cert") }, "needs --insecure"},
		{"a Service aiming at a port the pod lacks", func(m *manifests) { m.services[0].Spec.Ports[0].TargetPort = intstr.FromString("http") }, "targetPort"},
		{"a ServiceMonitor on a port the Service lacks", func(m *manifests) { m.serviceMonitors[0].Spec.Endpoints[0].Port = "prom" }, "ServiceMonitor"},
		{"a ServiceMonitor selecting other labels", func(m *manifests) {
			m.serviceMonitors[0].Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}, "ServiceMonitor"},
		{"a PDB selecting other pods", func(m *manifests) { m.pdbs[0].Spec.Selector.MatchLabels = map[string]string{"app": "other"} }, "PodDisruptionBudget"},
		{"a NetworkPolicy on a port the pod lacks", func(m *manifests) {
			m.networkPolicies[0].Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromString("grpc"))
		}, "NetworkPolicy"},
		{"a stale PrometheusRule", func(m *manifests) { m.rules[0].Spec.Groups[0].Rules = m.rules[0].Spec.Groups[0].Rules[1:] }, "PrometheusRule"},
		{"a file flag outside every mount", func(m *manifests) { setArg(container(m), "--auth-tokens", "/etc/tokens.yaml") }, "--auth-tokens"},
		{"a mounted Secret key the layout lacks", func(m *manifests) { setArg(container(m), "--tls-key", "/etc/llmdiag/tls/key.pem") }, "--tls-key"},
		{"a writable root filesystem", func(m *manifests) { container(m).SecurityContext.ReadOnlyRootFilesystem = ptr(false) }, "readOnlyRootFilesystem"},
		{"root", func(m *manifests) { m.deployments[0].Spec.Template.Spec.SecurityContext.RunAsUser = ptr(int64(0)) }, "runAsUser"},
		{"GOMEMLIMIT over the memory limit", func(m *manifests) { setEnv(container(m), "GOMEMLIMIT", "1GiB") }, "GOMEMLIMIT"},
		{"a serviceAccountName not rendered", func(m *manifests) { m.deployments[0].Spec.Template.Spec.ServiceAccountName = "llmdiag-sa" }, "serviceAccountName"},
		{"the token not mounted", func(m *manifests) { m.deployments[0].Spec.Template.Spec.AutomountServiceAccountToken = ptr(false) }, "automountServiceAccountToken"},
		{"a binding naming another role", func(m *manifests) { m.bindings[0].RoleRef.Name = "view" }, "roleRef"},
		{"a binding naming another account", func(m *manifests) { m.bindings[0].Subjects[0].Name = "default" }, "subjects"},
		{"a role granting more verbs", func(m *manifests) {
			m.clusterRoles[0].Rules[0].Verbs = append(m.clusterRoles[0].Rules[0].Verbs, "create")
		}, "ClusterRole"},
		{"a role reading Secrets", func(m *manifests) {
			m.clusterRoles[0].Rules[0].Resources = append(m.clusterRoles[0].Rules[0].Resources, "secrets")
		}, "ClusterRole"},
		{"the readiness gate updating pods", func(m *manifests) {
			_, gate, _, _ := roles(*m)
			gate.Rules[0].Verbs = append(gate.Rules[0].Verbs, "update")
		}, "patch on pods/status"},
		{"the readiness gate's Role over every Lease", func(m *manifests) { m.roles[0].Rules[1].ResourceNames = nil }, "Role "},
		{"the readiness gate's RoleBinding naming another account", func(m *manifests) { m.roleBindings[0].Subjects[0].Name = "default" }, "RoleBinding"},
		{"no POD_NAMESPACE", func(m *manifests) {
			c := container(m)
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAMESPACE" })
		}, "POD_NAMESPACE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := decode(t, objs)
			if errs := check(m, o, secrets, rules); len(errs) > 0 {
				t.Fatalf("the overlay fails before it is broken: %v", errs)
			}
			tt.break_(&m)
			errs := check(m, o, secrets, rules)
			for _, err := range errs {
				if strings.Contains(err.Error(), tt.want) {
					return
				}
			}
			t.Errorf("check found %v, want an error naming %q", errs, tt.want)
		})
	}
}

func container(m *manifests) *corev1.Container {
	return &m.deployments[0].Spec.Template.Spec.Containers[0]
}

func setArg(c *corev1.Container, name, value string) {
	dropArg(c, name)
	c.Args = append(c.Args, name+"="+value)
}

func dropArg(c *corev1.Container, name string) {
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return a == name || strings.HasPrefix(a, name+"=") })
}

func setEnv(c *corev1.Container, name, value string) {
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

// check returns every way m disagrees with the binary or with itself.
func check(m manifests, o overlay, secrets map[string]corev1.Secret, rules monitoringv1.PrometheusRuleSpec) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	counts := map[string]int{"Deployment": len(m.deployments), "Service": len(m.services), "ConfigMap": len(m.configMaps),
		"ServiceMonitor": len(m.serviceMonitors), "PrometheusRule": len(m.rules), "NetworkPolicy": len(m.networkPolicies), "PodDisruptionBudget": len(m.pdbs),
		"ServiceAccount": len(m.serviceAccounts), "Role": len(m.roles), "RoleBinding": len(m.roleBindings)}
	for kind, n := range counts {
		if n != 1 {
			fail("%d objects of kind %s, want 1", n, kind)
		}
	}
	// Discovery's and the readiness gate's.
	if len(m.clusterRoles) != 2 || len(m.bindings) != 2 {
		fail("%d ClusterRoles and %d ClusterRoleBindings, want 2 each: discovery's and the readiness gate's", len(m.clusterRoles), len(m.bindings))
	}
	if len(errs) > 0 {
		return errs
	}
	d := m.deployments[0]
	pod := d.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		return append(errs, fmt.Errorf("deployment: %d containers, want 1", len(pod.Spec.Containers)))
	}
	c := pod.Spec.Containers[0]
	podLabels := labels.Set(pod.Labels)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != o.replicas {
		fail("deployment: replicas %v, want %d", d.Spec.Replicas, o.replicas)
	}
	if err := selects("Deployment", d.Spec.Selector, podLabels); err != nil {
		errs = append(errs, err)
	}

	// Flags and environment against serve's own flag set.
	fs, flagErrs := serveFlags(c)
	errs = append(errs, flagErrs...)
	if fs == nil {
		return errs
	}
	str := func(name string) string { return fs.Lookup(name).Value.String() }
	if _, err := server.CheckExposure(str("listen"), str("tls-cert") != "", str("auth-tokens") != "" || str("tls-client-ca") != "", str("insecure") == "true"); err != nil {
		fail("container args: %v", err)
	}
	redisFromSecret := false
	for _, e := range c.Env {
		if e.Name == "LLMDIAG_REDIS" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			redisFromSecret = true
			ref := e.ValueFrom.SecretKeyRef
			if _, ok := secrets[ref.Name].StringData[ref.Key]; !ok {
				fail("env LLMDIAG_REDIS: secret %s key %s is not in secrets/", ref.Name, ref.Key)
			}
		}
	}
	if o.redis != redisFromSecret || (o.redis && str("redis") != "") {
		fail("--redis: from a Secret %v, on the command line %q; want from a Secret: %v", redisFromSecret, str("redis"), o.redis)
	}

	// Ports: the container's named ports are the flags' ports.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, f := range map[string]string{"https": "listen", "health": "health-listen", "metrics": "metrics-listen"} {
		_, port, err := net.SplitHostPort(str(f))
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			fail("--%s %q: no port (%v)", f, str(f), errors.Join(err, perr))
			continue
		}
		if ports[name] != int32(n) {
			fail("--%s port %d, but container port %q is %d", f, n, name, ports[name])
		}
	}
	_, healthPort, _ := net.SplitHostPort(str("health-listen"))
	for name, p := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		switch {
		case p == nil || p.GRPC == nil:
			fail("%s: want a grpc probe", name)
		case strconv.Itoa(int(p.GRPC.Port)) != healthPort:
			fail("%s asks port %d, but --health-listen serves health on %q", name, p.GRPC.Port, healthPort)
		}
	}

	// Files the flags name are mounted, from a ConfigMap or Secret holding them.
	for _, f := range []string{"fleet", "thresholds", "tls-cert", "tls-key", "auth-tokens", "tls-client-ca", "redis-password-file"} {
		if p := str(f); p != "" {
			if err := mounted(p, pod.Spec, c, m.configMaps, secrets); err != nil {
				fail("--%s %s: %v", f, p, err)
			}
		}
	}

	// Security.
	psc, sc := pod.Spec.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || sc == nil:
		fail("deployment: pod and container securityContext must be set")
	default:
		if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			fail("securityContext: runAsNonRoot must be true")
		}
		if psc.RunAsUser == nil || *psc.RunAsUser != imageUser {
			fail("securityContext: runAsUser %v, want the image's user %d", psc.RunAsUser, imageUser)
		}
		if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			fail("securityContext: seccompProfile must be RuntimeDefault")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			fail("container securityContext: readOnlyRootFilesystem must be true")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			fail("container securityContext: allowPrivilegeEscalation must be false")
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			fail("container securityContext: capabilities must drop ALL and add none")
		}
	}

	// Resources, and the Go runtime's memory limit under the container's.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			fail("resources: %s request %s and limit %s must be set, request at most the limit", r, req.String(), lim.String())
		}
	}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			q, err := resource.ParseQuantity(strings.TrimSuffix(strings.TrimSuffix(e.Value, "B"), "b"))
			if lim := c.Resources.Limits[corev1.ResourceMemory]; err != nil || q.Cmp(lim) >= 0 {
				fail("GOMEMLIMIT %s must be below the memory limit %s (%v)", e.Value, lim.String(), err)
			}
		}
	}

	// The Service selects the pods and aims at ports they have.
	svc := m.services[0]
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || len(svc.Spec.Selector) == 0 {
		fail("Service selector %v does not select the pods %v", svc.Spec.Selector, pod.Labels)
	}
	svcPorts := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = true
		if p.TargetPort.Type != intstr.String || ports[p.TargetPort.StrVal] == 0 {
			fail("Service port %s: targetPort %s is not a named port of the container", p.Name, p.TargetPort.String())
		}
	}

	sm := m.serviceMonitors[0]
	if err := selects("ServiceMonitor", &sm.Spec.Selector, labels.Set(svc.Labels)); err != nil {
		errs = append(errs, err)
	}
	if len(sm.Spec.Endpoints) == 0 {
		fail("ServiceMonitor: no endpoints")
	}
	for _, e := range sm.Spec.Endpoints {
		if !svcPorts[e.Port] {
			fail("ServiceMonitor endpoint port %q is not a port of the Service", e.Port)
		}
		if e.Port != "metrics" {
			fail("ServiceMonitor endpoint port %q: want metrics (--metrics-listen, plaintext)", e.Port)
		}
	}

	if !reflect.DeepEqual(m.rules[0].Spec, rules) {
		fail("PrometheusRule: its spec differs from `llmdiag rules` %s: run make manifests", rulesFlagsText())
	}

	np := m.networkPolicies[0]
	if err := selects("NetworkPolicy", &np.Spec.PodSelector, podLabels); err != nil {
		errs = append(errs, err)
	}
	for _, in := range np.Spec.Ingress {
		for _, p := range in.Ports {
			if p.Port == nil || (p.Port.Type == intstr.String && ports[p.Port.StrVal] == 0) || (p.Port.Type == intstr.Int && !slices.Contains(slices.Collect(mapValues(ports)), p.Port.IntVal)) {
				fail("NetworkPolicy ingress port %v is not a port of the container", p.Port)
			}
		}
	}

	pdb := m.pdbs[0]
	if err := selects("PodDisruptionBudget", pdb.Spec.Selector, podLabels); err != nil {
		errs = append(errs, err)
	}
	if o.minAvailable != nil {
		if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != *o.minAvailable || pdb.Spec.MaxUnavailable != nil {
			fail("PodDisruptionBudget: minAvailable %v maxUnavailable %v, want minAvailable %v alone", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable, o.minAvailable)
		}
	} else if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		fail("PodDisruptionBudget: want maxUnavailable 1 alone (a single replica must stay evictable)")
	}

	errs = append(errs, checkRBAC(m)...)
	return errs
}

// discoveryRules is all Kubernetes service discovery may do: read pods and
// EndpointSlices (kubernetes_sd_configs roles pod and endpointslice), the
// Services the slices belong to, and InferencePools.
var discoveryRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods", "services"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"inference.networking.k8s.io"}, Resources: []string{"inferencepools"}, Verbs: []string{"list", "watch"}},
}

// gateClusterRules is all the readiness gate may do cluster-wide: patch
// pods/status (it watches pods with discovery's rules).
var gateClusterRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
}

// gateLeaseRules is all the readiness gate may do in its own namespace:
// create its Lease, then get and update that one.
func gateLeaseRules(lease string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{lease}, Verbs: []string{"get", "update"}},
	}
}

// gateSuffix ends the names of the readiness gate's roles and bindings.
const gateSuffix = "-readiness-gate"

// roles splits the rendered ClusterRoles and ClusterRoleBindings into
// discovery's and the readiness gate's (named with gateSuffix).
func roles(m manifests) (disco, gate *rbacv1.ClusterRole, discoB, gateB *rbacv1.ClusterRoleBinding) {
	for i := range m.clusterRoles {
		if strings.HasSuffix(m.clusterRoles[i].Name, gateSuffix) {
			gate = &m.clusterRoles[i]
		} else {
			disco = &m.clusterRoles[i]
		}
	}
	for i := range m.bindings {
		if strings.HasSuffix(m.bindings[i].Name, gateSuffix) {
			gateB = &m.bindings[i]
		} else {
			discoB = &m.bindings[i]
		}
	}
	return disco, gate, discoB, gateB
}

// checkRBAC: the pod runs as the rendered ServiceAccount, the bindings
// grant it the rendered roles, discovery's ClusterRole grants
// discoveryRules and nothing more, the readiness gate's gateClusterRules
// and, in the pod's namespace, gateLeaseRules on the Lease its name says.
func checkRBAC(m manifests) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	pod := m.deployments[0].Spec.Template.Spec
	disco, gate, discoB, gateB := roles(m)
	if disco == nil || gate == nil || discoB == nil || gateB == nil {
		fail("ClusterRoles %d and ClusterRoleBindings %d: want discovery's and the readiness gate's (named …%s)", len(m.clusterRoles), len(m.bindings), gateSuffix)
		return errs
	}
	sa := m.serviceAccounts[0]
	for _, p := range []struct {
		b    *rbacv1.ClusterRoleBinding
		role string
	}{{discoB, disco.Name}, {gateB, gate.Name}} {
		if p.b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: p.role}) {
			fail("ClusterRoleBinding %s: roleRef %+v, want the ClusterRole %s", p.b.Name, p.b.RoleRef, p.role)
		}
		if len(p.b.Subjects) != 1 || p.b.Subjects[0].Kind != rbacv1.ServiceAccountKind || p.b.Subjects[0].Name != sa.Name || p.b.Subjects[0].Namespace == "" {
			fail("ClusterRoleBinding %s: subjects %+v, want the ServiceAccount %s with its namespace alone", p.b.Name, p.b.Subjects, sa.Name)
		}
	}
	if !reflect.DeepEqual(gate.Rules, gateClusterRules) {
		fail("ClusterRole %s: rules %+v, want exactly patch on pods/status", gate.Name, gate.Rules)
	}
	role, rb := m.roles[0], m.roleBindings[0]
	if role.Name != gate.Name || !reflect.DeepEqual(role.Rules, gateLeaseRules(gate.Name)) {
		fail("Role %s: rules %+v, want exactly create leases, and get and update on the Lease %s", role.Name, role.Rules, gate.Name)
	}
	if rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}) ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Kind != rbacv1.ServiceAccountKind || rb.Subjects[0].Name != sa.Name ||
		len(discoB.Subjects) != 1 || rb.Subjects[0].Namespace != discoB.Subjects[0].Namespace || rb.Namespace != role.Namespace {
		fail("RoleBinding %s: roleRef %+v subjects %+v, want the Role %s, in its namespace, for the ServiceAccount %s", rb.Name, rb.RoleRef, rb.Subjects, role.Name, sa.Name)
	}
	hasPodNamespace := slices.ContainsFunc(pod.Containers[0].Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	})
	if !hasPodNamespace {
		fail("deployment: env POD_NAMESPACE from metadata.namespace missing: --readiness-gate's Lease is in the pod's namespace, where the Role %s is", role.Name)
	}

	if pod.ServiceAccountName != sa.Name {
		fail("deployment: serviceAccountName %q, but the ServiceAccount rendered is %q", pod.ServiceAccountName, sa.Name)
	}
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		fail("deployment: automountServiceAccountToken must be true: discovery reads the API with the token")
	}
	if !reflect.DeepEqual(disco.Rules, discoveryRules) {
		fail("ClusterRole %s: rules %+v, want exactly list and watch on pods, services, endpointslices and inferencepools", disco.Name, disco.Rules)
	}
	return errs
}

func mapValues[V any](m map[string]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// selects reports an error unless sel is a non-empty selector matching set.
func selects(what string, sel *metav1.LabelSelector, set labels.Set) error {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return fmt.Errorf("%s: empty selector", what)
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return fmt.Errorf("%s selector: %w", what, err)
	}
	if !s.Matches(set) {
		return fmt.Errorf("%s selector %s does not match the labels %v", what, s, set)
	}
	return nil
}

// serveFlags parses the container's args and LLMDIAG_* environment with
// serve's flag set, as the binary would; every name must be one of its
// flags, every value one it takes.
func serveFlags(c corev1.Container) (*flag.FlagSet, []error) {
	var errs []error
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		return nil, []error{fmt.Errorf("container args %q: want serve and its flags", c.Args)}
	}
	fs := cli.ServeFlagSet()
	fs.SetOutput(&bytes.Buffer{})
	for _, a := range c.Args[1:] {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") || fs.Lookup(name) == nil {
			errs = append(errs, fmt.Errorf("container arg %q: serve has no flag --%s", a, name))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if err := fs.Parse(c.Args[1:]); err != nil {
		return nil, []error{fmt.Errorf("container args: %w", err)}
	}
	if fs.NArg() > 0 {
		return nil, []error{fmt.Errorf("container args: %q after the flags", fs.Args())}
	}
	for _, e := range c.Env {
		name, ok := strings.CutPrefix(e.Name, "LLMDIAG_")
		if !ok {
			continue
		}
		flagName := strings.ReplaceAll(strings.ToLower(name), "_", "-")
		if fs.Lookup(flagName) == nil {
			errs = append(errs, fmt.Errorf("env %s: serve has no flag --%s", e.Name, flagName))
			continue
		}
		if e.ValueFrom == nil {
			if err := fs.Set(flagName, e.Value); err != nil {
				errs = append(errs, fmt.Errorf("env %s=%q: %w", e.Name, e.Value, err))
			}
		}
	}
	return fs, errs
}

// mounted reports whether the file p is in a volume mounted into c whose
// ConfigMap (rendered) or Secret (its layout in secrets/) holds that key.
func mounted(p string, spec corev1.PodSpec, c corev1.Container, cms []corev1.ConfigMap, secrets map[string]corev1.Secret) error {
	for _, vm := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(p, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok {
			continue
		}
		if vm.SubPath != "" {
			return fmt.Errorf("mounted with subPath %s: a changed ConfigMap or Secret would not reach it", vm.SubPath)
		}
		for _, v := range spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				for _, cm := range cms {
					if cm.Name == v.ConfigMap.Name {
						if _, ok := cm.Data[rel]; ok {
							return nil
						}
						return fmt.Errorf("ConfigMap %s has no key %s", cm.Name, rel)
					}
				}
				return fmt.Errorf("ConfigMap %s is not rendered", v.ConfigMap.Name)
			case v.Secret != nil:
				s, ok := secrets[v.Secret.SecretName]
				if !ok {
					return fmt.Errorf("Secret %s has no layout in secrets/", v.Secret.SecretName)
				}
				if _, ok := s.StringData[rel]; !ok {
					return fmt.Errorf("Secret %s (secrets/) has no key %s", s.Name, rel)
				}
				return nil
			}
			return fmt.Errorf("volume %s is neither a ConfigMap nor a Secret", v.Name)
		}
		return fmt.Errorf("volume mount %s names no volume", vm.Name)
	}
	return errors.New("not under any volume mount of the container")
}

// rulesFlags are the flags of `llmdiag rules` the PrometheusRule is
// generated with, one a line in rules.args.
func rulesFlags(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(rulesArgs)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func rulesFlagsText() string {
	b, _ := os.ReadFile(rulesArgs)
	return strings.Join(strings.Fields(string(b)), " ")
}

// llmdiagRules is the output of `llmdiag rules` with rulesFlags.
func llmdiagRules(t *testing.T) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"rules"}, rulesFlags(t)...)
	if err := cli.Run(context.Background(), args, cli.Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("llmdiag %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

// rulesSpec decodes `llmdiag rules` strictly as a PrometheusRule's spec.
func rulesSpec(t *testing.T) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	var spec monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(llmdiagRules(t), &spec); err != nil {
		t.Fatalf("llmdiag rules as a PrometheusRule spec: %v", err)
	}
	if len(spec.Groups) == 0 || len(spec.Groups[0].Rules) == 0 {
		t.Fatalf("llmdiag rules: no rules")
	}
	return spec
}

// TestPrometheusRule regenerates base/prometheusrule.yaml from `llmdiag
// rules` and compares (go test -run TestPrometheusRule -update, which make
// manifests runs, rewrites it): it fails when the committed one is stale.
func TestPrometheusRule(t *testing.T) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Generated by make manifests (deploy/deploy_test.go, TestPrometheusRule)
# from llmdiag rules %s (deploy/rules.args).
# Do not edit: change rules.args or base/thresholds.yaml, then run make manifests.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: llmdiag
  labels:
    app.kubernetes.io/name: llmdiag
spec:
`, rulesFlagsText())
	for _, line := range strings.SplitAfter(string(llmdiagRules(t)), "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	testkit.Golden(t, ruleFile, b.Bytes())

	// The chart's copy: the spec alone, which its template indents.
	var c bytes.Buffer
	fmt.Fprintf(&c, `# Generated by make manifests (deploy/deploy_test.go, TestPrometheusRule)
# from llmdiag rules %s (deploy/rules.args): the spec of
# deploy/base/prometheusrule.yaml. Do not edit.
`, rulesFlagsText())
	c.Write(llmdiagRules(t))
	testkit.Golden(t, chartRuleFile, c.Bytes())
}

// chartRuleFile is the PrometheusRule's spec in the chart, which
// templates/prometheusrule.yaml reads (.Files.Get reads no file outside the
// chart).
const chartRuleFile = "helm/llmdiag/files/rules.yaml"

// TestChartFiles: the chart's files/fleet.yaml and files/thresholds.yaml
// are the base's (make manifests copies them; -update rewrites them).
func TestChartFiles(t *testing.T) {
	for _, f := range []string{"fleet.yaml", "thresholds.yaml"} {
		b, err := os.ReadFile(filepath.Join("base", f))
		if err != nil {
			t.Fatal(err)
		}
		testkit.Golden(t, filepath.Join("helm", "llmdiag", "files", f), b)
	}
}

// TestOverlayInAnotherNamespace: an overlay that sets its namespace (what
// `kustomize edit set namespace` writes) moves the ClusterRoleBinding's
// subject with the ServiceAccount, as base/rbac.yaml says.
func TestOverlayInAnotherNamespace(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs(overlays[0].dir)
	if err != nil {
		t.Fatal(err)
	}
	single, err := filepath.Rel(dir, abs) // kustomize takes no absolute path
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: ml\nresources:\n  - " + single + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	m := decode(t, render(t, dir))
	if len(m.bindings) != 2 || len(m.roleBindings) != 1 || len(m.serviceAccounts) != 1 {
		t.Fatalf("%d cluster role bindings, %d role bindings, %d ServiceAccounts, want 2, 1, 1", len(m.bindings), len(m.roleBindings), len(m.serviceAccounts))
	}
	for _, s := range [][]rbacv1.Subject{m.bindings[0].Subjects, m.bindings[1].Subjects, m.roleBindings[0].Subjects} {
		if len(s) != 1 || s[0].Namespace != "ml" || m.serviceAccounts[0].Namespace != "ml" {
			t.Errorf("subjects %+v, ServiceAccount in %q; want both in ml", s, m.serviceAccounts[0].Namespace)
		}
	}
	if m.roles[0].Namespace != "ml" || m.roleBindings[0].Namespace != "ml" {
		t.Errorf("the readiness gate's Role in %q, RoleBinding in %q; want both in ml", m.roles[0].Namespace, m.roleBindings[0].Namespace)
	}
}
