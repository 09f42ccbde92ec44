// Package deploy holds llmdiag's Kubernetes manifests, as plain YAML: a
// kustomize base (base/: Deployment, Service, ServiceMonitor,
// PrometheusRule, NetworkPolicy, PodDisruptionBudget and the ConfigMap of
// the fleet and thresholds files), the overlays overlays/single (one
// replica, memory store) and overlays/redis (three replicas sharing Redis),
// and the layout of the Secrets they mount (secrets/, not applied by the
// overlays, so that applying never overwrites the real ones).
//
// The package has no Go code but its tests: they render both overlays with
// kustomize's Go API, decode every object strictly into the Kubernetes and
// Prometheus Operator types (an unknown field fails), and check the
// manifests against the binary: every flag and LLMDIAG_* variable given to
// the container is one of serve's flags (cli.ServeFlagSet), the probes ask
// the --health-listen port, container ports match --listen,
// --health-listen and --metrics-listen, the Service, ServiceMonitor,
// NetworkPolicy and PodDisruptionBudget select the pods and name ports that
// exist, every file a flag names is mounted from a ConfigMap or Secret
// holding it, and base/prometheusrule.yaml is what `llmdiag rules` writes
// with the flags in rules.args: `make manifests` regenerates it (go test
// -run TestPrometheusRule -update), and the test fails when it is stale.
package deploy
