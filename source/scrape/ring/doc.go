// Package ring keeps one node's samples compactly, at the resolution the
// windows read them, and gives back the two samples a window is computed
// from.
//
// # How a sample is kept
//
// The newest sample is kept as it was recorded. Every sample, the newest
// included, is also flattened into a row of float64 columns (every gauge
// and counter, each histogram's sum, count and cumulative bucket counts,
// the GPUs' figures) and what is not a number (up, engine, model, errors,
// warnings, roles, LoRA adapter names, the GPUs' names and XIDs, …), which
// changes rarely and is kept once per run of equal values. Rows go into
// blocks; each column of a block is one chunk in Prometheus's XOR encoding
// (github.com/prometheus/prometheus/tsdb/chunkenc, the Gorilla encoding
// Prometheus keeps float samples in), so a counter that rose by a few
// takes a few bits, a value that did not change one bit. A concept a
// sample does not have is kept as a NaN of a payload of its own (absent),
// so UNKNOWN stays UNKNOWN. A block's timestamps are kept as they are
// (nanoseconds), so rates read back to the bit.
//
// A block holds samples of one layout (which histograms the node exposes,
// with which bounds); a layout change (an engine restart with other
// buckets, a histogram appearing) starts a new block.
//
// # Resolution
//
// Samples are kept whole for Options.Full back from the newest (at most
// Options.MaxFull of them): the default window and shorter ones read the
// samples they always read, to the bit. Older blocks are thinned as they
// age past it to the first up sample of each Step of Unix time (each
// minute's first, by default: a window's rate needs the samples at its
// ends, not every one between), down to Options.Keep; a sample down (Up
// false) is not kept beyond Full. A window longer than Full therefore
// starts at a kept sample less than Step before the one it would start at
// with every sample kept; when it reaches back past Keep, at the oldest
// kept, less than Step and one scrape interval after the oldest sample
// within Keep. NodeMetrics.covered says exactly what it covers, and its
// figures are those of the samples it starts and ends at, to the bit.
//
// # Cost
//
// A row costs what its changes do: some 500 bytes for a vLLM node with
// DCGM under load (BenchmarkRing), against some 3 KB for the sample as a
// Go value. An
// append re-encodes the block it joins (at most BlockLen rows); reading a
// sample decodes its block up to it.
package ring
