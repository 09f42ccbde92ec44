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
// Writes (the ingest leader's Put and Publish) go to the copy first, then to
// the shared store. A write the shared store refuses because of its fencing
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
// Sync never undoes this replica's own writes: a record observed after the
// shared store's stays (the check and the replacement are one step), and a
// node written since the last sync began stays though the shared store
// does not list it yet.
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
