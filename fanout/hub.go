package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
)

// Feed is the part of store.Store the hub reads.
type Feed interface {
	LastToken(ctx context.Context) (string, error)
	Events(ctx context.Context, token string, max int, wait time.Duration) ([]store.Event, error)
}

var _ Feed = store.Store(nil)

// ErrClosed is returned once the hub has stopped.
var ErrClosed = errors.New("fanout: hub stopped")

// Options configures a Hub. Zero values take the defaults.
type Options struct {
	// Log receives feed errors (at debug: an outage is reported elsewhere).
	Log *slog.Logger
	// Clock times heartbeats (default RealClock). Backoff uses real time.
	Clock Clock
	// Current returns the current state of every node. When the hub's own
	// position has expired (it fell further behind than the feed keeps), it
	// folds this state into every subscriber, which may have missed events.
	// Nil folds nothing.
	Current func(ctx context.Context) ([]*llmdiagv1.NodeHealth, error)
	// Batch is the most events read at once (default 256).
	Batch int
	// Wait is how long one read waits for an event (default 5s).
	Wait time.Duration
	// Ring is how many recent events the hub keeps so that resuming
	// subscribers need not read the feed (default 4096).
	Ring int
	// MinBackoff and MaxBackoff bound the wait between failed reads
	// (defaults 50ms and 1s).
	MinBackoff, MaxBackoff time.Duration
}

// catchUpWait bounds one catch-up read of a resuming subscriber that is
// ahead of the hub.
const catchUpWait = 50 * time.Millisecond

type ringEvent struct {
	token  string
	health *llmdiagv1.NodeHealth
}

// Hub reads the health feed once and offers every event to every Sub.
type Hub struct {
	feed Feed
	opts Options

	ready     chan struct{} // closed after the first attempt at a position
	readyOnce sync.Once
	done      chan struct{} // closed when Run returns

	mu                 sync.Mutex
	pos                string // token of the newest event read
	havePos            bool
	lastErr            error
	ring               []ringEvent // circular; ringLen valid entries from ringStart
	ringStart, ringLen int
	latest             map[string]*llmdiagv1.NodeHealth // newest state read per node
	subs               []*Sub
	closed             bool

	events, coalesced, resyncs atomic.Uint64
}

// New returns a hub reading feed; call Run.
func New(feed Feed, opts Options) *Hub {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	if opts.Wait <= 0 {
		opts.Wait = 5 * time.Second
	}
	if opts.Ring <= 0 {
		opts.Ring = 4096
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 50 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(time.Second, opts.MinBackoff)
	}
	return &Hub{
		feed:   feed,
		opts:   opts,
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
		ring:   make([]ringEvent, opts.Ring),
		latest: map[string]*llmdiagv1.NodeHealth{},
	}
}

// Done is closed once the hub has stopped.
func (h *Hub) Done() <-chan struct{} { return h.done }

// Stats are the hub's counters.
type Stats struct {
	Subscribers int
	// Events is the number of feed events read.
	Events uint64
	// Coalesced counts events folded into a state a subscriber had not yet
	// been sent.
	Coalesced uint64
	// Resyncs counts expiries of the hub's own position.
	Resyncs uint64
}

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	n := len(h.subs)
	h.mu.Unlock()
	return Stats{Subscribers: n, Events: h.events.Load(), Coalesced: h.coalesced.Load(), Resyncs: h.resyncs.Load()}
}

