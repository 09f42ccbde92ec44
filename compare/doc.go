// Package compare ranks nodes, or groups of nodes, by one latency metric at
// chosen percentiles. It is pure: it reads the window distributions that
// package metrics made (bucket counts included), sums them by bucket to form
// groups — as `sum by (model, le)` would — and computes each percentile with
// Prometheus's histogram_quantile semantics.
//
// A histogram cannot tell apart two values in the same bucket, and the
// comparison says so rather than ranking noise: values whose buckets are the
// same (equal lower and upper bounds) share a rank, and a value is marked
// within resolution when the median of the subjects' values lies in its
// bucket, so its ratio to the median is no measured difference.
//
// Groups are by node, model, engine or any node label (from the fleet
// file). Nodes without the label are not a group: they are listed in one
// unranked row with a note. With a baseline offset every subject also gets
// a row for the window that ends that much earlier, right after its own;
// ranks, medians and outliers are computed over the rows now only, and both
// rows carry the ratio now / then at the highest quantile.
package compare
