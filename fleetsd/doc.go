// Package fleetsd keeps a fleet current from Prometheus's own service
// discovery: a file whose only key is scrape_configs, in Prometheus's schema
// (parsed by Prometheus's config package, so the file means the same to
// both), run by Prometheus's discovery Manager (kubernetes, file, http, dns
// and static configs), relabeled by Prometheus's own target relabeling, and
// turned into fleet.Node values.
//
// What it promises:
//
//   - Parse refuses every key llmdiag does not act on, naming it: a file it
//     accepts is scraped as it says.
//   - Each target is relabeled as Prometheus relabels it (scrape.PopulateLabels:
//     __address__, __scheme__, __metrics_path__, __param_*, meta labels, the
//     job's relabel_configs, then the __ labels dropped). A job without
//     relabel_configs gets the rules of Defaults for its Kubernetes role, so
//     a plain vLLM or SGLang Deployment needs none; those rules are data
//     (defaults.yaml), to read and copy.
//   - The target labels node, model, engine, role and dcgm_url set the
//     node's id, model, engine, role and DCGM exporter URL; every other
//     label is a fleet label. Without node the id is
//     <namespace>/<pod>:<port> for a Kubernetes pod, else the address (or,
//     with Options.IDLabel, that label: --prometheus's --node-label).
//   - The set is bounded: at most Options.MaxTargets nodes; beyond, and for
//     targets whose id or labels are not valid, targets are refused,
//     counted (llmdiag_discovery_refused) and warned about once per change.
//   - A discovery that fails (a bad file, an http_sd endpoint that does not
//     answer, a kubeconfig that cannot be used) keeps its last targets: the
//     Manager keeps each provider's, and a failing job whose targets come
//     back empty keeps its previous nodes. A failure is warned about once
//     when it starts and once when it ends, and counted
//     (llmdiag_discovery_failures_total{job}, llmdiag_discovery_failing{job}).
//   - Updates are debounced by the Manager (Options.Debounce); each one
//     hands the whole node set, sorted by id, to the caller.
//
// A failure is seen four ways: an error a mechanism logs (file and http
// discovery log each failed read or refresh, inferencepool each LIST or
// WATCH refused), a mechanism that has sent no targets
// Options.FirstUpdate after it started (Kubernetes discovery sends
// nothing until it has listed every object, and the Kubernetes client
// retries a refused connection without a word), a rise of Prometheus's
// prometheus_sd_kubernetes_failures_total (a LIST or WATCH the API server
// answered with an error, as for want of RBAC), which marks every
// kubernetes_sd_configs job failing, the counter being the mechanism's,
// and the Kubernetes client's requests by API server (client-go's request
// result metric, which the package installs when it is initialized): a
// kubernetes_sd_configs job whose API server left requests unanswered (or
// answered 5xx) within a Debounce is failing until one is answered again
// (role inferencepool logs the same of its own client's requests). So an
// API server that goes away after the first list, which the client
// retries quietly while keeping its last objects, is warned about; the
// last targets stay all the same. Meanwhile it is asked every Debounce
// whether it is back, and once it is the job's discoverers start anew (a
// fresh LIST) rather than waiting for the client's backoff (up to a
// minute).
package fleetsd
