// Package server serves llmdiag's DiagnosisService on one port: Connect (JSON
// and binary), gRPC and gRPC-Web over HTTP/1.1 and cleartext HTTP/2, plus
// grpc.health.v1, server reflection and /metrics. Handlers read the store;
// windows other than the refresh's default are computed on demand through a
// source.Source. Every handler exit is a connect error with the right code.
package server
