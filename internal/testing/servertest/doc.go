// Package servertest starts llmdiag's service for a test, the way `llmdiag
// serve` runs it: server.Handler over server.Serve on a loopback port, so
// every test talks to the real HTTP stack (Connect, gRPC, gRPC-Web,
// HTTP/1.1 and unencrypted HTTP/2). One helper keeps every test's start-up
// the same and stops each service, and the streams it
// holds, when its test ends.
//
// It lives apart from package testkit because it imports package server:
// testkit stays importable by the tests of every package server depends on.
package servertest
