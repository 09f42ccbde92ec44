package prom

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
)

// Window returns one node's indicators over window, evaluated at
// now − offset.
//
// It reads every node at once: the first request for a window (in its
// metrics.CanonicalWindow spelling, so "60m" is "1h") and offset sends the
// queries of a refresh, evaluated at now − offset, for the whole fleet;
// concurrent requests for the same pair wait for that read, and later ones
// reuse it for source.Reuse(window); a request that carries a
// source.Budget reads every node of one window and offset from the same
// read, however long it takes. A read is charged to the
// source.Budget in ctx at the most queries it may send (every engine's),
// then refunded to what it sent; when the budget cannot cover it the
// request gets an error wrapping source.ErrOverBudget and nothing is sent.
// Its queries take on-demand slots (Config.OnDemandInFlight).
//
// An unknown node is an error wrapping source.ErrUnknownNode; an id that
// is not a valid label value one wrapping ErrInvalidValue.
func (s *Source) Window(ctx context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	if node == "" {
		return nil, fmt.Errorf("node: %w: empty node id", ErrInvalidValue)
	}
	if err := checkValue(node); err != nil {
		return nil, fmt.Errorf("node %q: %w", node, err)
	}
	canon, err := metrics.CanonicalWindow(window)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("offset %v: must not be negative", offset)
	}
	set, err := s.windowSet(ctx, setKey{window: canon, offset: offset})
	if err != nil {
		return nil, err
	}
	raw, ok := set.nodes[node]
	if !ok {
		return nil, fmt.Errorf("%q has no series in prometheus at %s: %w", node, set.at.UTC().Format(time.RFC3339), source.ErrUnknownNode)
	}
	m := &llmdiagv1.NodeMetrics{}
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("window of %q: %w", node, err)
	}
	return m, nil
}

// setKey names a fleet-wide on-demand window: the canonical window and the
// offset.
type setKey struct {
	window string
	offset time.Duration
}

// windowSet is every node's indicators over one window and offset, each
// node's marshalled (a third of the memory of the messages, and a copy of
// its own for every caller).
type windowSet struct {
	done chan struct{} // closed once read; the fields below are set before
	// nodes are the marshalled NodeMetrics by node id.
	nodes map[string][]byte
	at    time.Time // evaluation time
	err   error
	size  int64
	// expires is when the set is no longer reused; under windowSets.mu.
	expires time.Time
}

func (w *windowSet) read() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// windowSets holds the sets being read and those read, for reuse, at most
// max bytes of the latter. A set that failed is forgotten at once.
type windowSets struct {
	max int64

	mu   sync.Mutex
	sets map[setKey]*windowSet
	size int64 // of the read sets held
}

func newWindowSets(maxBytes int64) *windowSets {
	return &windowSets{max: maxBytes, sets: map[setKey]*windowSet{}}
}

// windowSet returns the read set of key, reading it if no set of key is
// held or being read.
func (s *Source) windowSet(ctx context.Context, key setKey) (*windowSet, error) {
	budget := source.BudgetOf(ctx)
	if set, ok := budget.Kept(key); ok {
		return set.(*windowSet), nil
	}
	ws := s.windows
	ws.mu.Lock()
	ws.sweep(s.now())
	set := ws.sets[key]
	if set == nil {
		dur, lifetime, err := metrics.ParseWindow(key.window)
		if err != nil {
			ws.mu.Unlock()
			return nil, err
		}
		b := s.builder(dur, lifetime)
		cost := s.planned(b)
		what := fmt.Sprintf("reading every node's %s window ending %v ago", key.window, key.offset)
		if err := budget.Charge(cost, what); err != nil {
			ws.mu.Unlock()
			return nil, err
		}
		set = &windowSet{done: make(chan struct{})}
		ws.sets[key] = set
		// The read outlives the request that started it: others may wait
		// on it. Config.WindowTimeout bounds it.
		go s.readSet(context.WithoutCancel(ctx), key, set, b, dur, cost)
	}
	ws.mu.Unlock()
	select {
	case <-set.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if set.err != nil {
		return nil, set.err
	}
	// The rest of the request reads this set, even once it expires here.
	budget.Keep(key, set)
	return set, nil
}

// readSet reads set: the queries of a refresh with b at now − key.offset,
// on on-demand slots. charged is what the budget in ctx paid for it.
func (s *Source) readSet(ctx context.Context, key setKey, set *windowSet, b builder, dur time.Duration, charged int) {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, onDemandKey{}, true), s.cfg.WindowTimeout)
	defer cancel()
	at := s.now().Add(-key.offset)
	obs, n, err := s.read(ctx, b, key.window, dur, at)
	source.BudgetOf(ctx).Refund(charged - n)
	nodes := make(map[string][]byte, len(obs))
	var size int64
	for _, o := range obs {
		if o.Metrics == nil || err != nil {
			continue
		}
		raw, merr := proto.Marshal(o.Metrics)
		if merr != nil {
			err = fmt.Errorf("window of %q: %w", o.Node.ID, merr)
			break
		}
		nodes[o.Node.ID] = raw
		size += int64(len(raw) + len(o.Node.ID))
	}
	s.log.Debug("on-demand window read", "window", key.window, "offset", key.offset, "nodes", len(nodes), "queries", n, "bytes", size, "err", err)

	ws := s.windows
	ws.mu.Lock()
	set.nodes, set.at, set.err, set.size = nodes, at, err, size
	if err != nil {
		delete(ws.sets, key)
	} else {
		set.expires = s.now().Add(source.Reuse(dur))
		ws.size += size
		ws.evict(set)
	}
	ws.mu.Unlock()
	close(set.done)
}

