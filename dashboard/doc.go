// Package dashboard builds llmdiag's fleet dashboard for Grafana, with the
// Grafana Foundation SDK
// (github.com/grafana/grafana-foundation-sdk/go, pinned in go.mod: it is
// pre-1.0).
//
// Every fleet panel reads the recording rules `llmdiag rules` writes
// (package promrules), never the engines' own metrics, so the dashboard
// shows exactly what the verdicts and alerts use: the status row reads the
// firing llmdiag alerts (ALERTS, labelled llmdiag_indicator) and
// llmdiag:node_down; the load row llmdiag:queue, llmdiag:running,
// llmdiag:queue_running_ratio, llmdiag:kv_pressure, the preemption rate and
// the token rates; the latency row the P99 records and, for P50 and P95,
// histogram_quantile over the bucket-rate records the P99s are read from.
// The last row shows llmdiag's own metrics (package telemetry: RPCs,
// refreshes, nodes by status; package lease: the ingest lease with --redis).
// Metric and record names come from the constants of those packages.
//
// Template variables: datasource (a Prometheus data source), model and
// node (multi-valued, "All" is the regex .*). Config.NodeLabel and
// Config.Window must be those `llmdiag rules` was run with: they name the
// node label and the records (llmdiag:preemptions:rate5m).
package dashboard
