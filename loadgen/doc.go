// Package loadgen is a bounded load generator for OpenAI-compatible
// completion endpoints (/v1/completions, /v1/chat/completions): open-loop
// Poisson arrivals at a rate for a duration, prompt and output lengths drawn
// from a mixture, and hard caps on the requests in flight, on the total
// requests and on every request's time. It measures what a client sees:
// time to the first content chunk (TTFT, streaming only) and end-to-end time
// (E2E), as p50/p90/p99, and counts successes and failures by kind (HTTP
// status, timeout, connection error, a stream cut short).
//
// It is meant for loopback test rigs, such as `llmdiag sim`'s nodes, and for
// endpoints of your own: it only sends to the one URL it is given, and its
// bounds (Rate at most MaxRate, MaxInFlight at most MaxInFlightLimit, at
// most MaxRequestsLimit requests) keep a mistyped flag from turning it into
// a flood.
//
// Open loop means arrivals do not wait for answers, as independent users
// do: an arrival that finds MaxInFlight requests outstanding is not sent
// (counted as skipped), rather than delayed, which would turn the load into
// a closed loop and hide the server's queueing from the measurement.
//
// Each prompt is "tok " repeated as many times as its drawn length, 4
// characters a token (as the simulator counts them); the output length is
// sent as max_tokens with vLLM's and SGLang's "ignore_eos": true, so that a
// real engine generates that many tokens too.
package loadgen
