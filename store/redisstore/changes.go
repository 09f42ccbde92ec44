package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/store"
)

// The write log tells a replica which nodes were written since it last
// looked (see the package documentation, Layout and Changes): a counter
// Redis increments on every Put, and each node's count at its last write.
// The counter is Redis's own, so the writer's clock plays no part, and the
// count and the node's entry are set in one script, so no entry ever lands
// below a count a reader has already seen.

// logScript counts a write of node ARGV[1].
//
// KEYS: seq (hash: id, n), log (sorted set). ARGV: node id, a new log id
// (used when the count starts: the hash is one key, so a Redis that lost
// it lost both). Returns the write's count.
var logScript = redis.NewScript(`
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
if n == 1 then redis.call('HSETNX', KEYS[1], 'id', ARGV[2]) end
redis.call('ZADD', KEYS[2], n, ARGV[1])
return n
`)

// changesScript returns {log id, count, "ok", node ids written after count
// ARGV[2]...}; {log id, count, "mark"} when ARGV[1] (the reader's log id) is
// empty; {log id, count, "reset"} when the log is not the reader's (a Redis
// that lost its data has a new id) or its count is below the reader's.
//
// KEYS: seq, log. ARGV: the reader's log id, the reader's count, a new log
// id (used when the log has none yet).
var changesScript = redis.NewScript(`
redis.call('HSETNX', KEYS[1], 'id', ARGV[3])
local v = redis.call('HMGET', KEYS[1], 'id', 'n')
local n = 0
if v[2] then n = tonumber(v[2]) end
local ns = string.format('%d', n)
if ARGV[1] == '' then return {v[1], ns, 'mark'} end
if v[1] ~= ARGV[1] or n < tonumber(ARGV[2]) then return {v[1], ns, 'reset'} end
local out = {v[1], ns, 'ok'}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[2], '+inf')) do
  out[#out + 1] = id
end
return out
`)

// forgetScript removes from the log each node ARGV[2:] whose last write's
// count is at most ARGV[1]: those a prune of the index removed, unless
// written again since.
//
// KEYS: seq, log.
var forgetScript = redis.NewScript(`
local max = tonumber(ARGV[1])
for i = 2, #ARGV do
  local c = redis.call('ZSCORE', KEYS[2], ARGV[i])
  if c and tonumber(c) <= max then redis.call('ZREM', KEYS[2], ARGV[i]) end
end
return 0
`)

// logKeys are the write log's keys, in the scripts' order.
func (s *Store) logKeys() []string { return []string{s.seqKey, s.logKey} }

// pipelined runs the commands fill queues in one pipeline. When a script
// among them was unknown to Redis (a new or restarted server, a Cluster
// node added), it loads scripts and runs the pipeline once more; fill must
// queue anew each time, and nothing ran of a script refused that way.
func (s *Store) pipelined(ctx context.Context, scripts []*redis.Script, fill func(redis.Pipeliner)) error {
	for attempt := 0; ; attempt++ {
		pipe := s.rdb.Pipeline()
		fill(pipe)
		cmds, err := pipe.Exec(ctx)
		if attempt > 0 || !noScript(cmds) {
			return err
		}
		for _, sc := range scripts {
			if err := sc.Load(ctx, s.rdb).Err(); err != nil {
				return err
			}
		}
	}
}

func noScript(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// A mark is a position in the write log, as Changes returns it:
// "<log id>:<count>:<index top>". The index top is the index's newest
// score when the count was read; see Changes.
type mark struct {
	log string
	n   uint64
	top int64
}

func (m mark) String() string {
	return m.log + ":" + strconv.FormatUint(m.n, 10) + ":" + strconv.FormatInt(m.top, 10)
}

func parseMark(s string) (mark, error) {
	f := strings.Split(s, ":")
	if len(f) != 3 || f[0] == "" {
		return mark{}, fmt.Errorf("write log mark %q: %w", s, store.ErrTokenExpired)
	}
	n, err1 := strconv.ParseUint(f[1], 10, 64)
	top, err2 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return mark{}, fmt.Errorf("write log mark %q: %w", s, store.ErrTokenExpired)
	}
	return mark{log: f[0], n: n, top: top}, nil
}

