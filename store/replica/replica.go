package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

var (
	_ store.Store         = (*Store)(nil)
	_ store.HistoryReader = (*Store)(nil)
)

// Dumper is a shared store that reads every node's record and history in a
// few round trips; without it Sync reads List, then each node's History.
type Dumper interface {
	Dump(ctx context.Context) ([]*store.Record, [][]diagnose.Point, error)
}

// Changer is a shared store that says which nodes were written since a
// position in its own write log (redisstore.Store), so that Sync reads only
// those, and every FullEvery reads everything (Dump) all the same.
type Changer interface {
	Dumper
	// Changes returns the log's position now and, from since (a position
	// it returned before; "" asks for the position alone), the ids of the
	// nodes listed now and of those written after since. Records read
	// after it are at least as new as the position. store.ErrTokenExpired
	// says since cannot be followed: read everything.
	Changes(ctx context.Context, since string) (listed, changed []string, pos string, err error)
	// Read returns the records and histories of the named nodes, leaving
	// out those the store does not hold.
	Read(ctx context.Context, ids []string) ([]*store.Record, [][]diagnose.Point, error)
}

// DefaultFullEvery is how often Sync reads the whole shared store when it
// can read only what changed (Options.FullEvery).
const DefaultFullEvery = 5 * time.Minute

// DefaultLossGrace is how long the copy keeps the nodes a shared store
// that lost its data no longer lists (Options.LossGrace).
const DefaultLossGrace = time.Minute

// Options tune a Store.
type Options struct {
	// SyncEvery is how often Run brings the copy up to date (default 1s).
	SyncEvery time.Duration
	// FullEvery is, when the shared store is a Changer, how often Sync
	// reads all of it instead of only the nodes written since the last
	// sync, so the copy cannot drift from it for longer (default
	// DefaultFullEvery). Other shared stores are read whole every sync.
	FullEvery time.Duration
	// PendingMax bounds the health events kept while the shared store is
	// unreachable (default 65536); past it the oldest are dropped, and
	// Degraded says so.
	PendingMax int
	// LossGrace is how long, once the shared store is found to have lost
	// its data (its write log no longer follows on from the last sync: a
	// Redis restarted without persistence, a flush), the copy keeps the
	// nodes it held that the shared store does not list again yet: the
	// store lost them, not the fleet, and the ingest leader writes them
	// again at its next refresh. Default DefaultLossGrace; a node the
	// leader removes within it lingers in this copy until it ends.
	LossGrace time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives sync failures and recoveries (default: discarded).
	Log *slog.Logger
}

// SyncStats count the Syncs that brought the copy up to date, by how
// much they read.
type SyncStats struct {
	// Full counts the Syncs that read the whole shared store; Incremental
	// those that read the nodes written since the sync before.
	Full, Incremental uint64
	// LastFull says whether the last one was full; LastRead is how many
	// nodes' records and histories it read.
	LastFull bool
	LastRead int
}

// Store answers reads from local and writes through to shared.
type Store struct {
	shared store.Store
	local  *memory.Store
	opts   Options

	flushMu sync.Mutex // one flush at a time
	// writes is held (read) by every Put across its two writes, and taken
	// by Sync only to read the copy's Put count: every Put that count
	// includes has then finished writing the shared store, so the dump
	// Sync reads next holds it, and RetainUnwritten never drops a node
	// whose shared write is still on its way.
	writes sync.RWMutex

	mu       sync.Mutex
	syncedAt time.Time // when the copy last matched the shared store
	// syncedTok is the feed position the copy is at least as new as: the
	// shared feed's last token, read before the copy was.
	syncedTok string
	synced    bool
	down      error // the shared store's last failure; nil when it answered
	pending   []*llmdiagv1.NodeHealth
	dropped   int // pending events dropped since the shared store went away
	// skip is set when a write or cached read found the shared store
	// unreachable: until Sync finds it answering, writes go to the copy
	// only and events to the queue, so the writer never waits on a store
	// that is down (a client's dial retries take seconds per call).
	skip bool
	// retainFrom is the copy's Put count when the last successful Sync
	// began: a node written after it and absent from the shared store is
	// this replica's own, not yet there, and stays.
	retainFrom uint64

	// The incremental sync's state (Changer): the write log position the
	// copy is at least as new as ("" makes the next Sync full), the nodes
	// the shared store listed then, when the last full read began, and
	// whether an incremental read failed since (the next Sync is full).
	pos    string
	listed map[string]bool
	fullAt time.Time
	refull bool
	stats  SyncStats
	// lostIDs are the nodes the copy held when the shared store was found
	// to have lost its data; kept until lostUntil though not listed.
	lostIDs   map[string]bool
	lostUntil time.Time
}

