// Package scrape reads inference nodes' /metrics endpoints directly: the
// embedded default source. It scrapes every target concurrently with a
// deadline, parses the exposition with package engine (expfmt underneath),
// keeps a bounded ring of samples per node, and turns them into the
// indicators of any window the ring covers (package metrics).
//
// A target that is down, or that serves garbage, yields a sample that says so
// in its Errors; it never affects other targets.
package scrape
