// Package telemetry holds llmdiag's own Prometheus metrics: RPCs by procedure
// and code with latency histograms (a Connect interceptor), refresh duration
// and errors, nodes by status, and the node set's bounds (nodes kept,
// refused by --max-nodes, skipped for an invalid id, removed after
// --retention). No metric carries a node label: nodes are counted, never
// named, so churn in the fleet never grows the registry. Everything
// registers on a Registerer passed in, never the global one.
package telemetry