// sweep forgets the read sets that expired by now. Call with mu held.
func (ws *windowSets) sweep(now time.Time) {
	for k, set := range ws.sets {
		if set.read() && !now.Before(set.expires) {
			ws.drop(k, set)
		}
	}
}

// evict forgets read sets, those expiring first first, until the rest fit
// in max bytes; keep goes last. Its waiters have it already. Call with mu
// held.
func (ws *windowSets) evict(keep *windowSet) {
	for ws.size > ws.max {
		var (
			victim    *windowSet
			victimKey setKey
		)
		for k, set := range ws.sets {
			if set == keep || !set.read() {
				continue
			}
			if victim == nil || set.expires.Before(victim.expires) {
				victim, victimKey = set, k
			}
		}
		if victim == nil {
			for k, set := range ws.sets {
				if set == keep {
					victim, victimKey = set, k
				}
			}
		}
		if victim == nil {
			return
		}
		ws.drop(victimKey, victim)
	}
}

// drop forgets the read set of k. Call with mu held.
func (ws *windowSets) drop(k setKey, set *windowSet) {
	delete(ws.sets, k)
	ws.size -= set.size
}

// planned is the most queries a read with b sends: every engine's identity
// query and data queries (a read sends the data queries of the engines it
// found nodes of), and the role query.
func (s *Source) planned(b builder) int {
	n := 0
	for _, e := range engine.Engines() {
		m, ok := engine.Lookup(e)
		if !ok {
			continue
		}
		if _, err := b.identity(m); err == nil {
			n++
		}
		if qs, err := b.data(m); err == nil {
			n += len(qs)
		}
	}
	if _, err := b.role(); err == nil {
		n++
	}
	return n
}

// onDemandKey marks the context of an on-demand read: its queries take
// on-demand slots.
type onDemandKey struct{}

// limiter bounds the queries in flight: all of them, and among them those
// of on-demand reads, so that these never hold the slots refreshes have of
// their own. Refreshes may use the on-demand slots left idle.
type limiter struct {
	all, onDemand chan struct{}
}

func newLimiter(all, onDemand int) *limiter {
	return &limiter{all: make(chan struct{}, all), onDemand: make(chan struct{}, onDemand)}
}

// acquire waits for a slot for a query of ctx; release gives it back.
func (l *limiter) acquire(ctx context.Context) (release func(), err error) {
	onDemand := ctx.Value(onDemandKey{}) != nil
	if onDemand {
		select {
		case l.onDemand <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for one of %d on-demand query slots: %w", cap(l.onDemand), ctx.Err())
		}
	}
	select {
	case l.all <- struct{}{}:
	case <-ctx.Done():
		if onDemand {
			<-l.onDemand
		}
		return nil, fmt.Errorf("waiting for one of %d query slots: %w", cap(l.all), ctx.Err())
	}
	return func() {
		<-l.all
		if onDemand {
			<-l.onDemand
		}
	}, nil
}
