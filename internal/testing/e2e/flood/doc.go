// Package flood checks that one client address cannot starve serve's port
// on the default limits: a TLS port with tokens and the seed fleet, 50
// legitimate clients each from its own loopback address calling unary
// RPCs and health checks (a fresh connection per health check, as a load
// balancer's probe opens one), first alone, then while 127.0.0.1 opens
// 3,000 connections in 30 s and holds each idle without sending a byte.
// No legitimate call and no health check fails in either phase; the
// flooder is held to --max-pending-conns-per-ip at once and its
// connections closed at --handshake-timeout, as /metrics counts.
//
// The figures (p99 of each phase, their ratio, refusals, the flooder's
// connections) are logged; BenchmarkFloodP99Ratio reports the ratio.
// The test takes about a minute and skips under -short.
package flood
