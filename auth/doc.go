// Package auth says who is calling llmdiag and what they may call.
//
// A caller is a Principal: a name and a role. Principals come from bearer
// tokens listed in a file (see File: names, roles, and each token or its
// SHA-256, re-read when the file changes) and from verified mTLS client
// certificates whose subject common name or a subject alternative name (DNS,
// URI, email) the same file maps to a role. Roles grant procedures (Allowed):
// reader the five unary DiagnosisService RPCs and /mcp, router those,
// StreamHealth and the routability check (/routable/{node}),
// admin everything on the port, server reflection and /metrics included;
// grpc.health.v1 is public (Public) so probes need no credentials.
//
// A reload of the file is signalled (File.Reloaded, the context of one
// generation of the file, ended by the next reload), so that what was
// granted before it, an open stream, can be checked again; File.Run looks
// at the file every CheckEvery without waiting for a request.
//
// The HTTP middleware that applies this to every request is in package
// server (server/auth.go); it puts the Principal into the request's context
// (NewContext) for the handlers and middlewares after it (FromContext).
package auth
