// Package kubetest runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver, and kube-controller-manager when asked, as plain loopback
// processes, with no kubelet, scheduler or container runtime.
//
// What it promises:
//
//   - Start returns once kube-apiserver answers /healthz, the default
//     namespace exists and the controller manager (when asked) answers
//     /healthz: every wait is on a condition, none is a sleep. Each test gets
//     its own control plane on free 127.0.0.1 ports, its state in
//     t.TempDir(); nothing is shared between tests.
//   - The processes are stopped by their pids when the test ends, and killed
//     if the test binary dies without running its cleanups (a -timeout
//     panic, a SIGKILL): kube-controller-manager through childproc's
//     parent-death signal, etcd and kube-apiserver (started by envtest in
//     process groups of their own) by a guard process that kills those
//     groups once the test binary's end of a pipe closes.
//   - The binaries are the ones scripts/k8sbins.sh builds from Go modules
//     into $HOME/.cache/llmdiag/k8sbins/<key> (the key names the Kubernetes,
//     etcd and Go versions and hashes hack/k8sbins and hack/etcdbin), or the
//     directory LLMDIAG_K8S_BINS names. Under -short the test is skipped;
//     when the binaries are missing it fails (never skips) with the command
//     that builds them.
//   - Authorization is RBAC, as in a real cluster. Cluster.Config is an
//     admin (system:masters) over client certificates, Cluster.Kubeconfig a
//     file holding it; User and ServiceAccount give identities with no rights
//     beyond what Grant binds to them, so a test can check least privilege.
//   - Objects a kubelet or scheduler would write are written by helpers:
//     CreateNode registers a Node, MarkPodReady sets a pod's status as the
//     kubelet does once its containers are ready (so the EndpointSlice
//     controller lists it); RunKubelet keeps pods' Ready condition as the
//     kubelet computes it (PodReady: every container ready and every
//     readiness gate's condition True), so that a readiness gate takes a
//     pod out of its EndpointSlices. InstallCRDs and InstallInferencePool install
//     CustomResourceDefinitions and wait until they are served.
//   - StopAPIServer and StartAPIServer take kube-apiserver away and bring
//     it back on the same address, etcd keeping the objects, so that a test
//     can check what a client does while the API server is away.
//
// The control plane is started through controller-runtime's envtest
// (sigs.k8s.io/controller-runtime/pkg/envtest), which generates the
// certificates, the service-account signing key and the users.
package kubetest
