// Package telemetry holds llmdiag's own Prometheus metrics: RPCs by procedure
// and code with latency histograms (a Connect interceptor), refresh duration
// and errors, and nodes by status. Everything registers on a Registerer passed
// in, never the global one.
package telemetry
