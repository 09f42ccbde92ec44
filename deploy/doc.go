// Package deploy holds llmdiag's Kubernetes manifests, as plain YAML: a
// kustomize base (base/: Deployment, Service, ServiceMonitor,
// PrometheusRule, NetworkPolicy, PodDisruptionBudget, the ConfigMap of the
// fleet and thresholds files, and the ServiceAccount, ClusterRole and
// ClusterRoleBinding of Kubernetes service discovery: list and watch
// on pods, services, EndpointSlices and InferencePools, nothing more), the
// overlays overlays/single (one replica, memory store) and overlays/redis
// (three replicas sharing Redis), the Helm chart helm/llmdiag, which
// installs the same objects (the single overlay's by default, the redis
// overlay's with store: redis and replicas: 3), and the layout of the
// Secrets they mount (secrets/, applied by neither, so that applying never
// overwrites the real ones).
//
// The package has no Go code but its tests: they render both overlays with
// kustomize's Go API and the chart with Helm's Go SDK (deploytest, which a
// test applying them to an API server shares), decode every object
// strictly into the Kubernetes and Prometheus Operator types (an unknown
// field fails), and check the manifests against the binary: every flag and LLMDIAG_* variable given to
// the container is one of serve's flags (cli.ServeFlagSet), the probes ask
// the --health-listen port, container ports match --listen,
// --health-listen and --metrics-listen, the Service, ServiceMonitor,
// NetworkPolicy and PodDisruptionBudget select the pods and name ports that
// exist, every file a flag names is mounted from a ConfigMap or Secret
// holding it, the pod runs as the ServiceAccount the ClusterRoleBinding
// grants exactly the discovery ClusterRole, and base/prometheusrule.yaml is
// what `llmdiag rules` writes with the flags in rules.args. The chart must
// render what each overlay does, object by object, but for the differences
// helm_test.go lists with their reasons (Helm's standard labels, the
// ConfigMap's fixed name and the checksum/config annotation that rolls the
// pods instead), and its values.schema.json must refuse unknown keys and
// wrong types. `make manifests` regenerates base/prometheusrule.yaml and
// the chart's files/ (its copy of the rules and of the base's fleet and
// thresholds files; go test -run 'TestPrometheusRule|TestChartFiles'
// -update), and the tests fail while any is stale.
//
// Without -short, two tests take them to a real control plane
// (internal/testing/kubetest): every object of both overlays and of the
// chart's two renders is sent to kube-apiserver as a server-side apply,
// dry-run, with strict field validation, the Prometheus Operator's CRDs
// (testdata/crds, from its Go module) and the InferencePool CRD installed,
// so that a field the API refuses or does not know fails; and serve
// --discovery runs as a ServiceAccount bound to exactly the rendered
// ClusterRole's rules, finding the pods of a pod, an endpointslice and an
// inferencepool job with every rule and reporting a discovery failure
// without any one verb of any one resource.
package deploy