// Changes is how a replica reads only what changed (store/replica): it
// returns the write log's position now and, given since (a position an
// earlier call returned), the ids of the nodes listed now (as List, from
// the index: ids only) and of the nodes written after since, whose records
// (Read) are at least as new as that write. Since "" asks for the position
// alone. A record or history read after Changes is at least as new as the
// returned position, so a reader that reads the nodes Changes names, then
// passes the position next time, misses no write.
//
// It fails with store.ErrTokenExpired when since cannot be followed: a
// position of another log (Redis lost its data), one ahead of the log (a
// failover lost writes), or when the index's newest entry moved while the
// log did not (a writer that does not log writes, such as an older llmdiag,
// wrote). The caller then reads everything (Dump).
func (s *Store) Changes(ctx context.Context, since string) (listed, changed []string, pos string, err error) {
	var from mark
	if since != "" {
		if from, err = parseMark(since); err != nil {
			return nil, nil, "", err
		}
	}
	var top *redis.ZSliceCmd
	var log *redis.Cmd
	var list *redis.StringSliceCmd
	// The index's top is read before the log's count, and a Put counts a
	// write before it indexes it (see index): on one server, a top that
	// moved past since's without the count moving is a write not counted.
	err = s.pipelined(ctx, []*redis.Script{changesScript}, func(pipe redis.Pipeliner) {
		top = pipe.ZRevRangeWithScores(ctx, s.indexKey, 0, 0)
		log = changesScript.EvalSha(ctx, pipe, s.logKeys(), from.log, from.n, newFeedID())
		if since != "" {
			list = pipe.ZRangeByScore(ctx, s.indexKey, &redis.ZRangeBy{Min: s.listedSince(), Max: "+inf"})
		}
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("read write log: %w", err)
	}
	res, err := log.StringSlice()
	if err != nil || len(res) < 3 {
		return nil, nil, "", fmt.Errorf("read write log: unexpected reply %q (%v)", res, err)
	}
	now := mark{log: res[0]}
	if now.n, err = strconv.ParseUint(res[1], 10, 64); err != nil {
		return nil, nil, "", fmt.Errorf("read write log: count %q", res[1])
	}
	if z := top.Val(); len(z) > 0 {
		now.top = int64(z[0].Score)
	}
	switch res[2] {
	case "mark":
		return nil, nil, now.String(), nil
	case "reset":
		return nil, nil, "", fmt.Errorf("write log %s at %d, not the one at %s: %w", now.log, now.n, since, store.ErrTokenExpired)
	case "ok":
	default:
		return nil, nil, "", fmt.Errorf("read write log: unexpected reply %q", res[:3])
	}
	if now.n == from.n && now.top > from.top {
		return nil, nil, "", fmt.Errorf("index written at %d ms without the write log: %w", now.top, store.ErrTokenExpired)
	}
	return list.Val(), res[3:], now.String(), nil
}

// Read returns the records and histories of the named nodes, in a
// pipelined round trip per listBatch nodes, leaving out those it does not
// hold: what a replica reads of the nodes Changes named.
func (s *Store) Read(ctx context.Context, ids []string) ([]*store.Record, [][]diagnose.Point, error) {
	ids = append([]string(nil), ids...)
	sort.Strings(ids)
	return s.readIDs(ctx, ids, true)
}

// unlog removes from the write log the nodes a prune of the index removed
// (ids, read from the index after the log's count was n), unless written
// again since.
func (s *Store) unlog(ctx context.Context, n uint64, ids []string) error {
	for len(ids) > 0 {
		batch := ids[:min(len(ids), listBatch)]
		ids = ids[len(batch):]
		args := make([]any, 0, len(batch)+1)
		args = append(args, n)
		for _, id := range batch {
			args = append(args, id)
		}
		if err := forgetScript.Run(ctx, s.rdb, s.logKeys(), args...).Err(); err != nil {
			return fmt.Errorf("prune write log: %w", err)
		}
	}
	return nil
}
