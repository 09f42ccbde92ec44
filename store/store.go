package store

import (
	"context"
	"errors"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// ErrNotFound is returned for a node the store does not know.
var ErrNotFound = errors.New("node not found")

// ErrTokenExpired is returned by Events when the feed no longer holds the
// position a token names (it was trimmed, or the token is from another feed):
// the reader must resynchronise from the current state.
var ErrTokenExpired = errors.New("resume token expired")

// ErrFenced is returned by Put and Publish when a writer with a higher
// fencing token (see WithFence) has written: a stale leader must stop.
var ErrFenced = errors.New("write fenced: a newer writer holds the lease")

// ErrOutOfOrder is returned by Put for a record observed before the one the
// store holds: verdicts never go back in time.
var ErrOutOfOrder = errors.New("record older than the stored one")

type fenceKey struct{}

// WithFence returns ctx carrying the writer's fencing token: its lease
// epoch, which grows with every new lease. Stores shared between processes
// (Redis) refuse Put and Publish with ErrFenced once a higher token has
// written; a write without a token counts as token 0. The memory store has
// one writer and ignores fences.
func WithFence(ctx context.Context, epoch uint64) context.Context {
	return context.WithValue(ctx, fenceKey{}, epoch)
}

// Fence returns the fencing token WithFence put in ctx.
func Fence(ctx context.Context) (epoch uint64, ok bool) {
	epoch, ok = ctx.Value(fenceKey{}).(uint64)
	return epoch, ok
}

// Record is what the store holds as a node's latest state.
type Record struct {
	// Node is the fleet entry with its current health summary.
	Node *llmdiagv1.Node
	// Metrics are the indicators over the refresh's default window.
	Metrics *llmdiagv1.NodeMetrics
	// Diagnosis is the verdict on Metrics, in English. A store may leave it
	// out (the Redis store does, to keep a node small): Get and List may
	// return it nil, and callers then diagnose Metrics themselves.
	Diagnosis *llmdiagv1.Diagnosis
}

// Event is one entry of the health feed.
type Event struct {
	// Token is the event's position; pass it to Events to read what follows.
	Token  string
	Health *llmdiagv1.NodeHealth
}

// HistoryReader is a Store that reads a node's history into memory the
// caller reuses from one node to the next (the refresh loop reads every
// node's): HistoryInto is History, its points and their gauges in buf,
// valid until the next call with buf.
type HistoryReader interface {
	HistoryInto(ctx context.Context, node string, buf *HistoryBuf) ([]diagnose.Point, error)
}

// HistoryBuf is the memory of HistoryInto; the zero value is ready. It
// holds one history at a time: its largest, bounded by the store's history
// bound.
type HistoryBuf struct {
	Points []diagnose.Point
	Vals   []float64
}

// RecordWriter is a Store that replaces a node's latest record without
// appending to its history: the fast lane's writes (refresh/fast.go), whose
// points serve the routing hysteresis only and must not read as refreshes
// to the history's other readers (spikes, the STALLED rule). A store
// without it takes those writes with Put.
type RecordWriter interface {
	// PutRecord replaces the latest record of a node Put has written
	// (ErrNotFound otherwise), as Put does but for the history.
	PutRecord(ctx context.Context, rec *Record) error
}

// Remover is a Store that forgets named nodes at once: how the refresh
// loop removes the nodes discovery no longer has (serve --discovery)
// rather than waiting for the retention. Every store llmdiag ships is one.
type Remover interface {
	// Remove forgets the named nodes, as Sweep does, and returns the last
	// record of each it held, sorted by node id; ids it does not hold are
	// skipped.
	Remove(ctx context.Context, ids ...string) ([]*Record, error)
}

// Store is llmdiag's state. Implementations are safe for concurrent use.
type Store interface {
	// Put replaces a node's latest record and appends p to its history,
	// dropping the oldest points beyond the history bound. A shared store
	// refuses a stale writer (ErrFenced, see WithFence) and a record
	// observed before the stored one (ErrOutOfOrder).
	Put(ctx context.Context, rec *Record, p diagnose.Point) error
	// Get returns a node's latest record, or ErrNotFound.
	Get(ctx context.Context, node string) (*Record, error)
	// List returns every node's latest record, sorted by node id.
	List(ctx context.Context) ([]*Record, error)
	// History returns a node's history, oldest first, or ErrNotFound.
	History(ctx context.Context, node string) ([]diagnose.Point, error)
	// Publish appends a health event to the feed and returns it with its token.
	Publish(ctx context.Context, h *llmdiagv1.NodeHealth) (Event, error)
	// LastToken returns the token of the newest event ("" when the feed is
	// empty): reading Events after it yields only what happens next.
	LastToken(ctx context.Context) (string, error)
	// Events returns up to max events after token, oldest first. When there
	// are none it waits up to wait for one, then returns an empty slice. A
	// token the feed no longer holds gives ErrTokenExpired.
	Events(ctx context.Context, token string, max int, wait time.Duration) ([]Event, error)

	// Sweep forgets every node not written (Put) for unseenFor, by the
	// store's own clock, and returns the last record of each, sorted by node
	// id: how nodes that left the fleet leave the store (the refresh loop
	// sweeps on its cadence with the retention). A record whose data had
	// already expired comes back with only its Node's id.
	Sweep(ctx context.Context, unseenFor time.Duration) ([]*Record, error)

	// Cached returns the value cached under key, or calls load, caches its
	// result for ttl and returns it. Concurrent calls with the same key share
	// one load. Errors are not cached.
	Cached(ctx context.Context, key string, ttl time.Duration, load func(context.Context) ([]byte, error)) ([]byte, error)
}
