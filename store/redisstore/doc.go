// Package redisstore is a store.Store in Redis, shared by every llmdiag
// replica: one writes (the ingest lease holder), all read and serve the
// health feed. It talks to Redis through redis.UniversalClient, so a single
// server, Sentinel and Cluster all work (NewClient takes a URL or a list of
// cluster addresses).
//
// # Layout
//
// Every key starts with Options.Prefix (default "llmdiag:"). A node's keys
// share a Cluster slot through the hash tag {n:<id>}:
//
//	llmdiag:{n:<id>}:rec   string, PX NodeTTL×1.25: "epoch sec nanos seq\n" + record
//	llmdiag:{n:<id>}:hist  string, PX NodeTTL×1.25: compact.History bytes
//	llmdiag:nodes          sorted set: node id → last write, Unix ms
//	llmdiag:{changes}:seq  hash: id = the write log's random id, n = writes counted
//	llmdiag:{changes}:log  sorted set: node id → n after its last write
//	llmdiag:{feed}:events  stream: entries 0-<seq>, field h = NodeHealth protobuf
//	llmdiag:{feed}:id      string: the feed's random id
//	llmdiag:{feed}:fence   string: the highest epoch that published
//	llmdiag:c:{<sha256/2>}       cache value, PX ttl
//	llmdiag:c:{<sha256/2>}:lock  cache load lock, PX LockTTL
//
// The record is compact.NewPortableCodec's encoding of the Node and
// NodeMetrics: protobuf less what it can rebuild bit-exactly (the node id,
// fields the Node repeats from the metrics, each distribution's
// percentiles, mean and count, and its bucket bounds when they are one of
// the fixed, append-only table of engine layouts in layouts.go). The
// Diagnosis is left out: Get and List return it nil and callers diagnose
// the metrics again (server.Service does). As plain protobuf it takes
// 3347 B a node on average (the Node 156, the NodeMetrics 2598), and the
// memory store's way of shrinking it (a dictionary of phrases) is per
// process. The header before it holds the writer's fencing
// epoch, the record's observed_at and a write counter, for the Put script.
//
// The write log's count is incremented by Redis, in the script that sets
// the node's entry, so entries appear in the order of their counts: a
// reader that read the log up to n has seen every entry up to n, whatever
// the writers' clocks (the index's times are the writer's, fine for
// retention but not for telling what is new). Its id tells a log from the
// one a Redis that lost its data had.
//
// Memory per node (BenchmarkRedisMemoryPerNode: 1,000 storetest.Fleet vLLM
// nodes, a full 120-point history each, redis 7.0, MEMORY USAGE SAMPLES 0):
// 3431 B: history key 2596 (value 2096), record key 598 (value 470), index
// 119, write log 118. The history dominates.
//
// # Writes
//
// Put reads the node's record header and history (one MGET: same slot),
// appends the point in Go, and writes both in a Lua script that refuses the
// write with store.ErrFenced when the stored epoch is higher than the
// writer's (store.WithFence; none counts as 0), with store.ErrOutOfOrder
// when the stored record was observed later, and retries when another write
// of the node came between (the write counter). It then adds the node to
// the write log (a script: HINCRBY the count, ZADD the node at it) and to
// the index (ZADD GT), in one pipeline and in that order (other slots, so
// not in the Put script), and now and then prunes the index, and the log
// after it, of nodes whose keys have expired.
//
// # Changes
//
// Changes is how a replica (store/replica) reads only what changed. It
// returns a position "<log id>:<n>:<index top>" and, from a position it
// returned before, the ids the index lists (as List) and those the log has
// above that position's n (ZRANGEBYSCORE), read in one pipeline: the
// index's newest score first, then the log, then the listing. Read then
// reads those nodes' records and histories, at least as new as the writes
// the log showed; a write logged later shows up at the next position. A
// position of another log id, or above the log's n (a failover lost its
// last writes), is store.ErrTokenExpired, and so is an index whose newest
// score moved while n did not: a writer that indexes without logging (an
// older llmdiag) wrote. The reader then reads everything (Dump). A
// failover that lost the log's last writes and had as many new ones before
// the reader looked, or a writer that stopped between a node's record and
// its log entry, leaves a node one write behind until its next write or
// the reader's periodic full read.
//
// # Leaving
//
// A node is listed while its last write is at most NodeTTL old (List reads
// the index from now−NodeTTL on). Sweep, which the ingest leader runs on
// every refresh with the same retention, removes older nodes' keys,
// index and write log entries and returns their records, so the leader can tell streams
// they left; the keys' own expiry, a quarter later, and the index pruning
// above clean up when no leader runs.
// Publish appends to the stream in a Lua script fenced by the feed's fence
// key, trimming with MAXLEN ~ FeedLen.
//
// # Feed
//
// Tokens are "<feed id>:<seq>". Events reads, in one script, what follows
// seq, after checking that the feed is the token's (a Redis that lost its
// data has a new feed id), that the event after seq is still there (the
// first entry's seq is at most seq+1), and that seq is not past the end;
// otherwise store.ErrTokenExpired. With nothing to read it waits with
// XREAD BLOCK (at most 2 s at a time), then reads again through the checks.
//
// # Cache
//
// Cached coalesces identical loads across all replicas: within a process
// through singleflight, across processes through the lock key (SET NX PX
// LockTTL, renewed every LockTTL/3 while loading). Callers that find the
// lock taken poll for the value with backoff (2 ms to 100 ms) and take the
// lock themselves if it goes without a value (the holder failed or died).
// Errors are not cached. When Redis fails, Cached loads and answers uncached.
package redisstore
