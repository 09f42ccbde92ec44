// Package benchtable turns `go test -bench` output with several runs of
// each benchmark (-count) into one table of medians: one row per
// benchmark, one cell per reported unit, in the order the benchmark
// reports them. `make bench` pipes its runs through cmd/benchtable.
package benchtable
