package sim

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/llmdiag/llmdiag/fleet"
)

var (
	// ErrUnknownNode is returned for a node id not in the fleet.
	ErrUnknownNode = errors.New("unknown node")
	// ErrNodeDown is returned by Metrics for a node that is down.
	ErrNodeDown = errors.New("node is down")
)

// Clock tells wall-clock time; Start maps it to simulated time.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Option configures a Fleet.
type Option func(*Fleet)

// WithClock sets the wall clock Start paces the simulation by (default: the
// system clock).
func WithClock(c Clock) Option { return func(f *Fleet) { f.clock = c } }

// WithLogger sets the logger for listener changes (default: discard).
func WithLogger(l *slog.Logger) Option { return func(f *Fleet) { f.log = l } }

// Fleet is a running simulation of a set of nodes.
type Fleet struct {
	cfg   Config
	clock Clock
	log   *slog.Logger
	nodes []*node
	byID  map[string]*node

	mu  sync.Mutex // simulation state: now and every node's model
	now time.Duration

	smu       sync.Mutex // serving state; taken before mu, never after
	listening bool
	started   bool
	wg        sync.WaitGroup // Serve goroutines

	// injected, when not nil, receives a value each time a completion
	// request joins the simulation (tests wait on it).
	injected chan struct{}
}

// New builds the fleet of cfg at simulated time 0. It binds nothing; see
// Listen and Start.
func New(cfg Config, opts ...Option) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sim config: %w", err)
	}
	f := &Fleet{
		cfg:   cfg,
		clock: wallClock{},
		log:   slog.New(slog.DiscardHandler),
		byID:  make(map[string]*node, len(cfg.Nodes)),
	}
	for _, o := range opts {
		o(f)
	}
	for _, nc := range cfg.Nodes {
		n := newNode(nc, cfg.Seed, cfg.Warmup)
		f.nodes = append(f.nodes, n)
		f.byID[nc.ID] = n
	}
	return f, nil
}

// Config returns the configuration the fleet was built from.
func (f *Fleet) Config() Config { return f.cfg }

// Now is the simulated time elapsed since New.
func (f *Fleet) Now() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Step advances the simulation by d of simulated time, without regard to
// the wall clock. Nodes advance in parallel; the result does not depend on
// how a span of time is cut into steps.
func (f *Fleet) Step(d time.Duration) {
	if d <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now += d
	to := f.now.Seconds()
	var wg sync.WaitGroup
	for _, n := range f.nodes {
		wg.Go(func() { n.advance(to) })
	}
	wg.Wait()
}

// Nodes lists the node ids in configuration order.
func (f *Fleet) Nodes() []string {
	ids := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		ids[i] = n.cfg.ID
	}
	return ids
}

func (f *Fleet) node(id string) (*node, error) {
	n, ok := f.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownNode, id)
	}
	return n, nil
}

// Metrics returns what the node's /metrics would serve now: the exposition
// in Prometheus text format, or the garbage body of its Garbage mode. It
// fails with ErrNodeDown while the node is down.
func (f *Fleet) Metrics(id string) ([]byte, error) {
	n, err := f.node(id)
	if err != nil {
		return nil, err
	}
	if f.downAt(n, f.Now()) {
		return nil, fmt.Errorf("%s: %w", id, ErrNodeDown)
	}
	return n.body()
}

// body renders the node's exposition, garbled if so configured.
func (n *node) body() ([]byte, error) {
	mfs, err := n.reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather %s: %w", n.cfg.ID, err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, fmt.Errorf("encode %s: %w", n.cfg.ID, err)
		}
	}
	return garble(buf.Bytes(), Garbage(n.garbage.Load())), nil
}

// junkBody is what GarbageJunk serves: a proxy's error page.
const junkBody = "<html><head><title>502 Bad Gateway</title></head>\n<body><center><h1>502 Bad Gateway</h1></center></body></html>\n"

// garble applies a Garbage mode to an exposition.
func garble(body []byte, g Garbage) []byte {
	switch g {
	case GarbageJunk:
		return []byte(junkBody)
	case GarbageTruncated:
		// Cut inside the first bucket line, in the middle of its labels,
		// or inside the first labels of a schema without histograms.
		i := bytes.Index(body, []byte("_bucket{"))
		if i >= 0 {
			return body[:min(len(body), i+len("_bucket{")+8)]
		}
		if i = bytes.IndexByte(body, '{'); i >= 0 {
			return body[:min(len(body), i+8)]
		}
		return body[:len(body)/2]
	}
	return body
}

