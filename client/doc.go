// Package client is the Go client of llmdiag's DiagnosisService. It speaks
// the Connect protocol (JSON or binary), gRPC or gRPC-Web, over cleartext
// HTTP/2 for http:// URLs and TLS for https:// URLs, with an optional bearer
// token. The CLI is a thin user of this package.
package client
