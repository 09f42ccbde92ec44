package combine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
)

// Options tune a Combined.
type Options struct {
	// Wait is how long Refresh waits for History once Gauges has
	// answered; past it, the fresh gauges are joined to History's last
	// answer (or to none) and History's refresh goes on in the background.
	// 0 waits until History answers or the refresh's ctx is done.
	Wait time.Duration
	// Timeout bounds a History refresh whose ctx has no deadline (its
	// deadline bounds it otherwise). Default DefaultTimeout.
	Timeout time.Duration
	// Now is the clock the warnings read; default time.Now.
	Now func() time.Time
}

// DefaultTimeout bounds a History refresh started without a deadline.
const DefaultTimeout = time.Minute

// Combined reads history from History and fresh gauges from Gauges. Its
// methods are safe for concurrent use; Close stops it.
type Combined struct {
	history, gauges source.Source
	opts            Options

	mu     sync.Mutex
	flight *flight // the History refresh in flight; nil when none
	last   *answer // History's last answer; nil before the first
	closed bool
	stop   context.CancelFunc // cancels stopped
	// stopped is done when Close was called: it cancels a History
	// refresh in flight.
	stopped context.Context
	wg      sync.WaitGroup // History refreshes in flight
}

// answer is one History refresh's result, and when it was asked for.
type answer struct {
	obs    []source.Observation
	err    error
	window string
	at     time.Time
}

// flight is a History refresh in flight: ans is set when done is closed.
type flight struct {
	done    chan struct{}
	started time.Time
	window  string
	ans     answer
}

// New joins history (Prometheus) and gauges (the direct scrape).
func New(history, gauges source.Source, opts Options) *Combined {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	stopped, stop := context.WithCancel(context.Background())
	return &Combined{history: history, gauges: gauges, opts: opts, stopped: stopped, stop: stop}
}

// Close cancels a History refresh in flight and waits for it to end.
// Refreshes after Close find History unavailable.
func (c *Combined) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
}

// Refresh refreshes both sides concurrently and joins them by node id. One
// side failing as a whole leaves the other's nodes, with the failure in
// their warnings; only both failing fails the refresh.
//
// History is waited for at most Wait after Gauges answered (or until ctx
// is done): past it, the gauges are joined to History's last answer, each
// node it covers warned that the history source is slow, or, with no
// last answer, taken as from History failing. At most one History refresh
// is in flight: a Refresh that finds one joins it, and its answer serves
// the next Refresh when this one did not wait for it.
func (c *Combined) Refresh(ctx context.Context, window string) ([]source.Observation, error) {
	f := c.startHistory(ctx, window)
	gauges, gerr := c.gauges.Refresh(ctx, window)
	var expired <-chan time.Time
	if c.opts.Wait > 0 {
		t := time.NewTimer(c.opts.Wait)
		defer t.Stop()
		expired = t.C
	}
	answered := false
	select {
	case <-f.done:
		answered = true
	default:
		select {
		case <-f.done:
			answered = true
		case <-expired:
		case <-ctx.Done():
		}
	}
	if answered && f.ans.window == window {
		return merge(f.ans.obs, gauges, f.ans.err, gerr, "")
	}
	hist, herr, note := c.lastAnswer(f, window)
	return merge(hist, gauges, herr, gerr, note)
}

// startHistory returns the History refresh in flight, starting one when
// none is. Its ctx keeps ctx's values and deadline (or Timeout) but not
// its cancellation, so that it can answer the next Refresh, and Close
// cancels it.
func (c *Combined) startHistory(ctx context.Context, window string) *flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flight != nil {
		return c.flight
	}
	f := &flight{done: make(chan struct{}), started: c.opts.Now(), window: window}
	if c.closed {
		f.ans = answer{err: errors.New("closed"), window: window, at: f.started}
		close(f.done)
		return f
	}
	hctx := context.WithoutCancel(ctx)
	var cancel context.CancelFunc
	if d, ok := ctx.Deadline(); ok {
		hctx, cancel = context.WithDeadline(hctx, d)
	} else {
		hctx, cancel = context.WithTimeout(hctx, c.opts.Timeout)
	}
	unlink := context.AfterFunc(c.stopped, cancel)
	c.flight = f
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		obs, err := c.history.Refresh(hctx, window)
		unlink()
		cancel()
		c.mu.Lock()
		f.ans = answer{obs: obs, err: err, window: window, at: f.started}
		c.last, c.flight = &f.ans, nil
		c.mu.Unlock()
		close(f.done)
	}()
	return f
}

