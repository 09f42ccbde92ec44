package memory

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/compact"
)

var _ store.Store = (*Store)(nil)

// DefaultHistoryLen is the history kept per node unless told otherwise: ten
// minutes at a 5 s refresh, enough to tell a spike from a sustained load and
// to read a trend, in about 2.9 KiB a node (a node, record included, takes
// about 4.9 KiB: BenchmarkStoreMemoryPerNode).
const DefaultHistoryLen = 120

// Options bound what the store keeps.
type Options struct {
	// HistoryLen is the number of points kept per node (default
	// DefaultHistoryLen).
	HistoryLen int
	// FeedLen is the number of health events kept for resuming readers
	// (default 4096).
	FeedLen int
	// CacheEntries bounds the query cache (default 4096).
	CacheEntries int
	// Now is the clock for cache expiry and for the last write of each
	// node, which Sweep reads (default time.Now).
	Now func() time.Time
}

// Store is an in-memory store.Store.
//
// It keeps each node compactly (see package compact): the record as
// protobuf less what can be rebuilt (ids, repeated fields, bucket bounds,
// percentiles, the diagnosis's catalog phrases), the history as
// delta/XOR-encoded chunks: about 4.9 KiB per node with the default history,
// where plain copies took 24 KiB (BenchmarkStoreMemoryPerNode). Get, List and
// History rebuild exactly what Put was given, as fresh values the caller
// owns; history times lose only a monotonic clock reading.
type Store struct {
	mu    sync.RWMutex
	opts  Options
	codec compact.Codec
	nodes map[string]*node
	puts  uint64 // Puts so far: the generation RetainUnwritten compares
	// gen changes (grows) with every change to any node's record or
	// history; readers compare it without the lock (Generation).
	gen atomic.Uint64

	// The feed is a ring of the last FeedLen events; seq numbers them from 1.
	// epoch tells tokens of this store apart from those of another process.
	epoch   string
	feed    []store.Event
	seq     uint64
	changed chan struct{} // closed and replaced on every Publish

	cache cache
}