// New returns a Store over shared, keeping its copy in local.
func New(shared store.Store, local *memory.Store, opts Options) *Store {
	if opts.SyncEvery <= 0 {
		opts.SyncEvery = time.Second
	}
	if opts.FullEvery <= 0 {
		opts.FullEvery = DefaultFullEvery
	}
	if opts.PendingMax <= 0 {
		opts.PendingMax = 65536
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LossGrace <= 0 {
		opts.LossGrace = DefaultLossGrace
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Store{shared: shared, local: local, opts: opts}
}

// Run syncs every SyncEvery until ctx ends.
func (s *Store) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.SyncEvery)
	defer t.Stop()
	for {
		_ = s.Sync(ctx) // Sync records and logs the failure
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync sends the queued health events, then brings the copy up to date
// with what the shared store holds, except what this replica wrote that
// the shared store does not hold yet: a record observed after the shared
// store's, or a node written since the last sync began. From a Changer it
// reads only the nodes written since the last sync, and the ids of those
// listed (to drop those that left); everything on the first sync, every
// FullEvery, after an incremental read failed, and when the Changer cannot
// follow its log from the last position.
func (s *Store) Sync(ctx context.Context) error {
	s.writes.Lock()
	start := s.local.Puts()
	s.writes.Unlock()
	if err := s.flush(ctx); err != nil {
		if errors.Is(err, store.ErrFenced) {
			// It answers, refusing this writer: the writer's next Put
			// hears it and stops.
			s.mu.Lock()
			s.skip = false
			s.mu.Unlock()
			return s.failed(err)
		}
		return s.unreachable(err)
	}
	tok, err := s.shared.LastToken(ctx)
	if err != nil {
		return s.unreachable(err)
	}
	s.mu.Lock()
	s.skip = false // it answers: writes go to it again
	since := s.retainFrom
	pos, listed := s.pos, s.listed
	full := pos == "" || s.refull || s.opts.Now().Sub(s.fullAt) >= s.opts.FullEvery
	s.mu.Unlock()
	began := s.opts.Now()
	read, err := s.read(ctx, full, pos, listed)
	if err != nil {
		if !full {
			s.mu.Lock()
			s.refull = true
			s.mu.Unlock()
		}
		return s.failed(err)
	}
	retain, err := s.retain(ctx, read, began)
	if err != nil {
		return err
	}
	for i, rec := range read.recs {
		// Take keeps this replica's record when it is newer: written since
		// the read, or while the shared store did not answer; the shared
		// store gets it with the next refresh.
		if _, err := s.local.Take(ctx, rec, read.hists[i]); err != nil {
			return fmt.Errorf("copy %s: %w", rec.Node.GetId(), err)
		}
	}
	if err := s.local.RetainUnwritten(ctx, retain, since); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down != nil {
		s.opts.Log.Info("shared store answers again", "was", s.down.Error(), "events_dropped", s.dropped)
	}
	s.syncedAt, s.down, s.dropped = s.opts.Now(), nil, 0
	s.syncedTok, s.synced = tok, true
	s.retainFrom = start
	s.pos, s.listed = read.pos, read.keep
	if read.full {
		s.fullAt, s.refull = began, false
		s.stats.Full++
	} else {
		s.stats.Incremental++
	}
	s.stats.LastFull, s.stats.LastRead = read.full, len(read.recs)
	return nil
}

// retain is the nodes the copy keeps after read: those the shared store
// lists, and, for LossGrace after the shared store was found to have lost
// its data, those the copy held then.
func (s *Store) retain(ctx context.Context, read readout, now time.Time) (map[string]bool, error) {
	if read.lost {
		held, err := s.local.List(ctx)
		if err != nil {
			return nil, err
		}
		ids := make(map[string]bool, len(held))
		for _, rec := range held {
			ids[rec.Node.GetId()] = true
		}
		s.mu.Lock()
		s.lostIDs, s.lostUntil = ids, now.Add(s.opts.LossGrace)
		s.mu.Unlock()
		s.opts.Log.Warn("the shared store lost its data: this copy keeps its nodes until the leader writes them again", "nodes", len(ids), "for", s.opts.LossGrace)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lostIDs == nil {
		return read.keep, nil
	}
	if !now.Before(s.lostUntil) {
		s.lostIDs = nil
		return read.keep, nil
	}
	keep := make(map[string]bool, len(read.keep)+len(s.lostIDs))
	for id := range read.keep {
		keep[id] = true
	}
	for id := range s.lostIDs {
		keep[id] = true
	}
	return keep, nil
}

// readout is what one Sync read of the shared store: records and their
// histories to take, the nodes the copy keeps, the write log position
// (Changer; "" otherwise) and whether it read everything.
type readout struct {
	recs  []*store.Record
	hists [][]diagnose.Point
	keep  map[string]bool
	pos   string
	full  bool
	// lost: the write log did not follow on from the last sync, so the
	// shared store lost its data.
	lost bool
}

// read reads what Sync takes: from a Changer, unless full, the nodes
// written after pos and those listed now but not at pos (listed); else
// everything.
func (s *Store) read(ctx context.Context, full bool, pos string, listed map[string]bool) (readout, error) {
	c, ok := s.shared.(Changer)
	if ok && !full {
		r, err := s.readChanged(ctx, c, pos, listed)
		if !errors.Is(err, store.ErrTokenExpired) {
			return r, err
		}
		s.opts.Log.Info("reading the whole shared store: its write log does not follow on from the last sync", "err", err)
	}
	r := readout{full: true, lost: ok && !full}
	if ok {
		// The position first: what the dump reads is at least as new.
		var err error
		if _, _, r.pos, err = c.Changes(ctx, ""); err != nil {
			return r, err
		}
	}
	var err error
	if r.recs, r.hists, err = s.dump(ctx); err != nil {
		return r, err
	}
	r.keep = make(map[string]bool, len(r.recs))
	for _, rec := range r.recs {
		r.keep[rec.Node.GetId()] = true
	}
	return r, nil
}

// readChanged reads from c the nodes listed now that were written after
// pos or were not listed at pos (listed: a write the log lost, or a node
// this copy never took); the copy keeps every node listed now whose record
// the shared store still holds.
func (s *Store) readChanged(ctx context.Context, c Changer, pos string, listed map[string]bool) (readout, error) {
	now, changed, next, err := c.Changes(ctx, pos)
	if err != nil {
		return readout{}, err
	}
	keep := make(map[string]bool, len(now))
	for _, id := range now {
		keep[id] = true
	}
	want := make(map[string]bool, len(changed))
	var ids []string
	for _, id := range changed {
		if keep[id] && !want[id] {
			want[id] = true
			ids = append(ids, id)
		}
	}
	for _, id := range now {
		if !listed[id] && !want[id] {
			want[id] = true
			ids = append(ids, id)
		}
	}
	recs, hists, err := c.Read(ctx, ids)
	if err != nil {
		return readout{}, err
	}
	for _, rec := range recs {
		delete(want, rec.Node.GetId())
	}
	for id := range want {
		delete(keep, id) // its record went since it was listed
	}
	return readout{recs: recs, hists: hists, keep: keep, pos: next}, nil
}

func (s *Store) dump(ctx context.Context) ([]*store.Record, [][]diagnose.Point, error) {
	if d, ok := s.shared.(Dumper); ok {
		return d.Dump(ctx)
	}
	recs, err := s.shared.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	hists := make([][]diagnose.Point, len(recs))
	for i, rec := range recs {
		h, err := s.shared.History(ctx, rec.Node.GetId())
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, nil, err
		}
		hists[i] = h
	}
	return recs, hists, nil
}

// Stats says how the Syncs so far brought the copy up to date.
func (s *Store) Stats() SyncStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// failed records that the shared store did not answer and returns err.
func (s *Store) failed(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down == nil {
		s.opts.Log.Warn("shared store unreachable: answering from this replica's copy", "err", err)
	}
	s.down = err
	return err
}

// unreachable records, as failed does, that the shared store did not
// answer, and sends writes to the copy only until Sync finds it answering.
func (s *Store) unreachable(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	s.mu.Lock()
	s.skip = true
	s.mu.Unlock()
	return s.failed(err)
}

// Degraded reports whether reads are served from a copy the shared store
// could not bring up to date, why, and how old the copy is.
func (s *Store) Degraded() (reason string, age time.Duration, degraded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	age = s.opts.Now().Sub(s.syncedAt)
	switch {
	case s.down != nil:
		reason = "shared store unreachable: " + s.down.Error()
	case s.syncedAt.IsZero():
		reason = "not yet copied from the shared store"
	case age > 3*s.opts.SyncEvery:
		reason = "copy not brought up to date for " + age.Round(time.Millisecond).String()
	default:
		return "", age, false
	}
	if s.dropped > 0 {
		reason += fmt.Sprintf("; %d health events dropped", s.dropped)
	}
	return reason, age, true
}

// skipping reports whether the shared store was found unreachable and Sync
// has not yet found it answering.
func (s *Store) skipping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skip
}

// Put writes the copy, then the shared store. A record observed before the
// one the copy holds (a newer leader's, brought by a sync while this
// replica still refreshed) is refused with store.ErrOutOfOrder and written
// nowhere, so the copy never goes back in time. Only a fencing or ordering
// refusal is an error: when the shared store is unreachable the next
// refresh writes the record again (once Sync finds it answering, Put does
// not wait on it meanwhile).
func (s *Store) Put(ctx context.Context, rec *store.Record, p diagnose.Point) error {
	s.writes.RLock()
	defer s.writes.RUnlock()
	if err := s.local.PutInOrder(ctx, rec, p); err != nil {
		return err
	}
	if s.skipping() {
		return nil
	}
	err := s.shared.Put(ctx, rec, p)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrOutOfOrder), ctx.Err() != nil:
		return err
	}
	_ = s.unreachable(err)
	return nil
}

