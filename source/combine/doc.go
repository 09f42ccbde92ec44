// Package combine joins two sources of the same fleet: Prometheus for what
// needs history (rates, window percentiles, offsets) and direct scrapes for
// what is best fresh (the queue, running and KV-cache gauges). A node both
// know takes its gauges from the scrape when that scrape reached it; a node
// only one knows is taken as that source says.
//
// One side never blanks the other: a node the scrape did not reach keeps
// Prometheus's gauges, and when either side fails as a whole the other's
// nodes still refresh, with the failure in their warnings. Only both
// failing fails the refresh.
//
// A slow Prometheus does not hold the fresh gauges back: a refresh waits
// for it at most Options.Wait once the scrapes have answered, then joins
// the gauges to Prometheus's last answer, each node it covers warned that
// the history source is slow, since when, and how old its rates and
// percentiles are (with no last answer, as if Prometheus had failed). At
// most one Prometheus refresh is ever in flight: a refresh that finds one
// joins it rather than starting another, and one left unanswered goes on in
// the background, bounded by its refresh's deadline and cancelled by Close,
// to serve the next refresh.
package combine