// New returns an empty store. epoch must differ between processes (the
// caller passes its start time), so a resume token from a previous process is
// recognised as expired instead of being misread.
func New(opts Options, epoch string) *Store {
	if opts.HistoryLen <= 0 {
		opts.HistoryLen = DefaultHistoryLen
	}
	if opts.FeedLen <= 0 {
		opts.FeedLen = 4096
	}
	if opts.CacheEntries <= 0 {
		opts.CacheEntries = 4096
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{
		opts:    opts,
		nodes:   make(map[string]*node),
		epoch:   epoch,
		changed: make(chan struct{}),
		cache:   cache{entries: make(map[string]cacheEntry), max: opts.CacheEntries, now: opts.Now},
	}
}

// node is what the store keeps of one node.
type node struct {
	// rec is the record as compact.Codec encoded it; replaced, never
	// modified. When the codec cannot encode a record (protobuf will not
	// marshal a string that is not UTF-8), raw holds a copy instead.
	rec  []byte
	raw  *store.Record
	hist compact.History
	// written is when Put (or Take) last wrote the node, by opts.Now.
	written time.Time
	// observed is when rec's metrics were observed; put is the store's Put
	// count after the Put that last wrote the node (0 when Take did). A
	// replica's sync uses both to never undo a write it raced (see Take and
	// RetainUnwritten).
	observed time.Time
	put      uint64
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, rec *store.Record, p diagnose.Point) error {
	return s.put(ctx, rec, &p, false)
}

// PutRecord implements store.RecordWriter: Put without a history point,
// for a node Put wrote (ErrNotFound otherwise).
func (s *Store) PutRecord(ctx context.Context, rec *store.Record) error {
	return s.put(ctx, rec, nil, false)
}

// PutInOrder is Put refusing, with store.ErrOutOfOrder and no change, a
// record observed before the one held: as a shared store refuses it, for a
// copy that another writer's records reach too (a replica's, which a sync
// may have brought a newer leader's record). The check and the write are
// one step.
func (s *Store) PutInOrder(ctx context.Context, rec *store.Record, p diagnose.Point) error {
	return s.put(ctx, rec, &p, true)
}

// PutRecordInOrder is PutRecord refusing an older record as PutInOrder does.
func (s *Store) PutRecordInOrder(ctx context.Context, rec *store.Record) error {
	return s.put(ctx, rec, nil, true)
}

// put replaces rec's node's record and, with p, appends p to its history;
// without p the node must have been written before. With inOrder it
// refuses a record observed before the one held.
func (s *Store) put(ctx context.Context, rec *store.Record, p *diagnose.Point, inOrder bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := rec.Node.GetId()
	var raw *store.Record
	b, err := s.codec.Encode(id, rec)
	if err != nil {
		raw = cloneRecord(rec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[id]
	switch {
	case n == nil && p == nil:
		return fmt.Errorf("%q: %w", id, store.ErrNotFound)
	case n == nil:
		n = &node{}
	case inOrder && n.observed.After(rec.Metrics.GetObservedAt().AsTime()):
		return fmt.Errorf("%q observed at %v, %v held: %w", id, rec.Metrics.GetObservedAt().AsTime(), n.observed, store.ErrOutOfOrder)
	}
	if p != nil {
		if err := n.hist.Append(*p, s.opts.HistoryLen); err != nil {
			return fmt.Errorf("%q: %w", id, err)
		}
	}
	s.puts++
	s.gen.Add(1)
	n.rec, n.raw, n.written = b, raw, s.opts.Now()
	n.observed, n.put = rec.Metrics.GetObservedAt().AsTime(), s.puts
	s.nodes[id] = n
	return nil
}

var _ store.RecordWriter = (*Store)(nil)

// entry is one node's encoded record, copied out from under the lock to be
// decoded after it.
type entry struct {
	id  string
	rec []byte
	raw *store.Record
}

// Sweep implements store.Store.
func (s *Store) Sweep(ctx context.Context, unseenFor time.Duration) ([]*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var removed []entry
	s.mu.Lock()
	now := s.opts.Now()
	for id, n := range s.nodes {
		if now.Sub(n.written) >= unseenFor {
			removed = append(removed, entry{id, n.rec, n.raw})
			delete(s.nodes, id)
		}
	}
	if len(removed) > 0 {
		s.gen.Add(1)
	}
	s.mu.Unlock()
	return s.records(removed), nil
}

// Remove implements store.Remover.
func (s *Store) Remove(ctx context.Context, ids ...string) ([]*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var removed []entry
	s.mu.Lock()
	for _, id := range ids {
		if n, ok := s.nodes[id]; ok {
			removed = append(removed, entry{id, n.rec, n.raw})
			delete(s.nodes, id)
		}
	}
	if len(removed) > 0 {
		s.gen.Add(1)
	}
	s.mu.Unlock()
	return s.records(removed), nil
}

// records decodes what Sweep or Remove took out, sorted by node id.
func (s *Store) records(removed []entry) []*store.Record {
	sort.Slice(removed, func(i, j int) bool { return removed[i].id < removed[j].id })
	out := make([]*store.Record, len(removed))
	for i, g := range removed {
		rec, err := s.decode(g.id, g.rec, g.raw)
		if err != nil {
			// Gone all the same; the caller still learns its id.
			rec = &store.Record{Node: &llmdiagv1.Node{Id: g.id}}
		}
		out[i] = rec
	}
	return out
}

// Generation changes whenever a node's record or history changes, or a
// node leaves: an answer derived from the store at one generation is still
// the store's answer while the generation reads the same. It costs an
// atomic load.
func (s *Store) Generation() uint64 { return s.gen.Load() }

// Len is the number of nodes the store holds.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.nodes)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, node string) (*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	n, ok := s.nodes[node]
	var b []byte
	var raw *store.Record
	if ok {
		b, raw = n.rec, n.raw
	}
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%q: %w", node, store.ErrNotFound)
	}
	return s.decode(node, b, raw)
}

func (s *Store) decode(id string, b []byte, raw *store.Record) (*store.Record, error) {
	if raw != nil {
		return cloneRecord(raw), nil
	}
	rec, err := s.codec.Decode(id, b)
	if err != nil {
		return nil, fmt.Errorf("decode %q: %w", id, err)
	}
	return rec, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context) ([]*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	entries := make([]entry, 0, len(s.nodes))
	for id, n := range s.nodes {
		entries = append(entries, entry{id, n.rec, n.raw})
	}
	s.mu.RUnlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].id < entries[j].id })
	out := make([]*store.Record, len(entries))
	for i, e := range entries {
		rec, err := s.decode(e.id, e.rec, e.raw)
		if err != nil {
			return nil, err
		}
		out[i] = rec
	}
	return out, nil
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, node string) ([]diagnose.Point, error) {
	h, err := s.history(ctx, node)
	if err != nil {
		return nil, err
	}
	points, err := h.Points()
	if err != nil {
		return nil, fmt.Errorf("decode history of %q: %w", node, err)
	}
	return points, nil
}

