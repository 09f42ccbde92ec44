// Package promfake is a fake Prometheus HTTP API for tests and benchmarks:
// /api/v1/query answers each query with a body chosen by its expression.
//
// New serves canned bodies from the test process (httptest on loopback).
// Synth makes the bodies a real Prometheus would return for a synthetic
// fleet (Fleet: vLLM nodes with 2 engine cores, or vLLM and SGLang mixed),
// per node, replica and bucket, with the bucket layouts of vLLM and
// SGLang's own exporters; Synth.At renders them for one evaluation time, so
// a fake can follow a clock that moves from one refresh to the next.
//
// StartChild serves a Synth from a child process (the test binary run
// again, in the Test function that calls ServeChild) on loopback: a
// benchmark then measures its own process's CPU time (getrusage of
// RUSAGE_SELF) without the fake's, which writes ~100 MB of JSON per refresh
// of 10,000 nodes. The child dies with its parent (see internal/testing/childproc)
// and is stopped when the test ends.
//
// promfake does not import source/prom, whose own tests use it: callers
// convert prom.Plan's queries to Query.
package promfake
