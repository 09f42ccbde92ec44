// Package sample holds what one read of one node's metrics yields, in
// engine-neutral terms: cumulative counters, gauges and histograms keyed by
// concept (TTFT, E2E, queue, KV pressure, …), with no engine metric names left.
//
// Sources (direct scrape, Prometheus) produce Samples; package metrics turns
// two Samples into the indicators of a window.
package sample
