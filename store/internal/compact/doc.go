// Package compact encodes what a store keeps per node in few bytes, without
// losing a bit of it: a node's history as chunks of delta/XOR-encoded points
// (History), and its record (Node, NodeMetrics, Diagnosis) as protobuf with
// what can be derived taken out (Codec).
//
// The encodings are exact: every value, including NaN payloads and negative
// zeros, comes back with the same bits, and proto messages come back equal,
// unknown fields included. Every shortcut (a derived percentile, a bucket
// layout shared through the Dict, counts written as integers) is taken only
// when re-deriving it has been checked to give the original bits; otherwise
// the value is written as it is.
package compact
