// Package server serves llmdiag's DiagnosisService on one port: Connect (JSON
// and binary), gRPC and gRPC-Web over HTTP/1.1 and cleartext HTTP/2, or over
// TLS with HTTP/2 by ALPN, plus grpc.health.v1, server reflection and
// /metrics. Handlers read the store; windows other than the refresh's
// default are computed on demand through a source.Source. Every handler exit
// is a connect error with the right code.
//
// Files by concern:
//
//   - server.go: the one-port handler, health, Serve;
//   - service.go: the Service, its configuration and shared error helpers;
//   - nodes.go and pages.go: ListNodes and GetNode; node.go: GetNodeMetrics and
//     DiagnoseNode; compare.go: ComparePercentiles; stream.go: StreamHealth;
//     history.go: GetNodeHistory;
//   - cache.go: Cache-Control on the reads' plain GET answers;
//   - answers.go: GetNodeMetrics' and DiagnoseNode's default-window answers
//     prepared once per store generation (and per read mask) and served by
//     copying their bytes;
//   - readmask.go: the read_mask of ListNodes, GetNodeMetrics and
//     DiagnoseNode, paths relative to the resource returned (package
//     readmask checks and applies it);
//   - auth.go: authentication and per-procedure roles in front of every path
//     but health (package auth holds the principals and the policy);
//   - limits.go, listen.go, compress.go: stream caps, rate limits, the
//     request read deadline, the connection cap, bounded decompression;
//   - pending.go: connections that have sent no request yet, capped per
//     remote address and closed at a deadline (ServeOptions.Pending), so
//     one address holding idle connections cannot take the port's;
//   - tls.go: TLS with certificates reloaded from files (package tlsreload).
package server
