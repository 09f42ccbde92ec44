// Package metrics turns samples into the indicators of a window: latency
// percentiles with their bucket bounds, queue and running, the queue/running
// ratio, KV pressure, token and request rates, and staleness.
//
// A window is formed by two cumulative samples of one node, the newest and a
// base read about one window earlier (Pick): counters and histogram buckets
// are differenced with Prometheus's counter-reset handling, and gauges are
// read from the newest. Without a base the window is the node's lifetime.
// Compute is pure: it takes the clock reading as an argument.
package metrics