// PutRecord implements store.RecordWriter as Put does: the copy first,
// then the shared store when it is a RecordWriter (a shared store without
// it gets the record with the next refresh's Put).
func (s *Store) PutRecord(ctx context.Context, rec *store.Record) error {
	s.writes.RLock()
	defer s.writes.RUnlock()
	if err := s.local.PutRecordInOrder(ctx, rec); err != nil {
		return err
	}
	rw, ok := s.shared.(store.RecordWriter)
	if !ok || s.skipping() {
		return nil
	}
	err := rw.PutRecord(ctx, rec)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrOutOfOrder), errors.Is(err, store.ErrNotFound), ctx.Err() != nil:
		return err
	}
	_ = s.unreachable(err)
	return nil
}

var _ store.RecordWriter = (*Store)(nil)

// Sweep removes old nodes from the shared store, then the same nodes from
// the copy. When the shared store is unreachable it removes nothing (the
// next sweep will) and is not an error, as Put.
func (s *Store) Sweep(ctx context.Context, unseenFor time.Duration) ([]*store.Record, error) {
	recs, err := s.shared.Sweep(ctx, unseenFor)
	return s.removedLocally(ctx, recs, err)
}

// removedLocally deletes from the copy the nodes the shared store removed
// (recs, err: its answer): a fenced writer or an ended ctx is an error; a
// shared store that failed otherwise removed nothing, which is not one.
func (s *Store) removedLocally(ctx context.Context, recs []*store.Record, err error) ([]*store.Record, error) {
	switch {
	case err == nil:
	case errors.Is(err, store.ErrFenced), ctx.Err() != nil:
		return nil, err
	default:
		_ = s.failed(err)
		return nil, nil
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.Node.GetId()
	}
	if err := s.local.Delete(ctx, ids...); err != nil {
		return nil, err
	}
	return recs, nil
}

