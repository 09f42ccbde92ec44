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
// Memory per node (BenchmarkRedisMemoryPerNode: 1,000 storetest.Fleet vLLM
// nodes, a full 120-point history each, redis 7.0, MEMORY USAGE SAMPLES 0):
// 3312 B: history key 2596 (value 2096), record key 598 (value 470), index
// 118. The history dominates.
//
// # Writes
//
// Put reads the node's record header and history (one MGET: same slot),
// appends the point in Go, and writes both in a Lua script that refuses the
// write with store.ErrFenced when the stored epoch is higher than the
// writer's (store.WithFence; none counts as 0), with store.ErrOutOfOrder
// when the stored record was observed later, and retries when another write
// of the node came between (the write counter). It then adds the node to
// the index (ZADD GT; another slot, so not in the script) and now and then
// prunes the index of nodes whose keys have expired.
//
// # Leaving
//
// A node is listed while its last write is at most NodeTTL old (List reads
// the index from now−NodeTTL on). Sweep, which the ingest leader runs on
// every refresh with the same retention, removes older nodes' keys and
// index entries and returns their records, so the leader can tell streams
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