// Run reads the feed until ctx ends, then ends every subscription.
func (h *Hub) Run(ctx context.Context) {
	defer h.stop()
	backoff := h.opts.MinBackoff
	fail := func(what string, err error) bool {
		h.opts.Log.Debug("fanout: "+what, "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, h.opts.MaxBackoff)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		h.mu.Lock()
		pos, have := h.pos, h.havePos
		h.mu.Unlock()
		if !have {
			tok, err := h.feed.LastToken(ctx)
			h.mu.Lock()
			if err == nil {
				h.pos, h.havePos = tok, true
			}
			h.lastErr = err
			h.mu.Unlock()
			h.readyOnce.Do(func() { close(h.ready) })
			if err != nil && !fail("feed position unavailable", err) {
				return
			}
			backoff = h.opts.MinBackoff
			continue
		}
		evs, err := h.feed.Events(ctx, pos, h.opts.Batch, h.opts.Wait)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, store.ErrTokenExpired):
			if err := h.resync(ctx); err != nil && !fail("resync", err) {
				return
			}
			continue
		case err != nil:
			if !fail("feed unreadable", err) {
				return
			}
			continue
		}
		backoff = h.opts.MinBackoff
		if len(evs) > 0 {
			h.publish(evs)
		}
	}
}

// publish records evs and offers them to every subscriber.
func (h *Hub) publish(evs []store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		h.pushRing(ringEvent{ev.Token, ev.Health})
		h.remember(ev.Health)
		h.pos = ev.Token
	}
	h.events.Add(uint64(len(evs)))
	var folded uint64
	for _, s := range h.subs {
		s.mu.Lock()
		wake := false
		for _, ev := range evs {
			w, c := s.offerLocked(ev.Health, ev.Token)
			wake = wake || w
			if c {
				folded++
			}
		}
		s.mu.Unlock()
		if wake {
			s.wake()
		}
	}
	h.coalesced.Add(folded)
}

// resync moves the hub to the feed's newest position after its own expired,
// and folds the current state of every node into every subscriber: they may
// have missed events. Those states carry no token of their own (see Sub).
func (h *Hub) resync(ctx context.Context) error {
	tok, err := h.feed.LastToken(ctx)
	if err != nil {
		return fmt.Errorf("feed position: %w", err)
	}
	var cur []*llmdiagv1.NodeHealth
	if h.opts.Current != nil {
		if cur, err = h.opts.Current(ctx); err != nil {
			return fmt.Errorf("current state: %w", err)
		}
	}
	h.resyncs.Add(1)
	h.opts.Log.Info("fanout: feed position expired; resynchronised subscribers from the current state", "states", len(cur))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pos, h.havePos = tok, true
	h.ringStart, h.ringLen = 0, 0
	clear(h.ring)
	// Nodes the hub knew that the current state no longer has left the
	// fleet while the hub was behind: they get the removal they missed.
	present := make(map[string]bool, len(cur))
	for _, hh := range cur {
		present[hh.GetNode()] = true
	}
	for id, last := range h.latest {
		if !present[id] {
			cur = append(cur, removal(last))
		}
	}
	for _, hh := range cur {
		h.remember(hh)
	}
	for _, s := range h.subs {
		s.mu.Lock()
		wake := false
		for _, hh := range cur {
			w, _ := s.offerLocked(hh, "")
			wake = wake || w
		}
		s.upto = tok
		s.mu.Unlock()
		if wake {
			s.wake()
		}
	}
	return nil
}

// remember keeps hh as its node's newest state, or forgets the node when
// hh says it left the fleet; h.mu is held.
func (h *Hub) remember(hh *llmdiagv1.NodeHealth) {
	if hh.GetRemoved() {
		delete(h.latest, hh.GetNode())
		return
	}
	h.latest[hh.GetNode()] = hh
}

// removal is the state of a node that left the fleet, made from its last
// known one (its model and labels, for selectors): as refresh.Removed
// publishes it.
func removal(last *llmdiagv1.NodeHealth) *llmdiagv1.NodeHealth {
	r := proto.CloneOf(last)
	r.Status, r.RootCause, r.Routable, r.Removed = llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, false, true
	return r
}

// Nodes is the number of nodes the hub holds a state of: every node the
// feed announced and did not announce the removal of.
func (h *Hub) Nodes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.latest)
}

func (h *Hub) pushRing(e ringEvent) {
	n := len(h.ring)
	if h.ringLen < n {
		h.ring[(h.ringStart+h.ringLen)%n] = e
		h.ringLen++
		return
	}
	h.ring[h.ringStart] = e
	h.ringStart = (h.ringStart + 1) % n
}

