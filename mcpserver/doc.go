// Package mcpserver serves llmdiag to AI agents over the Model Context
// Protocol (github.com/modelcontextprotocol/go-sdk). It is a thin layer over
// the four unary DiagnosisService calls (Service): serve mounts it over
// streamable HTTP at /mcp on the service's port, behind the same
// authentication as every other procedure (auth/policy.go grants /mcp to
// reader, router and admin), and `llmdiag mcp` runs it over stdio against a
// running llmdiag reached over Connect.
//
// Tools, each with a JSON schema inferred from its input struct:
//
//   - list_nodes: the fleet, filtered by model, engine, status and labels.
//   - unhealthy_nodes: the nodes that are not OK, worst first
//     (report.Unhealthy, the order Slack's command lists them in too):
//     CRIT, DOWN, WARN, then UNKNOWN, and within one status the highest
//     load score first.
//   - diagnose_node: one node's verdict, in English or Chinese, Markdown or
//     text.
//   - get_node_metrics: one node's indicators over a window.
//   - compare_percentiles: a latency metric at chosen percentiles across
//     nodes, models, engines or the values of a fleet-file label.
//   - explain_cause: the runbook of a root cause, named in any usual
//     spelling (CAUSE_DECODE_BOUND, decode-bound, "decode bound").
//
// Each answer is concise Markdown with the key numbers (its text content)
// and the same facts as structured content. A failed call is a tool error
// (IsError) that names the node or the argument at fault; the service's
// Connect codes are mapped to words an agent can act on (callError).
//
// Resources: one runbook per cause and language, llmdiag://runbooks/<slug>
// (English) and llmdiag://runbooks/zh/<slug> (Chinese), as text/markdown,
// and llmdiag://thresholds, the thresholds in force as the YAML file
// `llmdiag thresholds` prints.
//
// Every tool call is bounded: Options.CallTimeout is its deadline and
// Options.MaxInFlight the calls in flight at once (beyond it a call is
// refused, saying so); a fleet listing reads at most maxPages pages.
package mcpserver
