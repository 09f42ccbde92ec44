// Package replica keeps this process's own copy of a shared store (Redis) so
// that every read is answered from memory, in the time the memory store
// takes, and keeps being answered while the shared store is unreachable.
//
// Reads (Get, List, History) come from the copy. Sync brings the copy up to
// date from the shared store every SyncEvery, so its staleness is bounded by
// SyncEvery plus one read of the shared store; Degraded says when it is not
// (the shared store did not answer), and how old the copy is, so answers can
// say so.
//
// # What a sync reads
//
// From a shared store that keeps a write log (a Changer: redisstore.Store)
// a sync reads only what changed: the ids of the nodes listed now, and the
// records and histories of those written since the log position the last
// sync reached, or listed now but not then. The log counts writes in
// Redis itself (see store/redisstore, Changes), so neither the writer's
// clock nor Redis's decides what is new, and a write logged after a sync
// read the log is read by the next one: no margin is needed. A node the
// listing no longer names (swept by the leader, or past its NodeTTL) or
// whose record is gone leaves the copy.
//
// A sync reads everything (Dump) instead on the first sync, every FullEvery
// (default DefaultFullEvery; serve --redis-full-sync), after a sync whose
// incremental read failed, and when the log cannot be followed from the
// last position (store.ErrTokenExpired: Redis lost its data, a failover
// lost the log's last writes, or a writer that does not log wrote). The
// periodic full read repairs what the log cannot show: a write whose log
// entry was lost (its writer stopped between the record and the log, which
// are two commands). With 10,000 nodes of which 1% change between syncs, an
// incremental sync reads about 2% of the bytes of a full one
// (BenchmarkReplicaSync). Shared stores without a log are read whole on
// every sync. Stats says how the syncs went.
//
// A shared store that lost its data (the log does not follow on) lists
// nothing until the ingest leader's next refresh writes the fleet again;
// the copy keeps the nodes it held, though unlisted, for LossGrace (default
// DefaultLossGrace), so that reads never find the fleet empty or a node
// unknown because Redis restarted.
//
// Writes (the ingest leader's Put and Publish) go to the copy first, then to
// the shared store. A record observed before the one the copy holds is
// refused (store.ErrOutOfOrder) and written nowhere, as the shared store
// would refuse it: two leaders overlap for a moment when a lease changes
// hands, and the copy of the one stepping down may already hold its
// successor's newer record, which its own older one must not replace. A write the shared store refuses because of its fencing
// (store.ErrFenced: a newer leader exists) is returned, so the old leader
// stops. A write that fails because the shared store is unreachable is not
// an error to the writer: the record reaches the shared store with the next
// refresh, and health events wait, in order, in a bounded queue until the
// shared store answers again, so subscribers on every replica miss no status
// change. Once a write found the shared store unreachable, writes go to the
// copy and the queue without trying it until Sync finds it answering, so
// the writer never waits on a store that is down (a Redis client's dial
// retries cost seconds per call); a stale leader hears its fence at its
// first write after that.
//
// Sync, full or incremental, never undoes this replica's own writes: a
// record observed after the shared store's stays (the check and the
// replacement are one step), and a node written since the last sync began
// stays though the shared store does not list it yet.
//
// Sweep removes old nodes from the shared store and the same nodes from the
// copy at once; the next Sync would drop them anyway (it keeps only what the
// shared store lists). While the shared store is unreachable Sweep removes
// nothing and is not an error: the next one does it.
//
// The health feed (Events, LastToken) and the query cache (Cached) are the
// shared store's, so tokens and cached answers are the same on every
// replica; Cached falls back to the copy's own cache when the shared store
// does not answer.
package replica