func (h *Hub) ringAt(i int) ringEvent { return h.ring[(h.ringStart+i)%len(h.ring)] }

// afterLocked returns the ring index of the first event after token, or
// false when the hub does not know token.
func (h *Hub) afterLocked(token string) (int, bool) {
	if !h.havePos {
		return 0, false
	}
	if token == h.pos {
		return h.ringLen, true
	}
	for i := h.ringLen - 1; i >= 0; i-- {
		if h.ringAt(i).token == token {
			return i + 1, true
		}
	}
	return 0, false
}

func (h *Hub) stop() {
	h.readyOnce.Do(func() { close(h.ready) })
	h.mu.Lock()
	h.closed = true
	subs := h.subs
	for _, s := range subs {
		s.idx = -1
	}
	h.subs = nil
	h.mu.Unlock()
	close(h.done)
	// A waiting reader waits for its Sub's wake, not for done.
	for _, s := range subs {
		s.wake()
	}
}

func (h *Hub) attachLocked(s *Sub) {
	s.idx = len(h.subs)
	h.subs = append(h.subs, s)
}

func (h *Hub) detach(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.idx < 0 || s.idx >= len(h.subs) || h.subs[s.idx] != s {
		return
	}
	last := len(h.subs) - 1
	h.subs[s.idx] = h.subs[last]
	h.subs[s.idx].idx = s.idx
	h.subs[last] = nil
	h.subs = h.subs[:last]
	s.idx = -1
}

// Sync attaches a subscriber at the hub's current position. It returns that
// position's token and the newest state the hub has read of every node the
// subscriber selects: a caller that lists the store after Sync and takes,
// per node, the newer of the two has the state at the position or later,
// and the subscriber hands out every event after the position.
//
// Sync waits for the hub's first position; if the feed did not give one it
// returns that error.
func (h *Hub) Sync(ctx context.Context, o SubOptions) (*Sub, string, []*llmdiagv1.NodeHealth, error) {
	select {
	case <-h.ready:
	case <-ctx.Done():
		return nil, "", nil, ctx.Err()
	}
	s := h.newSub(o)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, "", nil, ErrClosed
	}
	if !h.havePos {
		return nil, "", nil, fmt.Errorf("health feed: %w", h.lastErr)
	}
	var seen []*llmdiagv1.NodeHealth
	for _, hh := range h.latest {
		if s.match(hh) {
			seen = append(seen, hh)
		}
	}
	s.upto, s.lastToken = h.pos, h.pos
	h.attachLocked(s)
	return s, h.pos, seen, nil
}

// Resume attaches a subscriber after token: it hands out every selected
// event that follows token. Events the hub no longer holds are read from the
// feed first (folded into the subscriber like any other). A token the feed
// does not hold gives store.ErrTokenExpired; a feed that does not answer,
// its error.
func (h *Hub) Resume(ctx context.Context, token string, o SubOptions) (*Sub, error) {
	if token == "" {
		return nil, fmt.Errorf("empty token: %w", store.ErrTokenExpired)
	}
	s := h.newSub(o)
	s.upto, s.lastToken = token, token
	cur := token
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, ErrClosed
		}
		if i, ok := h.afterLocked(cur); ok {
			s.mu.Lock()
			for ; i < h.ringLen; i++ {
				e := h.ringAt(i)
				s.offerLocked(e.health, e.token)
			}
			pending := s.head != nil
			s.mu.Unlock()
			h.attachLocked(s)
			h.mu.Unlock()
			if pending {
				s.wake()
			}
			return s, nil
		}
		h.mu.Unlock()
		evs, err := h.feed.Events(ctx, cur, h.opts.Batch, catchUpWait)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		for _, ev := range evs {
			s.offerLocked(ev.Health, ev.Token)
		}
		s.mu.Unlock()
		if len(evs) > 0 {
			cur = evs[len(evs)-1].Token
		}
	}
}
