// Package flood checks that one client address cannot starve serve's port
// on the default limits: a TLS port with tokens and the seed fleet, 50
// legitimate clients each from its own loopback address calling unary
// RPCs and health checks (a fresh connection per health check, as a load
// balancer's probe opens one), in 10 s windows alone and 10 s windows
// while 127.0.0.1 opens connections and holds each idle without sending a
// byte, alternately, three of each: 3,000 connections in 30 s of flood.
// Taking turns, the quiet and the flood windows bear alike whatever else
// the machine does. No legitimate call and no health check fails in
// either; the flooder is held to --max-pending-conns-per-ip at once and
// its connections closed at --handshake-timeout, as /metrics counts.
//
// The figures (p99 of the quiet and of the flood windows, their ratio,
// refusals, the flooder's connections) are logged; BenchmarkFloodP99Ratio
// reports the ratio. The test takes about 75 s and skips under -short.
package flood
