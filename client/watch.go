package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Selector chooses the nodes a Watch follows; empty fields select every
// node. It is StreamHealthRequest without the resume token, which Watch
// manages.
type Selector struct {
	// Nodes are node ids.
	Nodes []string
	// Model selects nodes serving it.
	Model string
	// Labels selects nodes carrying every one of these fleet-file labels.
	Labels map[string]string
	// MinScoreChange: a load-score move alone is sent once the score has
	// moved this much (0: every move the service publishes, 0.05 or more).
	MinScoreChange float64
	// Heartbeat is the heartbeat interval to ask for, 5s to 5m (0: the
	// service's default, 15s).
	Heartbeat time.Duration
}

// DefaultHeartbeat is the service's heartbeat interval when a Selector
// leaves it 0.
const DefaultHeartbeat = 15 * time.Second

// Watch backoff defaults: the first retry waits up to 100ms, each further
// one up to twice as long, up to 10s.
const (
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffMax  = 10 * time.Second
)

type watchOptions struct {
	base, max  time.Duration
	staleAfter time.Duration
	policy     FailPolicy
	epsilon    float64
	clock      Clock
	onEvent    func(*llmdiagv1.StreamHealthResponse)
	onRetry    func(err error, wait time.Duration)
}

// WatchOption configures a Watch.
type WatchOption func(*watchOptions)

// WithBackoff bounds the reconnection backoff: the n-th consecutive retry
// waits a uniformly random time in [0, min(max, base·2ⁿ⁻¹)) ("full
// jitter", so a fleet of routers does not reconnect in lockstep after an
// outage). Defaults DefaultBackoffBase and DefaultBackoffMax. A stream that
// delivered a message resets the sequence.
func WithBackoff(base, max time.Duration) WatchOption {
	return func(o *watchOptions) { o.base, o.max = base, max }
}

// WithStaleAfter sets how long the view may go without a message
// (heartbeats included) before its lookups follow the FailPolicy; default
// three heartbeat intervals.
func WithStaleAfter(d time.Duration) WatchOption {
	return func(o *watchOptions) { o.staleAfter = d }
}

// WithFailPolicy sets what lookups answer when the view is stale or a node
// is unknown; default FailOpen.
func WithFailPolicy(p FailPolicy) WatchOption { return func(o *watchOptions) { o.policy = p } }

// WithTieEpsilon sets how close to the lowest score a candidate's must be
// for Pick to count it an equal (see Pick); default the larger of 0.05 and
// the selector's MinScoreChange. 0 makes Pick strict, ties only among
// exactly equal scores.
func WithTieEpsilon(eps float64) WatchOption { return func(o *watchOptions) { o.epsilon = eps } }

