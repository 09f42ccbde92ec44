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
package combine
