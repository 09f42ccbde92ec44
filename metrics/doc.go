// Package metrics turns samples into the indicators of a window: latency
// percentiles with their bucket bounds, queue and running, the queue/running
// ratio, KV pressure, token and request rates, the per-request decode
// speed, and staleness.
//
// A window is formed by two cumulative samples of one node, the newest and a
// base read about one window earlier (Pick; the oldest read when the
// history is shorter): counters and histogram buckets are differenced with
// Prometheus's counter-reset handling, and gauges are read from the newest.
// Without a base the window is the node's lifetime.
//
// Engines create series lazily, on their first request or event. A counter,
// histogram or sum-and-count total the newest sample has and a complete base
// (Complete: up, no errors, no warnings) lacks was born inside the window
// and counts as 0 at the base: its whole newest value is the window's. A base
// with errors or warnings may have lost the series rather than predate it
// (engine.Parse leaves invalid families out), so there the concept stays
// absent, as it is when the newest sample lacks it.
//
// PerRequestDecode is the one definition of the per-request decode speed,
// shared by Compute, the Prometheus source and the verdict rules.
//
// Compute is pure: it takes the clock reading as an argument.
package metrics
