// Package source is the one contract between llmdiag's readers of a fleet
// and everything that uses them: the Source interface, the Observation a
// refresh yields per node, and the errors a source returns.
//
// A Source promises that a refresh reports every node it knows, each with
// its own state: a node it could not read is reported down or unknown with
// the reason in its errors, and never takes its neighbours with it.
//
// On-demand windows (Source.Window) are bounded work: a request carries a
// Budget of backend queries in its context, a source charges it before it
// sends queries and refuses what would go past it (ErrOverBudget), and
// Reuse says how long an on-demand answer may be reused.
//
// Implementations: source/scrape reads /metrics endpoints directly,
// source/prom reads the Prometheus HTTP API, and source/combine joins the
// two. Package refresh, the server and the CLI use only this package's
// types.
package source
