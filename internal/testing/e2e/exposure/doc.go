// Package exposure checks `llmdiag serve` exposed beyond loopback: TLS
// and mutual TLS asked by real grpcurl and curl and by the CLI, with the
// certificate reloaded in place; bearer tokens and roles per procedure,
// gRPC reflection, the separate health and metrics ports; public runbooks
// beside protected procedures; plain HTTP GETs with their cache headers.
//
// Under -short the quick checks (the health port, runbooks, tokens and
// roles) still run; TLS with grpcurl and curl and the GETs on the
// simulated fleet skip.
package exposure
