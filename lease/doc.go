// Package lease is llmdiag's ingest lease: a lease in Redis that lets
// exactly one of several replicas refresh at a time, and gives each term of
// leadership a fencing epoch the store checks writes against.
//
// Two keys share one hash tag, so they live in one slot and the scripts
// that touch both run atomically on a single Redis and on a Cluster alike:
//
//	{KEY}:lease  "EPOCH:HOLDER", with a TTL (PX)
//	{KEY}:epoch  a counter, INCR'd on every acquisition; never expires.
//	             When missing it starts from Redis's clock in milliseconds,
//	             so epochs keep growing if it is ever lost (a Cluster shard
//	             restarting empty while records elsewhere keep theirs).
//
// Acquire is one script: if {KEY}:lease exists it returns the holder and
// its remaining TTL; otherwise it INCRs {KEY}:epoch and SETs {KEY}:lease
// NX PX ttl to "EPOCH:HOLDER". Renew (every ttl/3) is compare-and-extend on
// the whole value, release is compare-and-delete: a replica can only extend
// or delete its own term, never a later one, even one of the same holder.
//
// A leader stops acting as leader on its own clock, before Redis can hand
// the lease to another replica: the leader context is cancelled at
// sent+ttl-margin (margin ttl/10), where sent is the clock reading taken
// before the last successful acquire or renew was sent, so a leader cut
// off from Redis steps down while its key is still alive. Beyond clock-rate
// drift above the margin (and process pauses), the fencing epoch lets the
// store refuse a stale leader's writes. Followers retry when the holder's
// key expires (its PTTL, at most ttl/3 apart), so a crashed leader is
// replaced within ttl plus a retry, well inside two lease periods.
package lease
