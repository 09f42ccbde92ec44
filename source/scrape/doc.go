// Package scrape reads inference nodes' /metrics endpoints directly: the
// embedded default source. It parses each exposition with package engine
// (Prometheus's text parser underneath, bounded by Options.MaxSeries and
// MaxRankValues), keeps a bounded ring of samples per node, and turns them
// into the indicators of any window the ring covers (package metrics).
// The targets may change while it runs (SetTargets, as serve --discovery
// does): a new target is scraped from the next Refresh, a removed one is
// forgotten with its samples, a kept one keeps them.
//
// # Fault isolation
//
// A target that hangs, fails or is slow affects only its own node; its
// neighbours refresh as if it were not there. What the scraper promises:
//
//   - A Refresh returns within Options.Timeout (or its context's deadline,
//     when sooner), with one Observation per target, whatever the targets
//     do. Every node that answered in time is reported from this refresh's
//     scrape; no refresh waits for the slowest target longer than that.
//   - A target that does not answer, answers an error, or serves garbage is
//     reported with the reason in its NodeMetrics.errors: down (Up=false,
//     which reads TARGET_DOWN) when it could not be read, redirected or
//     answered a content type that is no text exposition, up with the parse
//     error when it answered something unreadable or over a limit.
//   - An exposition with invalid families (see engine.Parse) is read
//     without them, with NodeMetrics.warnings naming each.
//   - At most one scrape per target is in flight. A scrape has its own
//     deadline (Options.Timeout) and outlives the Refresh that started it:
//     when it ends, late, its sample is recorded for the next refresh. Until
//     then the target is not scraped again; it is reported from its last
//     sample, with the error "scrape … still running after …" (and as down
//     when it has never answered).
//   - Waiting for an answer takes no slot: Options.Concurrency bounds only
//     the bodies being read and parsed at once (the memory parsing takes).
//     Targets whose last scrape ran out of time (for example one that sends
//     headers and then stalls) share at most half of those slots, so with two
//     slots or more they can never hold them all; a scrape that found no
//     free slot is reported down with the limit named, and does not count
//     against its target; nor does one that found its slot with less than a
//     tenth of its time left and then ran out of it.
//
// # What an answer may not do
//
// A target is read, nothing else: a redirect is the answer (down, named by
// its status and where it points) unless the node sets FollowRedirects,
// and the URL's password goes to the target only. Errors never quote what
// answered: an answer other than 200, or one whose content type is not a
// text exposition, is named by its status code and content type; a body
// with no series names the first line refused. Every URL in an error or a
// log line has its password redacted (package redact).
//
// So the cost of a target that accepts a connection and never answers is
// one goroutine and one connection until its deadline; the cost of one
// that answers slowly is at most half the read slots, never a neighbour's
// refresh. Keep Options.Timeout below the refresh interval: a refresh with
// a hanging target then ends one timeout after it began, and healthy nodes'
// data is never older than an interval plus a timeout.
package scrape