// Remove removes nodes from the shared store, then the same nodes from the
// copy. When the shared store is unreachable it removes nothing and is
// not an error (the nodes leave with the retention's sweep); so with a
// shared store that is no store.Remover.
func (s *Store) Remove(ctx context.Context, ids ...string) ([]*store.Record, error) {
	r, ok := s.shared.(store.Remover)
	if !ok {
		return nil, nil
	}
	recs, err := r.Remove(ctx, ids...)
	return s.removedLocally(ctx, recs, err)
}

// Publish sends h to the shared feed, after any events still queued; when
// the shared store is unreachable (or was, and Sync has not yet found it
// answering) h is queued and the returned event has no token yet.
func (s *Store) Publish(ctx context.Context, h *llmdiagv1.NodeHealth) (store.Event, error) {
	if !s.skipping() {
		err := s.flush(ctx)
		if err == nil {
			var ev store.Event
			if ev, err = s.shared.Publish(ctx, h); err == nil {
				return ev, nil
			}
		}
		if errors.Is(err, store.ErrFenced) || ctx.Err() != nil {
			return store.Event{}, err
		}
		_ = s.unreachable(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, h)
	if over := len(s.pending) - s.opts.PendingMax; over > 0 {
		s.pending = append(s.pending[:0:0], s.pending[over:]...)
		s.dropped += over
	}
	return store.Event{Health: h}, nil
}

// flush publishes the queued events in order, stopping at the first
// failure. One flush runs at a time, so none is sent twice; the lock on the
// rest of the state is not held while the shared store answers.
func (s *Store) flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.pending = nil
			s.mu.Unlock()
			return nil
		}
		h := s.pending[0]
		s.mu.Unlock()
		if _, err := s.shared.Publish(ctx, h); err != nil {
			return err
		}
		s.mu.Lock()
		// Publish may have dropped the oldest meanwhile; h is gone then.
		if len(s.pending) > 0 && s.pending[0] == h {
			s.pending = s.pending[1:]
		}
		s.mu.Unlock()
	}
}

