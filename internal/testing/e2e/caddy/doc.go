// Package caddy checks `llmdiag serve`'s GET /routable/{node} against a
// real Caddy: a reverse_proxy over the simulator's overloaded fleet whose
// active health checks ask llmdiag, with a router's bearer token, whether
// each node is routable. It shows that Caddy stops sending requests to the
// saturated node and keeps its healthy peer, and what Caddy does once
// llmdiag is gone: with the plain configuration every upstream fails its
// check and Caddy answers 503 (fail-closed); with the handle_errors
// fallback docs/integrations.md shows, a check that cannot reach llmdiag
// passes and traffic flows on (fail-open). The configuration it runs is
// the one docs/integrations.md shows.
//
// The tests skip under -short.
package caddy
