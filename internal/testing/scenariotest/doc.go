// Package scenariotest runs llmdiag's real ingest-and-diagnose pipeline
// against the simulator's scenarios in simulated time, and records every
// node's verdict at every refresh.
//
// For one scenario exposed in one engine schema (sim.WithEngine), Run builds
// the simulated fleet, fast-forwards its warm-up, then alternates: advance
// the simulation by one refresh interval (sim.Fleet.Step), move a fake clock
// to the same instant, and call refresh.Loop.Once. Everything after the
// simulator is production code with production settings: an scrape.Scraper
// (HTTP GET of /metrics, engine.Parse, engine.Extract, the sample ring,
// metrics.Compute over the window), refresh.Loop with the default
// thresholds (stale after 30 s, as `llmdiag serve` configures them), the
// fleet file's profiles, a 5 s interval and a 5m window, the in-memory
// store with its default history, and diagnose.Diagnose with that history
// and the node's peers.
//
// The scraper's HTTP client is given a transport that answers each
// request from the simulator's own rendering of the node's /metrics
// (sim.Fleet.Metrics, the exposition the simulator serves over loopback),
// and fails with "connection refused" while the node is down. That keeps a
// run free of sockets and wall-clock pacing (sim.Fleet.Start paces the
// simulation by a ticker), so a whole scenario × engine matrix takes
// seconds; Options.Loopback serves the same bytes from a real loopback
// HTTP server instead, to show that the transport changes nothing.
//
// The matrix test (go test -v -run Matrix) prints, for every scenario and
// engine schema, the root cause each scenario's target node reads and at
// how many refreshes (over the whole judged run, or over a named phase of a
// phased scenario), and checks them against the expected causes. It also
// prints every node's flips (routable and status changes over the run) and
// the time-to-verdict figures of the phased scenarios, measured in
// simulated time from the stored readings: for idle-then-overload, from
// the overload's start to the queue forming, to not routable and to
// OVERLOADED, and from the queue draining to routable again; for kv-flap,
// the not-routable episodes per sustained crossing of the KV limit and the
// single-refresh dips that made the node routable; for stalled, the
// refresh of the hang that first reads STALLED, the one it is due by
// (the third, or 2 minutes in where only whole requests are counted) and
// the first not routable. The three scenarios carry acceptance criteria
// (timing_test.go), checked on every run.
package scenariotest
