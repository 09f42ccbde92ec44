package fanout

import (
	"context"
	"math"
	"sync"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// SubOptions are one subscriber's choices.
type SubOptions struct {
	// Match selects the nodes the subscriber gets; nil selects all.
	Match func(*llmdiagv1.NodeHealth) bool
	// MinScoreChange: a load-score-only change is handed out only once the
	// score has moved this much since the score last handed out (or marked
	// sent) for that node. Status, cause and routability changes always are.
	MinScoreChange float64
	// Heartbeat is the idle time after which Next hands out a heartbeat
	// (default 15s).
	Heartbeat time.Duration
	// Queue is how many pending states are kept one by one, in order,
	// before a further change of a node already pending replaces that
	// node's newest pending state instead (default DefaultQueue; negative
	// for none: pure coalescing). A subscriber that keeps up thus sees every
	// change, even of a burst of one node; one that does not holds at most
	// Queue states plus one per selected node.
	Queue int
}

// DefaultQueue is SubOptions.Queue's default.
const DefaultQueue = 64

// Kind says what a Message is.
type Kind int

const (
	// Change carries a node's latest state.
	Change Kind = iota + 1
	// Heartbeat carries only a token: nothing changed for the subscriber.
	Heartbeat
)

// Message is what a subscriber sends next.
type Message struct {
	Kind   Kind
	Health *llmdiagv1.NodeHealth // for Change; shared, do not modify
	// Token is the resume token: see the package documentation.
	Token string
}

// entry is one pending state of a node, and the token of the newest event
// folded into it ("" for a state folded in by a hub resync, which has no
// position of its own).
type entry struct {
	node       string
	health     *llmdiagv1.NodeHealth
	token      string
	prev, next *entry
}

// Sub is one subscriber: a coalescing buffer of pending states in feed
// order, at most Queue of them plus one per selected node (see SubOptions).
// Next is to be called from one goroutine.
type Sub struct {
	hub      *Hub
	match    func(*llmdiagv1.NodeHealth) bool
	minScore float64
	hb       time.Duration
	queue    int
	ready    chan struct{} // capacity 1: something became pending

	// Guarded by hub.mu.
	idx int

	// Guarded by mu.
	mu         sync.Mutex
	newest     map[string]*entry // each pending node's newest state
	n          int               // pending states
	head, tail *entry
	upto       string // token of the newest event offered, matched or not
	peak       int

	// Owned by the goroutine calling Next.
	sent      sentLog
	lastToken string // token of the last message handed out
	lastSend  time.Time
	// timer wakes the reader when a heartbeat is due; armed only while
	// the reader waits, so it holds no reference to the Sub otherwise.
	timer Timer
}

func (h *Hub) newSub(o SubOptions) *Sub {
	if o.Match == nil {
		o.Match = func(*llmdiagv1.NodeHealth) bool { return true }
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	switch {
	case o.Queue == 0:
		o.Queue = DefaultQueue
	case o.Queue < 0:
		o.Queue = 0
	}
	return &Sub{
		hub: h, match: o.Match, minScore: o.MinScoreChange, hb: o.Heartbeat, queue: o.Queue,
		ready: make(chan struct{}, 1), idx: -1, lastSend: h.opts.Clock.Now(),
	}
}

// offerLocked folds one event into the buffer; s.mu is held. It reports
// whether the buffer was empty (the reader must be woken) and whether the
// event replaced a pending state.
func (s *Sub) offerLocked(h *llmdiagv1.NodeHealth, token string) (wake, coalesced bool) {
	if token != "" {
		s.upto = token
	}
	if !s.match(h) {
		return false, false
	}
	wake = s.head == nil
	node := h.GetNode()
	e := s.newest[node]
	if e != nil && s.n >= s.queue {
		// Full: the node's newest pending state becomes this one, and moves
		// to the back, where its token belongs.
		s.unlink(e)
		coalesced = true
	} else {
		if s.newest == nil {
			s.newest = map[string]*entry{}
		}
		e = &entry{node: node}
		s.newest[node] = e
		s.n++
		s.peak = max(s.peak, s.n)
	}
	e.health, e.token = h, token
	e.prev, e.next = s.tail, nil
	if s.tail != nil {
		s.tail.next = e
	} else {
		s.head = e
	}
	s.tail = e
	return wake, coalesced
}

func (s *Sub) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (s *Sub) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// MarkSent records h as handed out to the subscriber by other means (the
// initial state), so that Next does not hand out the same state again and
// measures score moves from it.
func (s *Sub) MarkSent(h *llmdiagv1.NodeHealth) {
	if h.GetRemoved() {
		s.sent.delete(h.GetNode())
		return
	}
	s.sent.put(h.GetNode(), sentOf(h))
}

// changed reports whether h is news to the subscriber: a removal always is
// (the subscriber may know the node from before it resumed); a state is
// when it was observed after the state the subscriber has of the node (a
// subscriber that started from a listing newer than the hub's position
// would otherwise be handed the older events in between, going back in
// time) and differs from it.
func (s *Sub) changed(h *llmdiagv1.NodeHealth) bool {
	if h.GetRemoved() {
		return true
	}
	p, ok := s.sent.get(h.GetNode())
	if ok && p.hasTime && h.GetObservedAt() != nil && !p.observedAfter(h.GetObservedAt().AsTime()) {
		return false
	}
	if !ok || p.status != h.GetStatus() || p.cause != h.GetRootCause() || p.routable != h.GetRoutable() {
		return true
	}
	d := math.Abs(h.GetLoadScore() - p.score)
	return d > 0 && d >= s.minScore
}

// take hands out the front of the buffer, dropping states that are not news;
// when nothing is pending it returns false and the token of everything
// offered so far, under the same lock (so no event slips between).
func (s *Sub) take() (Message, bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.head; e != nil; e = s.head {
		s.unlink(e)
		s.n--
		if s.newest[e.node] == e {
			delete(s.newest, e.node)
		}
		if !s.changed(e.health) {
			continue
		}
		s.MarkSent(e.health)
		tok := e.token
		if tok == "" {
			tok = s.lastToken
		}
		return Message{Kind: Change, Health: e.health, Token: tok}, true, ""
	}
	return Message{}, false, s.upto
}

// Next returns the subscriber's next message: the next pending change, or a
// heartbeat once nothing has been handed out for the heartbeat interval. It
// returns ctx's error when ctx ends and ErrClosed once the hub has stopped.
func (s *Sub) Next(ctx context.Context) (Message, error) {
	for {
		if s.stopped() {
			return Message{}, ErrClosed
		}
		m, ok, upto := s.take()
		if !ok {
			idle := s.hub.opts.Clock.Now().Sub(s.lastSend)
			if idle < s.hb {
				if err := s.wait(ctx, s.hb-idle); err != nil {
					return Message{}, err
				}
				continue
			}
			m = Message{Kind: Heartbeat, Token: upto}
		}
		return s.handOut(m), nil
	}
}

// TryNext is Next without waiting: it hands out the next pending state if
// there is one now, and never a heartbeat. A sender uses it to learn
// whether another message follows the one it is sending (and so may be
// written with it).
func (s *Sub) TryNext() (Message, bool) {
	if s.stopped() {
		return Message{}, false
	}
	m, ok, _ := s.take()
	if !ok {
		return Message{}, false
	}
	return s.handOut(m), true
}

// stopped reports whether the hub has stopped.
func (s *Sub) stopped() bool {
	select {
	case <-s.hub.done:
		return true
	default:
		return false
	}
}

// handOut records m as handed out (the heartbeat's idle time and the
// resume position start from it) and returns it.
func (s *Sub) handOut(m Message) Message {
	s.lastSend = s.hub.opts.Clock.Now()
	s.lastToken = m.Token
	return m
}

// wait returns when something may have changed: a state became pending,
// the heartbeat interval d has passed, or the hub stopped (which wakes
// every subscriber), or with ctx's error when ctx ends. The heartbeat timer
// is a function that wakes the reader, not a channel: a blocked reader
// waits on two channels, not four.
func (s *Sub) wait(ctx context.Context, d time.Duration) error {
	if s.timer == nil {
		s.timer = s.hub.opts.Clock.AfterFunc(d, s.wake)
	} else {
		s.timer.Reset(d)
	}
	defer s.timer.Stop()
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pending is the number of states not yet handed out; peak the most there
// have been. Both are at most Queue plus the number of selected nodes.
func (s *Sub) Pending() (pending, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.peak
}

// Close detaches the subscriber from the hub.
func (s *Sub) Close() { s.hub.detach(s) }
