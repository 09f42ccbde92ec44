// Package client is the Go client of llmdiag's DiagnosisService. It speaks
// the Connect protocol (JSON or binary), gRPC or gRPC-Web, over cleartext
// HTTP/2 for http:// URLs and TLS for https:// URLs (HTTP/2 by ALPN), with
// an optional bearer token. WithCA verifies the service against a private
// CA and WithClientCertificate presents a client certificate (mTLS);
// TLSFiles loads both from PEM files. The CLI is a thin user of this
// package.
//
// For request routers, Client.Watch keeps a local View of the selected
// nodes' health from StreamHealth: it reconnects with jittered exponential
// backoff, resumes after the last event, and swaps in a resynchronised
// state atomically. The View's lookups — Routable, Score and Pick (the
// least loaded routable candidate, random among near-equal scores) — read
// an immutable snapshot through an atomic pointer, in nanoseconds and
// without allocating, and fail open by default when the view is stale, the
// service unreachable or a node unknown (WithFailPolicy; Stale and Status
// say which).
package client