// lastAnswer is what stands for History while f has not answered: its
// last answer for window, with the note each node it covers takes, or an
// error when there is none.
func (c *Combined) lastAnswer(f *flight, window string) ([]source.Observation, error, string) {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	now := c.opts.Now()
	slow := now.Sub(f.started).Round(time.Millisecond)
	if last == nil || last.window != window {
		return nil, fmt.Errorf("no answer after %s", slow), ""
	}
	age := now.Sub(last.at).Round(time.Millisecond)
	if last.err != nil {
		return nil, fmt.Errorf("no answer after %s; its last answer, %s ago: %w", slow, age, last.err), ""
	}
	return last.obs, nil, fmt.Sprintf("history source slow (no answer after %s), rates and percentiles from its last answer, read at %s (%s ago)",
		slow, last.at.UTC().Format(time.RFC3339), age)
}

// merge joins hist and gauges by node id; note, when set, is added to
// each node whose history comes from hist. Neither side's observations
// are written to: History's last answer is read again.
func merge(hist, gauges []source.Observation, herr, gerr error, note string) ([]source.Observation, error) {
	if herr != nil && gerr != nil {
		return nil, fmt.Errorf("both sources failed: %w; %w", herr, gerr)
	}
	scraped := make(map[string]source.Observation, len(gauges))
	for _, o := range gauges {
		if o.Metrics != nil {
			scraped[o.Node.ID] = o
		}
	}
	out := make([]source.Observation, 0, len(hist)+len(gauges))
	for _, o := range hist {
		g, ok := scraped[o.Node.ID]
		delete(scraped, o.Node.ID)
		switch {
		case ok && o.Metrics == nil: // the history source has nothing yet
			o = g
		case ok:
			o = join(o, g)
			o.Metrics = warn(o.Metrics, note)
		case o.Metrics != nil:
			if gerr != nil {
				o.Metrics = warn(o.Metrics, fmt.Sprintf("direct scrapes unavailable, gauges from the history source: %v", gerr))
			}
			o.Metrics = warn(o.Metrics, note)
		}
		out = append(out, o)
	}
	for _, g := range scraped {
		if herr != nil {
			g.Metrics = warn(g.Metrics, fmt.Sprintf("history source unavailable, rates and percentiles from direct scrapes: %v", herr))
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node.ID < out[j].Node.ID })
	return out, nil
}

// warn is m with msg added to its warnings, a copy when msg is set.
func warn(m *llmdiagv1.NodeMetrics, msg string) *llmdiagv1.NodeMetrics {
	if msg == "" {
		return m
	}
	m = proto.Clone(m).(*llmdiagv1.NodeMetrics)
	m.Warnings = append(m.Warnings, msg)
	return m
}

// Window reads on-demand windows from History, and from Gauges when History
// cannot answer (it does not know the node, or is down). A request History
// refuses as over its budget is refused, not answered from the gauges.
func (c *Combined) Window(ctx context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	m, err := c.history.Window(ctx, node, window, offset)
	if err == nil {
		return m, nil
	}
	if errors.Is(err, source.ErrOverBudget) || ctx.Err() != nil {
		return nil, err
	}
	if g, gerr := c.gauges.Window(ctx, node, window, offset); gerr == nil {
		g.Warnings = append(g.Warnings, fmt.Sprintf("history source: %v", err))
		return g, nil
	}
	return nil, err
}

// join takes h's history and g's gauges when g reached the node.
func join(h, g source.Observation) source.Observation {
	gm := g.Metrics
	if !gm.GetUp() || len(gm.GetErrors()) > 0 {
		h.Metrics = warn(h.Metrics, "direct scrape failed, gauges from the history source: "+fmt.Sprint(gm.GetErrors()))
		return h
	}
	m := proto.Clone(h.Metrics).(*llmdiagv1.NodeMetrics)
	m.Queue, m.Running, m.QueueRunningRatio = gm.Queue, gm.Running, gm.QueueRunningRatio
	if gm.KvPressure != nil {
		m.KvPressure = gm.KvPressure
	}
	if gm.KvCapacityTokens != nil {
		m.KvCapacityTokens = gm.KvCapacityTokens
	}
	metrics.SetPerRequestDecode(m) // with the fresher running
	if gm.GetObservedAt().AsTime().After(m.GetObservedAt().AsTime()) {
		m.ObservedAt, m.Staleness, m.Stale = gm.ObservedAt, gm.Staleness, gm.Stale
	}
	h.Metrics = m
	if h.Node.URL == "" {
		h.Node.URL = g.Node.URL
	}
	if h.Node.Profile == (fleet.Profile{}) {
		h.Node.Profile = g.Node.Profile
	}
	return h
}

var _ source.Source = (*Combined)(nil)