// NodeStats is a node's state summed over its engine cores.
type NodeStats struct {
	// Now is the simulated time of the figures.
	Now time.Duration
	// Waiting and Running are the current queue and batch sizes.
	Waiting, Running int
	// KVUsage is KV blocks in use over capacity, all cores together.
	KVUsage float64
	// PromptTokens and GenerationTokens are the counters' values.
	PromptTokens, GenerationTokens uint64
	// Finished, Aborted and Preemptions count requests completed, abandoned
	// in the queue, and preemptions (retractions for SGLang).
	Finished, Aborted, Preemptions uint64
	// Down reports whether the node's endpoint is down.
	Down bool
}

// Stats returns the node's current state.
func (f *Fleet) Stats(id string) (NodeStats, error) {
	n, err := f.node(id)
	if err != nil {
		return NodeStats{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := NodeStats{
		Now:              f.now,
		PromptTokens:     n.stats.promptTokens,
		GenerationTokens: n.stats.generationTokens,
		Finished:         n.stats.finished,
		Aborted:          n.stats.aborted,
		Preemptions:      n.stats.preemptions,
		Down:             f.downAt(n, f.now),
	}
	var used, capacity int
	for _, c := range n.cores {
		s.Waiting += len(c.waiting)
		s.Running += len(c.running)
		used += c.used
		capacity += c.blocks
	}
	s.KVUsage = float64(used) / float64(capacity)
	return s, nil
}

// downAt reports whether n is down at simulated time now: by SetDown, or
// in a Down window (measured from the end of warm-up).
func (f *Fleet) downAt(n *node, now time.Duration) bool {
	if n.down.Load() {
		return true
	}
	if now < f.cfg.Warmup {
		return false
	}
	for _, w := range n.cfg.Down {
		if w.contains(now - f.cfg.Warmup) {
			return true
		}
	}
	return false
}

// SetDown takes a node down (its listener closes, Metrics fails) or, with
// false, clears a previous SetDown; scheduled Down windows still apply. A
// down node keeps simulating, as a server cut off by the network would, so
// its counters have moved on when it comes back.
func (f *Fleet) SetDown(id string, down bool) error {
	n, err := f.node(id)
	if err != nil {
		return err
	}
	n.down.Store(down)
	f.reconcile()
	return nil
}

// SetGarbage changes what the node's /metrics serves.
func (f *Fleet) SetGarbage(id string, g Garbage) error {
	n, err := f.node(id)
	if err != nil {
		return err
	}
	if g < GarbageNone || g > GarbageJunk {
		return fmt.Errorf("garbage mode %d unknown", g)
	}
	n.garbage.Store(int32(g))
	return nil
}

// FleetFile describes the simulated nodes for `llmdiag serve --fleet`: id,
// /metrics URL, DCGM exporter URL (DCGMPath), model, engine and profile. URLs are known once Listen has
// run (or, with a BasePort, from the start); before that they are empty.
func (f *Fleet) FleetFile() *fleet.File {
	f.smu.Lock()
	defer f.smu.Unlock()
	out := &fleet.File{Nodes: make([]fleet.Node, 0, len(f.nodes))}
	for i, n := range f.nodes {
		addr := n.addr
		if addr == "" && f.cfg.BasePort > 0 {
			addr = net.JoinHostPort(loopback, strconv.Itoa(f.cfg.BasePort+i))
		}
		var url, dcgm string
		if addr != "" {
			url = "http://" + addr + "/metrics"
			dcgm = "http://" + addr + DCGMPath
		}
		profile := n.cfg.Profile
		if n.cfg.KVOffload != "" && !n.cfg.Engine.showsOffload() {
			profile.KVOffload = n.cfg.KVOffload
		}
		out.Nodes = append(out.Nodes, fleet.Node{
			ID:      n.cfg.ID,
			URL:     url,
			DCGM:    dcgm,
			Model:   n.cfg.Model,
			Engine:  n.cfg.Engine.FleetName(),
			Role:    n.cfg.Role,
			Profile: profile,
		})
	}
	return out
}