// Clock is the time source staleness is measured by.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, as time.AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer a Clock made; *time.Timer is one.
type Timer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time                            { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// WithWatchClock sets the clock staleness is measured by (default the
// system clock).
func WithWatchClock(c Clock) WatchOption { return func(o *watchOptions) { o.clock = c } }

// WithEventHook calls fn with every message of the stream, in order, after
// the view has applied it (so View lookups inside fn see it; at SYNCED the
// new state is in place). fn runs on the watch's goroutine: a slow fn
// delays the view.
func WithEventHook(fn func(*llmdiagv1.StreamHealthResponse)) WatchOption {
	return func(o *watchOptions) { o.onEvent = fn }
}

// WithRetryHook calls fn when a stream has ended and the watch is about to
// wait before reconnecting; err is nil when the service closed the stream
// cleanly (it does on shutdown, so clients reconnect elsewhere).
func WithRetryHook(fn func(err error, wait time.Duration)) WatchOption {
	return func(o *watchOptions) { o.onRetry = fn }
}

// Watch starts following the health of the nodes sel selects and returns
// the View it keeps up to date, at once: its lookups follow the FailPolicy
// until the first complete state has arrived (Synced).
//
// The stream starts with the current state of every selected node, then a
// SYNCED marker, then changes and heartbeats. When it breaks, Watch
// reconnects with exponential backoff and full jitter (WithBackoff) and
// resumes after the last event received; if the service no longer holds
// that position it sends the whole state again, which the view collects
// aside and puts in place at SYNCED, in one atomic step, so readers never
// see a half-built view. It stops when ctx ends, or when the service
// refuses the selector for good (Done, Err).
func (c *Client) Watch(ctx context.Context, sel Selector, opts ...WatchOption) *View {
	o := watchOptions{base: DefaultBackoffBase, max: DefaultBackoffMax, epsilon: -1, clock: systemClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	hb := sel.Heartbeat
	if hb <= 0 {
		hb = DefaultHeartbeat
	}
	if o.staleAfter <= 0 {
		o.staleAfter = 3 * hb
	}
	if o.epsilon < 0 {
		o.epsilon = max(0.05, sel.MinScoreChange)
	}
	o.base = max(o.base, time.Millisecond)
	o.max = max(o.max, o.base)
	req := &llmdiagv1.StreamHealthRequest{
		Nodes:          sel.Nodes,
		Model:          sel.Model,
		Labels:         sel.Labels,
		MinScoreChange: sel.MinScoreChange,
	}
	if sel.Heartbeat > 0 {
		req.HeartbeatInterval = durationpb.New(sel.Heartbeat)
	}
	v := &View{
		cl:     c,
		sel:    sel,
		opts:   o,
		req:    req,
		epoch:  o.clock.Now(),
		synced: make(chan struct{}),
		done:   make(chan struct{}),
	}
	v.snap.Store(&snapshot{nodes: map[string]*slot{}})
	go v.run(ctx)
	return v
}

// permanent reports whether retrying cannot help: the request or the
// credentials are wrong, or the service has no such method.
func permanent(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeUnauthenticated, connect.CodePermissionDenied, connect.CodeUnimplemented:
		return true
	}
	return false
}

// errStreamClosed is the LastError of a stream the service ended cleanly.
var errStreamClosed = errors.New("service closed the stream")

func (v *View) run(ctx context.Context) {
	defer close(v.done)
	w := &watcher{v: v}
	attempt := 0
	for {
		got, err := w.stream(ctx)
		v.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		v.mu.Lock()
		v.lastErr = err
		if err == nil {
			v.lastErr = errStreamClosed
		}
		if permanent(err) {
			v.err = err
		}
		v.mu.Unlock()
		if permanent(err) {
			return
		}
		if got {
			attempt = 0
		}
		wait := v.backoff(attempt)
		attempt++
		if v.opts.onRetry != nil {
			v.opts.onRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		v.mu.Lock()
		v.reconnects++
		v.mu.Unlock()
	}
}

// backoff is the wait before retry number attempt+1: full jitter over an
// exponentially growing, capped bound.
func (v *View) backoff(attempt int) time.Duration {
	bound := v.opts.max
	if attempt < 32 {
		if b := v.opts.base << attempt; b > 0 && b < bound {
			bound = b
		}
	}
	return rand.N(bound)
}

// watcher is the state of the watch goroutine, which alone writes the view.
type watcher struct {
	v     *View
	token string
	// building collects a resync's INITIAL states until SYNCED; nil when
	// no resync is under way.
	building map[string]*NodeState
}

// stream runs one stream to its end and reports whether it delivered any
// message.
func (w *watcher) stream(ctx context.Context) (bool, error) {
	w.building = nil // a resync cut short starts over on the next stream
	req := w.v.req
	req.ResumeToken = w.token
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A stream that stays open but silent (a half-open connection, a stuck
	// proxy) is abandoned once the view goes stale, and reconnected.
	stale := w.v.opts.staleAfter
	idle := time.AfterFunc(stale, func() { cancel(fmt.Errorf("%w for %s", errSilent, stale)) })
	defer idle.Stop()
	s, err := w.v.cl.StreamHealth(ctx, connect.NewRequest(req))
	if err != nil {
		return false, err
	}
	defer s.Close()
	got := false
	for s.Receive() {
		idle.Reset(stale)
		got = true
		w.v.connected.Store(true)
		w.apply(s.Msg())
	}
	if cause := context.Cause(ctx); errors.Is(cause, errSilent) {
		return got, cause
	}
	return got, s.Err()
}

// errSilent ends a stream that has sent nothing, not even a heartbeat.
var errSilent = errors.New("no message from the service")

// apply folds one message into the view.
func (w *watcher) apply(ev *llmdiagv1.StreamHealthResponse) {
	v := w.v
	now := v.touch()
	switch ev.GetKind() {
	case llmdiagv1.EventKind_EVENT_KIND_INITIAL:
		// The token is kept only from SYNCED on: a stream that breaks in
		// the middle of a resync must resync again, not resume after it.
		if w.building == nil {
			w.building = map[string]*NodeState{}
		}
		w.build(ev.GetHealth(), now)
	case llmdiagv1.EventKind_EVENT_KIND_SYNCED:
		w.token = ev.GetResumeToken()
		next := &snapshot{nodes: make(map[string]*slot, len(w.building)), synced: true}
		for id, st := range w.building {
			sl := &slot{}
			sl.set(st)
			next.nodes[id] = sl
		}
		w.building = nil
		v.snap.Store(next)
		v.syncOnce.Do(func() { close(v.synced) })
	case llmdiagv1.EventKind_EVENT_KIND_CHANGE:
		if w.building == nil {
			w.token = ev.GetResumeToken()
		}
		h := ev.GetHealth()
		if h == nil {
			break
		}
		if w.building != nil {
			w.build(h, now)
			break
		}
		w.change(h, now)
	case llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT:
		if w.building == nil && ev.GetResumeToken() != "" {
			w.token = ev.GetResumeToken()
		}
	}
	if v.opts.onEvent != nil {
		v.opts.onEvent(ev)
	}
}

// build folds a state into the resync under way: a node that left the
// fleet (removed) leaves it.
func (w *watcher) build(h *llmdiagv1.NodeHealth, now time.Time) {
	switch {
	case h.GetRemoved():
		delete(w.building, h.GetNode())
	case w.v.sel.matches(h):
		w.building[h.GetNode()] = stateOf(h, now)
	}
}

// change applies a CHANGE to the published snapshot: in place for a node
// it holds, by a new snapshot when a node joins or leaves the selection or
// the fleet (removed).
func (w *watcher) change(h *llmdiagv1.NodeHealth, now time.Time) {
	cur := w.v.snap.Load()
	id := h.GetNode()
	sl := cur.slot(id)
	match := w.v.sel.matches(h) && !h.GetRemoved()
	switch {
	case sl != nil && match:
		sl.set(stateOf(h, now))
	case sl == nil && match:
		sl = &slot{}
		sl.set(stateOf(h, now))
		// The joined map is copied, up to about √n of them; past that
		// both are merged into a new nodes map.
		next := &snapshot{nodes: cur.nodes, joined: maps.Clone(cur.joined), synced: cur.synced}
		if next.joined == nil {
			next.joined = map[string]*slot{}
		}
		next.joined[id] = sl
		if len(next.joined)*len(next.joined) > max(len(next.nodes), maxJoinedFloor*maxJoinedFloor) {
			next = &snapshot{nodes: cur.merged(), synced: cur.synced}
			next.nodes[id] = sl
		}
		w.v.snap.Store(next)
	case sl != nil && !match: // its labels no longer match, or it left
		next := &snapshot{nodes: cur.merged(), synced: cur.synced}
		delete(next.nodes, id)
		w.v.snap.Store(next)
	}
}

// maxJoinedFloor is the least number of joined nodes a snapshot holds
// apart before they are merged (snapshot.joined).
const maxJoinedFloor = 64

// matches re-applies the selector on the client: the service selects too,
// this only guards the view against a service that ignores a field.
func (s Selector) matches(h *llmdiagv1.NodeHealth) bool {
	if h == nil || h.GetNode() == "" {
		return false
	}
	if s.Model != "" && h.GetModel() != s.Model {
		return false
	}
	if len(s.Nodes) > 0 {
		found := false
		for _, n := range s.Nodes {
			if n == h.GetNode() {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for k, want := range s.Labels {
		if got, ok := h.GetLabels()[k]; !ok || got != want {
			return false
		}
	}
	return true
}