// HistoryInto implements store.HistoryReader.
func (s *Store) HistoryInto(ctx context.Context, node string, buf *store.HistoryBuf) ([]diagnose.Point, error) {
	h, err := s.history(ctx, node)
	if err != nil {
		return nil, err
	}
	points, vals, err := h.AppendPoints(buf.Points[:0], buf.Vals[:0])
	if err != nil {
		return nil, fmt.Errorf("decode history of %q: %w", node, err)
	}
	buf.Points, buf.Vals = points, vals
	return points, nil
}

// history returns a snapshot of a node's encoded history, or ErrNotFound.
func (s *Store) history(ctx context.Context, node string) (compact.History, error) {
	if err := ctx.Err(); err != nil {
		return compact.History{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, ok := s.nodes[node]
	if !ok {
		return compact.History{}, fmt.Errorf("%q: %w", node, store.ErrNotFound)
	}
	return n.hist.Snapshot(), nil
}

// Publish implements store.Store.
func (s *Store) Publish(ctx context.Context, h *llmdiagv1.NodeHealth) (store.Event, error) {
	if err := ctx.Err(); err != nil {
		return store.Event{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	ev := store.Event{Token: s.token(s.seq), Health: proto.Clone(h).(*llmdiagv1.NodeHealth)}
	if len(s.feed) < s.opts.FeedLen {
		s.feed = append(s.feed, ev)
	} else {
		s.feed[int((s.seq-1)%uint64(s.opts.FeedLen))] = ev
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return ev, nil
}

// LastToken implements store.Store.
func (s *Store) LastToken(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.token(s.seq), nil
}

// Events implements store.Store.
func (s *Store) Events(ctx context.Context, token string, max int, wait time.Duration) ([]store.Event, error) {
	after, err := s.parseToken(token)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.RLock()
		evs, err := s.since(after, max)
		changed := s.changed
		s.mu.RUnlock()
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil
		case <-changed:
		}
	}
}

// since returns events with seq > after; s.mu must be held.
func (s *Store) since(after uint64, max int) ([]store.Event, error) {
	if after > s.seq {
		return nil, fmt.Errorf("token ahead of feed: %w", store.ErrTokenExpired)
	}
	oldest := uint64(1)
	if s.seq > uint64(len(s.feed)) {
		oldest = s.seq - uint64(len(s.feed)) + 1
	}
	if after+1 < oldest {
		return nil, fmt.Errorf("token trimmed from feed: %w", store.ErrTokenExpired)
	}
	var out []store.Event
	for seq := after + 1; seq <= s.seq && len(out) < max; seq++ {
		out = append(out, s.feed[int((seq-1)%uint64(s.opts.FeedLen))])
	}
	return out, nil
}

func (s *Store) token(seq uint64) string {
	return s.epoch + "-" + strconv.FormatUint(seq, 10)
}

func (s *Store) parseToken(token string) (uint64, error) {
	if token == "" {
		return 0, nil
	}
	i := strings.LastIndexByte(token, '-')
	if i < 0 || token[:i] != s.epoch {
		return 0, fmt.Errorf("token %q from another feed: %w", token, store.ErrTokenExpired)
	}
	n, err := strconv.ParseUint(token[i+1:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("token %q: %w", token, store.ErrTokenExpired)
	}
	return n, nil
}

func cloneRecord(r *store.Record) *store.Record {
	out := &store.Record{}
	if r.Node != nil {
		out.Node = proto.Clone(r.Node).(*llmdiagv1.Node)
	}
	if r.Metrics != nil {
		out.Metrics = proto.Clone(r.Metrics).(*llmdiagv1.NodeMetrics)
	}
	if r.Diagnosis != nil {
		out.Diagnosis = proto.Clone(r.Diagnosis).(*llmdiagv1.Diagnosis)
	}
	return out
}
