package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/compact"
)

var _ store.Store = (*Store)(nil)

// Defaults for zero Options fields.
const (
	DefaultPrefix     = "llmdiag:"
	DefaultHistoryLen = 120
	DefaultFeedLen    = 4096
	DefaultNodeTTL    = time.Hour
	DefaultLockTTL    = 30 * time.Second
)

// Options configure a Store.
type Options struct {
	// Prefix starts every key (default DefaultPrefix).
	Prefix string
	// HistoryLen is the number of points kept per node (default
	// DefaultHistoryLen).
	HistoryLen int
	// FeedLen is about the number of health events kept for resuming
	// readers: the stream is trimmed with XADD MAXLEN ~ FeedLen, so Redis
	// keeps at least FeedLen, and up to a stream node's worth more
	// (stream-node-max-entries, 100 by default). Default DefaultFeedLen.
	FeedLen int
	// NodeTTL is how long a node is listed after its last write (default
	// DefaultNodeTTL; llmdiag serve sets it to --retention). Its keys
	// outlive it by a quarter more, so that Sweep can still read what it
	// removes; List and Dump leave out nodes older than NodeTTL.
	NodeTTL time.Duration
	// LockTTL bounds how long a Cached load holds its lock without renewing
	// it: when the holder dies, others load after at most this long
	// (default DefaultLockTTL). A live holder renews it every LockTTL/3.
	LockTTL time.Duration
	// Now is the clock for the index's last-seen times (default time.Now).
	Now func() time.Time
}

// Store is a store.Store in Redis; see the package documentation for the
// layout. It is safe for concurrent use, and any number of Stores (in any
// number of processes) may share one Redis.
type Store struct {
	rdb   redis.UniversalClient
	opts  Options
	codec *compact.Codec

	eventsKey, feedIDKey, fenceKey, indexKey string
	seqKey, logKey                           string // the write log (changes.go)

	pruneMu   sync.Mutex
	lastPrune time.Time

	group singleflight.Group
}

