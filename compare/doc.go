// Package compare ranks nodes, or groups of nodes, by one latency metric at
// chosen percentiles. It is pure: it reads the window distributions that
// package metrics made (bucket counts included), sums them by bucket to form
// groups — as `sum by (model, le)` would — and computes each percentile with
// Prometheus's histogram_quantile semantics.
package compare
