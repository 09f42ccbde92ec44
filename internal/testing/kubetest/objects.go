package kubetest

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// InferencePoolCRD is the InferencePool CustomResourceDefinition of
// sigs.k8s.io/gateway-api-inference-extension at InferencePoolVersion
// (testdata/inferencepools.yaml, copied from the module's
// config/crd/bases), and InferencePoolResource the resource it serves.
var (
	//go:embed testdata/inferencepools.yaml
	InferencePoolCRD      []byte
	InferencePoolResource = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}
)

// InferencePoolVersion is the gateway-api-inference-extension release
// InferencePoolCRD comes from.
const InferencePoolVersion = "v1.6.2"

// InstallInferencePool installs InferencePoolCRD and returns once the API
// server serves InferencePools.
func (c *Cluster) InstallInferencePool(t testing.TB) {
	t.Helper()
	c.InstallCRDs(t, InferencePoolCRD)
}

// InstallCRDs installs the CustomResourceDefinitions in docs (YAML, one or
// more documents each) and returns once the API server serves every one.
func (c *Cluster) InstallCRDs(t testing.TB, docs ...[]byte) {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range docs {
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := d.Decode(crd); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("kubetest: decode a CustomResourceDefinition: %v", err)
			}
			if crd.Name != "" {
				crds = append(crds, crd)
			}
		}
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{CRDs: crds, MaxTime: startTimeout}); err != nil {
		t.Fatalf("kubetest: install CustomResourceDefinitions: %v", err)
	}
}

// Namespace creates a namespace.
func (c *Cluster) Namespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx(t), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubetest: create namespace %s: %v", name, err)
	}
}

// CreateNode registers a Node named name, Ready, with internalIP as its
// address, as a kubelet would: a pod whose spec.nodeName is name then runs
// there for every controller.
func (c *Cluster) CreateNode(t testing.TB, name, internalIP string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
	}}
	node, err := c.Client.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create node %s: %v", name, err)
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: internalIP},
			{Type: corev1.NodeHostName, Address: name},
		},
	}
	if node, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx(t), node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("kubetest: set node %s Ready: %v", name, err)
	}
	return node
}

// MarkPodReady sets the status of namespace/name as the kubelet does once
// every container has started and passed its readiness probe: phase
// Running, PodScheduled, Initialized, ContainersReady and Ready true,
// podIP (and hostIP, from its node's InternalIP when the node exists), and
// a running, ready status per container. The EndpointSlice controller then
// lists the pod as a ready endpoint.
func (c *Cluster) MarkPodReady(t testing.TB, namespace, name, podIP string) *corev1.Pod {
	t.Helper()
	pods := c.Client.CoreV1().Pods(namespace)
	pod, err := pods.Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubetest: get pod %s/%s: %v", namespace, name, err)
	}
	now := metav1.Now()
	st := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		PodIP:     podIP,
		PodIPs:    []corev1.PodIP{{IP: podIP}},
		StartTime: &now,
		QOSClass:  corev1.PodQOSBestEffort,
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	if pod.Spec.NodeName != "" {
		if node, err := c.Client.CoreV1().Nodes().Get(ctx(t), pod.Spec.NodeName, metav1.GetOptions{}); err == nil {
			for _, a := range node.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					st.HostIP, st.HostIPs = a.Address, []corev1.HostIP{{IP: a.Address}}
					break
				}
			}
		}
	}
	started := true
	for _, ctr := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, ImageID: ctr.Image, Ready: true, Started: &started,
			ContainerID: "containerd://" + pod.Name + "-" + ctr.Name,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	pod.Status = st
	if pod, err = pods.UpdateStatus(ctx(t), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("kubetest: mark pod %s/%s ready: %v", namespace, name, err)
	}
	return pod
}

// UserConfig provisions a user authenticated by a client certificate
// (common name name, organizations groups) and returns its config. It has
// no rights but its groups': system:masters is an admin, any other user
// needs Grant.
func (c *Cluster) UserConfig(t testing.TB, name string, groups ...string) *rest.Config {
	t.Helper()
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		t.Fatalf("kubetest: add user %s: %v", name, err)
	}
	return u.Config()
}

// ServiceAccount creates the ServiceAccount namespace/name (the namespace
// must exist) and returns a config authenticating with a token the API
// server issued for it (TokenRequest, valid an hour). It has no rights
// until Grant gives some.
func (c *Cluster) ServiceAccount(t testing.TB, namespace, name string) *rest.Config {
	t.Helper()
	sas := c.Client.CoreV1().ServiceAccounts(namespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := sas.Create(ctx(t), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("kubetest: create service account %s/%s: %v", namespace, name, err)
	}
	hour := int64(3600)
	tr, err := sas.CreateToken(ctx(t), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: token for service account %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// UserSubject and ServiceAccountSubject are subjects for Grant.
func UserSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// ServiceAccountSubject is the ServiceAccount namespace/name as a subject.
func ServiceAccountSubject(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

// Grant binds subject to rules: a Role and RoleBinding in namespace, or a
// ClusterRole and ClusterRoleBinding when namespace is "". Both are named
// name. It returns once the API server's authorizer allows subject the
// first verb on the first resource of every rule (RBAC reads bindings
// through a cache).
func (c *Cluster) Grant(t testing.TB, namespace, name string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	rbac := c.Client.RbacV1()
	var err error
	if namespace == "" {
		_, err = rbac.ClusterRoles().Create(ctx(t), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		if err == nil {
			_, err = rbac.ClusterRoleBindings().Create(ctx(t), &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{subject},
			}, metav1.CreateOptions{})
		}
	} else {
		_, err = rbac.Roles(namespace).Create(ctx(t), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		if err == nil {
			_, err = rbac.RoleBindings(namespace).Create(ctx(t), &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   []rbacv1.Subject{subject},
			}, metav1.CreateOptions{})
		}
	}
	if err != nil {
		t.Fatalf("kubetest: grant %s: %v", name, err)
	}
	user, groups := subjectUser(subject)
	for _, r := range rules {
		if len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0 {
			continue
		}
		res, sub, _ := strings.Cut(r.Resources[0], "/") // pods/status: a subresource
		attrs := &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: res, Subresource: sub}
		if len(r.ResourceNames) > 0 {
			attrs.Name = r.ResourceNames[0]
		}
		what := fmt.Sprintf("%s to be allowed to %s %s", subject.Name, attrs.Verb, r.Resources[0])
		waitFor(t, what, func() bool {
			sar, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx(t), &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: attrs},
			}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed
		})
	}
}

// subjectUser is the user name and groups the API server authenticates
// subject as.
func subjectUser(s rbacv1.Subject) (string, []string) {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		return "system:serviceaccount:" + s.Namespace + ":" + s.Name,
			[]string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
	case rbacv1.GroupKind:
		return "kubetest-member", []string{s.Name, "system:authenticated"}
	default:
		return s.Name, []string{"system:authenticated"}
	}
}

// WriteKubeconfig writes cfg (client certificate or bearer token) as the
// kubeconfig file name in the cluster's directory and returns its path.
func (c *Cluster) WriteKubeconfig(t testing.TB, cfg *rest.Config, name string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
	}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "user"}
	kc.CurrentContext = "kubetest"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.Dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitFor is testkit.Eventually with the package's bound.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.Wait{For: startTimeout, Every: 100 * time.Millisecond}.Until(t, what, cond)
}