// New returns a Store keeping its data in rdb under opts.Prefix. It does
// not contact Redis.
func New(rdb redis.UniversalClient, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.HistoryLen <= 0 {
		opts.HistoryLen = DefaultHistoryLen
	}
	if opts.FeedLen <= 0 {
		opts.FeedLen = DefaultFeedLen
	}
	if opts.NodeTTL <= 0 {
		opts.NodeTTL = DefaultNodeTTL
	}
	if opts.LockTTL <= 0 {
		opts.LockTTL = DefaultLockTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := opts.Prefix
	return &Store{
		rdb:       rdb,
		opts:      opts,
		codec:     compact.NewPortableCodec(layouts),
		eventsKey: p + "{feed}:events",
		feedIDKey: p + "{feed}:id",
		fenceKey:  p + "{feed}:fence",
		indexKey:  p + "nodes",
		seqKey:    p + "{changes}:seq",
		logKey:    p + "{changes}:log",
	}
}

// keyTTL is how long a node's keys outlive its last write: NodeTTL and a
// grace for Sweep to read them.
func (s *Store) keyTTL() time.Duration { return s.opts.NodeTTL + s.opts.NodeTTL/4 }

// listedSince is the oldest last write of a node List shows, as a
// ZRANGEBYSCORE bound.
func (s *Store) listedSince() string {
	return strconv.FormatInt(s.opts.Now().Add(-s.opts.NodeTTL).UnixMilli(), 10)
}

func (s *Store) recKey(id string) string  { return s.opts.Prefix + "{n:" + id + "}:rec" }
func (s *Store) histKey(id string) string { return s.opts.Prefix + "{n:" + id + "}:hist" }

// maxPutAttempts bounds the retries of a Put that raced another write of
// the same node.
const maxPutAttempts = 32

// Put implements store.Store. It stores rec without its Diagnosis (Get
// returns it nil; see the package documentation).
func (s *Store) Put(ctx context.Context, rec *store.Record, p diagnose.Point) error {
	id := rec.Node.GetId()
	epoch, _ := store.Fence(ctx)
	b, err := s.codec.Encode(id, &store.Record{Node: rec.Node, Metrics: rec.Metrics})
	if err != nil {
		return fmt.Errorf("encode %q: %w", id, err)
	}
	if l := p.At.Location(); l != time.UTC && l != time.Local {
		p.At = p.At.UTC() // a location is a pointer that does not cross processes
	}
	obs := rec.Metrics.GetObservedAt()
	sec, nanos := obs.GetSeconds(), obs.GetNanos()
	if obs == nil {
		sec, nanos = 0, 0
	}
	rk, hk := s.recKey(id), s.histKey(id)
	for attempt := range maxPutAttempts {
		vals, err := s.rdb.MGet(ctx, rk, hk).Result()
		if err != nil {
			return fmt.Errorf("read %q: %w", id, err)
		}
		var seq uint64
		if v, ok := vals[0].(string); ok {
			if _, _, seq, _, err = splitRecord(v); err != nil {
				return fmt.Errorf("read %q: %w", id, err)
			}
		}
		var h compact.History
		if v, ok := vals[1].(string); ok && seq > 0 {
			if err := h.UnmarshalBinary([]byte(v)); err != nil {
				return fmt.Errorf("history of %q: %w", id, err)
			}
		}
		if err := h.Append(p, s.opts.HistoryLen); err != nil {
			return fmt.Errorf("%q: %w", id, err)
		}
		hb, err := h.MarshalBinary()
		if err != nil {
			return fmt.Errorf("history of %q: %w", id, err)
		}
		res, err := putScript.Run(ctx, s.rdb, []string{rk, hk},
			strconv.FormatUint(epoch, 10), sec, nanos, seq, s.keyTTL().Milliseconds(), b, hb).Text()
		if err != nil {
			return fmt.Errorf("write %q: %w", id, err)
		}
		switch res {
		case "ok":
			return s.index(ctx, id)
		case "fenced":
			return fmt.Errorf("write %q with fence %d: %w", id, epoch, store.ErrFenced)
		case "old":
			return fmt.Errorf("write %q observed at %v: %w", id, obs.AsTime(), store.ErrOutOfOrder)
		case "conflict":
			// Another write of the node came in between: wait a random
			// moment, growing with each attempt, so racing writers part.
			select {
			case <-ctx.Done():
				return fmt.Errorf("write %q: %w", id, ctx.Err())
			case <-time.After(time.Duration(mrand.Int64N(int64(attempt+1) * int64(time.Millisecond)))):
			}
			continue
		default:
			return fmt.Errorf("write %q: unexpected reply %q", id, res)
		}
	}
	return fmt.Errorf("write %q: %d attempts raced other writes of the node", id, maxPutAttempts)
}

// PutRecord implements store.RecordWriter: Put without a history point,
// for a node Put wrote (store.ErrNotFound otherwise), fenced and ordered
// as Put is, and logged as a write so that replicas' syncs read it.
func (s *Store) PutRecord(ctx context.Context, rec *store.Record) error {
	id := rec.Node.GetId()
	epoch, _ := store.Fence(ctx)
	b, err := s.codec.Encode(id, &store.Record{Node: rec.Node, Metrics: rec.Metrics})
	if err != nil {
		return fmt.Errorf("encode %q: %w", id, err)
	}
	obs := rec.Metrics.GetObservedAt()
	sec, nanos := obs.GetSeconds(), obs.GetNanos()
	if obs == nil {
		sec, nanos = 0, 0
	}
	res, err := putRecordScript.Run(ctx, s.rdb, []string{s.recKey(id), s.histKey(id)},
		strconv.FormatUint(epoch, 10), sec, nanos, s.keyTTL().Milliseconds(), b).Text()
	if err != nil {
		return fmt.Errorf("write %q: %w", id, err)
	}
	switch res {
	case "ok":
		return s.index(ctx, id)
	case "missing":
		return fmt.Errorf("%q: %w", id, store.ErrNotFound)
	case "fenced":
		return fmt.Errorf("write %q with fence %d: %w", id, epoch, store.ErrFenced)
	case "old":
		return fmt.Errorf("write %q observed at %v: %w", id, obs.AsTime(), store.ErrOutOfOrder)
	}
	return fmt.Errorf("write %q: unexpected reply %q", id, res)
}

var _ store.RecordWriter = (*Store)(nil)

// index counts the write of id in the write log and records id as seen
// now in the index, in that order (Changes relies on it), and at most every
// NodeTTL/10 prunes the index of nodes whose keys have expired (Sweep, run
// by the ingest leader, removes them earlier and says so; this is for when
// no leader runs).
func (s *Store) index(ctx context.Context, id string) error {
	now := s.opts.Now()
	err := s.pipelined(ctx, []*redis.Script{logScript}, func(pipe redis.Pipeliner) {
		logScript.EvalSha(ctx, pipe, s.logKeys(), id, newFeedID())
		pipe.ZAddGT(ctx, s.indexKey, redis.Z{Score: float64(now.UnixMilli()), Member: id})
	})
	if err != nil {
		return fmt.Errorf("index %q: %w", id, err)
	}
	s.pruneMu.Lock()
	due := now.Sub(s.lastPrune) >= s.opts.NodeTTL/10
	if due {
		s.lastPrune = now
	}
	s.pruneMu.Unlock()
	if due {
		return s.prune(ctx, now)
	}
	return nil
}

// prune removes from the index, then from the write log, the nodes last
// written before their keys' expiry. The log's count is read first: a node
// written again after it keeps its log entry (see unlog).
func (s *Store) prune(ctx context.Context, now time.Time) error {
	n, err := s.rdb.HGet(ctx, s.seqKey, "n").Uint64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("prune index: %w", err)
	}
	cut := "(" + strconv.FormatInt(now.Add(-s.keyTTL()).UnixMilli(), 10)
	pipe := s.rdb.Pipeline()
	old := pipe.ZRangeByScore(ctx, s.indexKey, &redis.ZRangeBy{Min: "-inf", Max: cut})
	pipe.ZRemRangeByScore(ctx, s.indexKey, "-inf", cut)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("prune index: %w", err)
	}
	return s.unlog(ctx, n, old.Val())
}

