// Package refresh runs llmdiag's ingest loop: on every tick it asks the source
// for each node's indicators over the default window, diagnoses every node
// against its history and its peers (nodes serving the same model), writes
// the records to the store, and publishes a health event for every node whose
// health changed.
//
// Before a node is diagnosed, its GPUs' XIDs are stamped with when they
// occurred (engine.StampXIDs) against the node's previous refresh that
// read them (kept in memory, or read back from the store's record), so
// that the diagnosis grades an XID as an event, not as the value DCGM
// keeps until the exporter restarts.
//
// The fleet may change while the loop runs (SetFleet, serve --discovery):
// the fast lane takes the new nodes at once, the next refresh the rest,
// and a node the fleet no longer has is removed then (store.Remover), with
// the same final removed event as a node swept after the retention.
//
// A refresh fails small. The source reports every node it can, each with its
// own errors (see package source); the loop then diagnoses, writes and
// publishes node by node, so a node whose write or publish fails is logged
// and counted (the refresh counts as failed) while the others are stored.
// Only a source that cannot be read at all, or a store that fences this
// writer, ends a refresh without storing anything. Ready closes after the
// first refresh that completed, whatever some of its targets did.
//
// # The fast lane
//
// With Config.Fast.Interval set (serve --fast-interval), Run also runs a
// fast lane (fast.go) for the fleet file's nodes with an endpoint url,
// scraped directly or, with Prometheus, combined (source/combine). Each
// node has its own slot in the interval (the slots evenly spaced, so that
// no cluster of them overruns the read slots on every interval) and each
// read up to a tenth of it of jitter; a node is read once the refresh has
// read it (its record is what a read updates); a node whose previous read is still in flight, or a tick that
// finds every read slot taken (FastConfig.Concurrency), is skipped and
// counted, never queued. A read is the scrape's GET (its Accept header,
// status, content type and body limit) on a transport of the lane's own
// with an idle connection per node, then engine.ReadRouting through the
// lane's engine.SeriesMemo (one for the fleet), and a bounded drain of the
// rest of the body so that the connection is reused.
//
// A read copies the node's last refresh record (shallowly: a deep copy is
// made only of what is stored), overwrites queue, running,
// their ratio, KV pressure and capacity, up and observed_at, appends a
// history point to the node's own recent points (the refreshes' and the
// fast reads', fastHistory of them), and re-reads routability and the load
// score with diagnose.Routing: the refresh's saturation rules, hysteresis
// and score, with status, root cause and everything else kept from the
// refresh. When that changes the node's health as the publisher says
// (Changed: routability, status, cause, or the score by MinScoreChange),
// the record is stored and the health event published at once; otherwise
// nothing is written. A read no newer than the newest one applied (the
// refresh's or a fast read's) changes nothing. A refresh takes the gauges
// and time of a fast read newer than its own scrape, and its routability
// is read over the fast points too, so it never undoes what they held.
// The fast points never reach the progress (STALLED) reading, which stays
// with the refreshes' counters.
//
// The lane does not starve the refresh: it holds no lock of the refresh's
// beyond a node's own for the microseconds of an apply, no scrape slot and
// no connection of the scraper's, and its reads in flight are bounded;
// its CPU at 1,000 nodes every 250 ms is measured in docs/benchmarks.md.
// Nodes known only through Prometheus are not read: their routability is
// as fresh as the refresh, and the data as Prometheus's scrape.
package refresh
