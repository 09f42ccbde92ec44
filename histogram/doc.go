// Package histogram is the bucket arithmetic behind every percentile llmdiag
// reports: Prometheus's histogram_quantile for classic (cumulative, le-bucketed)
// histograms, reproduced exactly, plus the bucket bounds each estimate lies in,
// and the per-bucket subtraction and addition that turn cumulative histograms
// into windows and merge engine cores.
//
// It is pure: no I/O, no clocks, and it never modifies its inputs.
package histogram