// splitRecord parses a record value: "epoch sec nanos seq\n" then the
// codec's bytes.
func splitRecord(v string) (epoch uint64, payload string, seq uint64, sec int64, err error) {
	i := strings.IndexByte(v, '\n')
	if i < 0 {
		return 0, "", 0, 0, errors.New("record without header")
	}
	f := strings.Fields(v[:i])
	if len(f) != 4 {
		return 0, "", 0, 0, fmt.Errorf("record header %q", v[:i])
	}
	if epoch, err = strconv.ParseUint(f[0], 10, 64); err == nil {
		if sec, err = strconv.ParseInt(f[1], 10, 64); err == nil {
			seq, err = strconv.ParseUint(f[3], 10, 64)
		}
	}
	if err != nil {
		return 0, "", 0, 0, fmt.Errorf("record header %q: %w", v[:i], err)
	}
	return epoch, v[i+1:], seq, sec, nil
}

func (s *Store) decode(id, v string) (*store.Record, error) {
	_, payload, _, _, err := splitRecord(v)
	if err != nil {
		return nil, fmt.Errorf("decode %q: %w", id, err)
	}
	rec, err := s.codec.Decode(id, []byte(payload))
	if err != nil {
		return nil, fmt.Errorf("decode %q: %w", id, err)
	}
	return rec, nil
}

// Get implements store.Store. The record's Diagnosis is nil.
func (s *Store) Get(ctx context.Context, node string) (*store.Record, error) {
	v, err := s.rdb.Get(ctx, s.recKey(node)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%q: %w", node, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", node, err)
	}
	return s.decode(node, v)
}

// listBatch bounds the GETs of one List pipeline.
const listBatch = 1000

// List implements store.Store: the nodes written within NodeTTL whose
// keys have not expired. Diagnoses are nil.
func (s *Store) List(ctx context.Context) ([]*store.Record, error) {
	recs, _, err := s.readNodes(ctx, false)
	return recs, err
}

// Dump returns every node's record (as List) and history, in a pipelined
// round trip per listBatch nodes: how a replica copies the shared state
// (store/replica).
func (s *Store) Dump(ctx context.Context) ([]*store.Record, [][]diagnose.Point, error) {
	return s.readNodes(ctx, true)
}

// readNodes reads the indexed nodes' records, and their histories when
// withHist.
func (s *Store) readNodes(ctx context.Context, withHist bool) ([]*store.Record, [][]diagnose.Point, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.indexKey, &redis.ZRangeBy{Min: s.listedSince(), Max: "+inf"}).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("list nodes: %w", err)
	}
	sort.Strings(ids)
	return s.readIDs(ctx, ids, withHist)
}

