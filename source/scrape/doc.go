// Package scrape reads inference nodes' /metrics endpoints directly: the
// embedded default source. It scrapes every target concurrently with a
// deadline, parses the exposition with package engine (Prometheus's text
// parser underneath, bounded by Options.MaxSeries and MaxRankValues), keeps
// a bounded ring of samples per node, and turns them into the indicators of
// any window the ring covers (package metrics).
//
// A target that is down, that serves garbage or that crosses a limit yields
// a sample that says so in its Errors; one whose exposition has invalid
// families yields a sample without them and with Warnings naming them. It
// never affects other targets.
package scrape
