// Package source is the one contract between llmdiag's readers of a fleet
// and everything that uses them: the Source interface, the Observation a
// refresh yields per node, and the errors a source returns.
//
// A Source promises that a refresh reports every node it knows, each with
// its own state: a node it could not read is reported down or unknown with
// the reason in its errors, and never takes its neighbours with it.
//
// Implementations: source/scrape reads /metrics endpoints directly,
// source/prom reads the Prometheus HTTP API, and source/combine joins the
// two. Package refresh, the server and the CLI use only this package's
// types.
package source