// readIDs reads the records of ids, and their histories when withHist,
// leaving out the nodes whose record is gone.
func (s *Store) readIDs(ctx context.Context, ids []string, withHist bool) ([]*store.Record, [][]diagnose.Point, error) {
	recs := make([]*store.Record, 0, len(ids))
	var hists [][]diagnose.Point
	for len(ids) > 0 {
		batch := ids[:min(len(ids), listBatch)]
		ids = ids[len(batch):]
		pipe := s.rdb.Pipeline()
		recCmds := make([]*redis.StringCmd, len(batch))
		histCmds := make([]*redis.StringCmd, len(batch))
		for i, id := range batch {
			recCmds[i] = pipe.Get(ctx, s.recKey(id))
			if withHist {
				histCmds[i] = pipe.Get(ctx, s.histKey(id))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, fmt.Errorf("list nodes: %w", err)
		}
		for i, cmd := range recCmds {
			v, err := cmd.Result()
			if errors.Is(err, redis.Nil) {
				continue // expired since it was indexed
			}
			if err != nil {
				return nil, nil, fmt.Errorf("read %q: %w", batch[i], err)
			}
			rec, err := s.decode(batch[i], v)
			if err != nil {
				return nil, nil, err
			}
			if withHist {
				h, err := histCmds[i].Bytes()
				if err != nil && !errors.Is(err, redis.Nil) {
					return nil, nil, fmt.Errorf("read history of %q: %w", batch[i], err)
				}
				points, err := decodeHistory(batch[i], h)
				if err != nil {
					return nil, nil, err
				}
				hists = append(hists, points)
			}
			recs = append(recs, rec)
		}
	}
	return recs, hists, nil
}

// decodeHistory decodes a node's history bytes; none is an empty history.
func decodeHistory(id string, b []byte) ([]diagnose.Point, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h compact.History
	if err := h.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("decode history of %q: %w", id, err)
	}
	points, err := h.Points()
	if err != nil {
		return nil, fmt.Errorf("decode history of %q: %w", id, err)
	}
	return points, nil
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, node string) ([]diagnose.Point, error) {
	v, err := s.rdb.Get(ctx, s.histKey(node)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%q: %w", node, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read history of %q: %w", node, err)
	}
	return decodeHistory(node, v)
}

// newFeedID returns a random id for a feed that has none yet.
func newFeedID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Tokens are "<feed id>:<seq>": the feed id tells a token of this feed from
// one of a feed Redis lost (a restart without persistence, a flush), seq
// numbers the events from 1 (entry id 0-<seq>).
func token(fid string, seq string) string { return fid + ":" + seq }

func parseToken(tok string) (fid string, seq uint64, err error) {
	if tok == "" {
		return "", 0, nil
	}
	i := strings.LastIndexByte(tok, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("token %q: %w", tok, store.ErrTokenExpired)
	}
	seq, err = strconv.ParseUint(tok[i+1:], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("token %q: %w", tok, store.ErrTokenExpired)
	}
	return tok[:i], seq, nil
}

// Publish implements store.Store.
func (s *Store) Publish(ctx context.Context, h *llmdiagv1.NodeHealth) (store.Event, error) {
	epoch, _ := store.Fence(ctx)
	b, err := proto.Marshal(h)
	if err != nil {
		return store.Event{}, fmt.Errorf("encode event: %w", err)
	}
	res, err := publishScript.Run(ctx, s.rdb, []string{s.eventsKey, s.feedIDKey, s.fenceKey},
		strconv.FormatUint(epoch, 10), s.opts.FeedLen, newFeedID(), b).StringSlice()
	if err != nil {
		return store.Event{}, fmt.Errorf("publish: %w", err)
	}
	if len(res) == 1 && res[0] == "fenced" {
		return store.Event{}, fmt.Errorf("publish with fence %d: %w", epoch, store.ErrFenced)
	}
	if len(res) != 2 || !strings.HasPrefix(res[1], "0-") {
		return store.Event{}, fmt.Errorf("publish: unexpected reply %q", res)
	}
	return store.Event{Token: token(res[0], res[1][2:]), Health: proto.Clone(h).(*llmdiagv1.NodeHealth)}, nil
}

// LastToken implements store.Store.
func (s *Store) LastToken(ctx context.Context) (string, error) {
	res, err := lastScript.Run(ctx, s.rdb, []string{s.eventsKey, s.feedIDKey}, newFeedID()).StringSlice()
	if err != nil {
		return "", fmt.Errorf("last token: %w", err)
	}
	if len(res) != 2 {
		return "", fmt.Errorf("last token: unexpected reply %q", res)
	}
	return token(res[0], res[1]), nil
}

// maxBlock bounds one XREAD BLOCK, so a reader that gave up frees its
// connection soon.
const maxBlock = 2 * time.Second