// Get implements store.Store from the copy.
func (s *Store) Get(ctx context.Context, node string) (*store.Record, error) {
	return s.local.Get(ctx, node)
}

// List implements store.Store from the copy.
func (s *Store) List(ctx context.Context) ([]*store.Record, error) { return s.local.List(ctx) }

// History implements store.Store from the copy.
func (s *Store) History(ctx context.Context, node string) ([]diagnose.Point, error) {
	return s.local.History(ctx, node)
}

// HistoryInto implements store.HistoryReader from the copy.
func (s *Store) HistoryInto(ctx context.Context, node string, buf *store.HistoryBuf) ([]diagnose.Point, error) {
	return s.local.HistoryInto(ctx, node, buf)
}

// Generation is the copy's (memory.Store.Generation): it changes whenever
// a write or a sync changes what reads return.
func (s *Store) Generation() uint64 { return s.local.Generation() }

// ErrNotSynced is returned by LastToken before the copy was first synced.
var ErrNotSynced = errors.New("replica: copy not yet synced from the shared store")

// LastToken returns the feed position the copy is at least as new as (read
// before the last Sync read the copy), not the feed's newest: a reader that
// takes the copy's state (List) and then reads Events after this token
// misses nothing, though it may see again a change the copy already holds.
func (s *Store) LastToken(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		return "", ErrNotSynced
	}
	return s.syncedTok, nil
}

// Events implements store.Store from the shared feed.
func (s *Store) Events(ctx context.Context, token string, max int, wait time.Duration) ([]store.Event, error) {
	return s.shared.Events(ctx, token, max, wait)
}

// Cached implements store.Store through the shared cache, or the copy's
// own when the shared store does not answer.
func (s *Store) Cached(ctx context.Context, key string, ttl time.Duration, load func(context.Context) ([]byte, error)) ([]byte, error) {
	if s.skipping() {
		return s.local.Cached(ctx, key, ttl, load)
	}
	var loadErr error
	b, err := s.shared.Cached(ctx, key, ttl, func(ctx context.Context) ([]byte, error) {
		b, err := load(ctx)
		loadErr = err
		return b, err
	})
	if err == nil || loadErr != nil || ctx.Err() != nil {
		return b, err
	}
	_ = s.unreachable(err)
	return s.local.Cached(ctx, key, ttl, load)
}