// Events implements store.Store. It waits with XREAD BLOCK.
func (s *Store) Events(ctx context.Context, tok string, max int, wait time.Duration) ([]store.Event, error) {
	fid, after, err := parseToken(tok)
	if err != nil {
		return nil, err
	}
	if max <= 0 {
		max = 1
	}
	deadline := time.Now().Add(wait)
	for {
		evs, err := s.read(ctx, tok, fid, after, max)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		// Wait for an entry after the token, then read again through the
		// checks (the feed may have been trimmed past it meanwhile).
		block := min(left, maxBlock)
		if block < time.Millisecond {
			block = time.Millisecond
		}
		done := make(chan error, 1)
		go func() {
			// Not ctx: a cancelled read would leave the connection mid-reply.
			_, err := s.rdb.XRead(context.WithoutCancel(ctx), &redis.XReadArgs{
				Streams: []string{s.eventsKey, "0-" + strconv.FormatUint(after, 10)},
				Count:   1,
				Block:   block,
			}).Result()
			done <- err
		}()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-done:
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("wait for events: %w", err)
			}
		}
	}
}

func (s *Store) read(ctx context.Context, tok, fid string, after uint64, max int) ([]store.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := readScript.Run(ctx, s.rdb, []string{s.eventsKey, s.feedIDKey}, fid, after, max).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	if len(res) == 0 {
		return nil, errors.New("read events: empty reply")
	}
	if res[0] == "expired" {
		why := "expired"
		if len(res) > 1 {
			why = res[1]
		}
		return nil, fmt.Errorf("%s (%q): %w", why, tok, store.ErrTokenExpired)
	}
	if len(res) < 2 {
		return nil, fmt.Errorf("read events: unexpected reply %q", res)
	}
	fid = res[1] // the same, or the current feed's when reading from the start
	var out []store.Event
	for i := 2; i+1 < len(res); i += 2 {
		id, payload := res[i], res[i+1]
		h := &llmdiagv1.NodeHealth{}
		if err := proto.Unmarshal([]byte(payload), h); err != nil {
			return nil, fmt.Errorf("decode event %s: %w", id, err)
		}
		out = append(out, store.Event{Token: token(fid, strings.TrimPrefix(id, "0-")), Health: h})
	}
	return out, nil
}

// Sweep implements store.Store: it removes the nodes the index says were
// last written unseenFor ago or more (by Options.Now), in a few pipelined
// round trips per listBatch nodes, and returns their records (a record
// whose keys had expired comes back with only its id).
func (s *Store) Sweep(ctx context.Context, unseenFor time.Duration) ([]*store.Record, error) {
	cutoff := strconv.FormatInt(s.opts.Now().Add(-unseenFor).UnixMilli(), 10)
	ids, err := s.rdb.ZRangeByScore(ctx, s.indexKey, &redis.ZRangeBy{Min: "-inf", Max: cutoff}).Result()
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return s.remove(ctx, ids)
}

// Remove implements store.Remover: the named nodes the index holds are
// removed as Sweep removes them.
func (s *Store) Remove(ctx context.Context, ids ...string) ([]*store.Record, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	scores, err := s.rdb.ZMScore(ctx, s.indexKey, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("remove: %w", err)
	}
	held := make([]string, 0, len(ids))
	for i, sc := range scores {
		if sc != 0 {
			held = append(held, ids[i])
		}
	}
	return s.remove(ctx, held)
}

// remove deletes the nodes ids and returns their records.
func (s *Store) remove(ctx context.Context, ids []string) ([]*store.Record, error) {
	sort.Strings(ids)
	out := make([]*store.Record, 0, len(ids))
	for len(ids) > 0 {
		batch := ids[:min(len(ids), listBatch)]
		ids = ids[len(batch):]
		pipe := s.rdb.Pipeline()
		gets := make([]*redis.StringCmd, len(batch))
		for i, id := range batch {
			gets[i] = pipe.Get(ctx, s.recKey(id))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("sweep: %w", err)
		}
		pipe = s.rdb.Pipeline()
		members := make([]any, len(batch))
		for i, id := range batch {
			members[i] = id
			pipe.Del(ctx, s.recKey(id))
			pipe.Del(ctx, s.histKey(id))
			rec := &store.Record{Node: &llmdiagv1.Node{Id: id}}
			if v, err := gets[i].Result(); err == nil {
				if r, err := s.decode(id, v); err == nil {
					rec = r
				}
			}
			out = append(out, rec)
		}
		pipe.ZRem(ctx, s.indexKey, members...)
		pipe.ZRem(ctx, s.logKey, members...)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("sweep: %w", err)
		}
	}
	return out, nil
}
