package expofarm

import (
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of a farm.
const (
	// MaxNodes bounds Config.Nodes.
	MaxNodes = 10000
	// MaxListeners bounds Config.Listeners (each is a socket, and the
	// connections a reader keeps to it more).
	MaxListeners = 2000
	// MaxBodyBytes bounds Config.Body.
	MaxBodyBytes = 16 << 20
)

// seedBody is the simulator's seed DeepSeek node (sim.Scenario("seed", 1),
// deepseek-v4-0 after sim.SeedWarmup): vLLM V1, 8 engine cores, 1,944
// lines. TestUpdateSeedFixture writes it afresh.
//
//go:embed testdata/vllm-seed.prom
var seedBody []byte

// SeedBody returns the default body, ~172 KB: the simulator's vLLM
// exposition of the seed fleet's DeepSeek node (testdata/vllm-seed.prom).
func SeedBody() []byte { return append([]byte(nil), seedBody...) }

// DefaultSteps is the schedule a farm of nodes serves by default: each
// node's gauges step between an idle and a saturated reading every 2 s,
// the nodes' steps spread evenly over the 4 s period.
func DefaultSteps(nodes int) Steps {
	period := 4 * time.Second
	return Steps{
		Period:  period,
		Stagger: period / time.Duration(max(1, nodes)),
		Low:     Gauges{Waiting: 0, Running: 24, KVUsage: 0.25},
		High:    Gauges{Waiting: 96, Running: 64, KVUsage: 0.96875},
	}
}

// Config configures a Farm. Zero values take the defaults shown.
type Config struct {
	// Nodes is the number of endpoints (default 1,000; at most MaxNodes).
	Nodes int
	// Listeners spreads the endpoints over this many loopback listeners,
	// endpoint i on listener i mod Listeners (default: one per endpoint,
	// at most MaxListeners).
	Listeners int
	// Body is the exposition every endpoint serves, its routing gauges
	// patched (default SeedBody).
	Body []byte
	// Schedule gives each node's gauges at each request (default
	// DefaultSteps(Nodes)).
	Schedule Schedule
	// Now is the clock requests are answered at (default time.Now).
	Now func() time.Time
}

// Stats count what a farm has served.
type Stats struct {
	Requests    int64 `json:"requests"`    // bodies served
	Connections int64 `json:"connections"` // connections accepted
}

// Farm serves the endpoints. Start binds them, Close stops them.
type Farm struct {
	cfg  Config
	tpl  *template
	pool sync.Pool // *[]byte of capacity tpl.maxRegion

	requests, conns atomic.Int64

	mu      sync.Mutex
	servers []*http.Server
	urls    []string
	wg      sync.WaitGroup
	closed  bool
}

// New returns a farm for cfg, its body cut into a template; it binds
// nothing.
func New(cfg Config) (*Farm, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 1000
	}
	if cfg.Nodes < 0 || cfg.Nodes > MaxNodes {
		return nil, fmt.Errorf("expofarm: nodes %d: want 1..%d", cfg.Nodes, MaxNodes)
	}
	if cfg.Listeners == 0 {
		cfg.Listeners = min(cfg.Nodes, MaxListeners)
	}
	if cfg.Listeners < 0 || cfg.Listeners > min(cfg.Nodes, MaxListeners) {
		return nil, fmt.Errorf("expofarm: listeners %d: want 1..%d (at most one per node)", cfg.Listeners, min(cfg.Nodes, MaxListeners))
	}
	if cfg.Body == nil {
		cfg.Body = seedBody
	}
	if len(cfg.Body) > MaxBodyBytes {
		return nil, fmt.Errorf("expofarm: body of %d bytes: at most %d", len(cfg.Body), MaxBodyBytes)
	}
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSteps(cfg.Nodes)
	}
	if s, ok := cfg.Schedule.(Steps); ok {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("expofarm: %w", err)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// The template keeps slices of the body: a copy, so the caller's can
	// change.
	tpl, err := newTemplate(append([]byte(nil), cfg.Body...))
	if err != nil {
		return nil, fmt.Errorf("expofarm: %w", err)
	}
	f := &Farm{cfg: cfg, tpl: tpl}
	f.pool.New = func() any {
		b := make([]byte, 0, tpl.maxRegion)
		return &b
	}
	return f, nil
}

// Nodes is the number of endpoints.
func (f *Farm) Nodes() int { return f.cfg.Nodes }

// Path is node's path on its listener: /n/0042/metrics.
func Path(node int) string { return fmt.Sprintf("/n/%04d/metrics", node) }

// Start binds the listeners on 127.0.0.1 (free ports) and serves until
// Close. A farm starts once.
func (f *Farm) Start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.servers != nil || f.closed {
		return errors.New("expofarm: started already")
	}
	lns := make([]net.Listener, 0, f.cfg.Listeners)
	for range f.cfg.Listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("expofarm: listen (listener %d of %d): %w", len(lns)+1, f.cfg.Listeners, err)
		}
		lns = append(lns, ln)
	}
	f.urls = make([]string, f.cfg.Nodes)
	for i := range f.urls {
		f.urls[i] = "http://" + lns[i%len(lns)].Addr().String() + Path(i)
	}
	for i, ln := range lns {
		srv := &http.Server{
			Handler:           handler{f: f, listener: i},
			ReadHeaderTimeout: 10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       time.Minute,
			MaxHeaderBytes:    8 << 10,
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					f.conns.Add(1)
				}
			},
		}
		f.servers = append(f.servers, srv)
		f.wg.Go(func() { _ = srv.Serve(ln) })
	}
	return nil
}

// URLs are the endpoints' URLs, node i's at index i; nil before Start.
func (f *Farm) URLs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.urls...)
}

// Stats are the counts so far.
func (f *Farm) Stats() Stats {
	return Stats{Requests: f.requests.Load(), Connections: f.conns.Load()}
}

// Close stops every listener and connection and waits for the servers to
// return.
func (f *Farm) Close() error {
	f.mu.Lock()
	f.closed = true
	servers := f.servers
	f.mu.Unlock()
	var errs []error
	for _, s := range servers {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	f.wg.Wait()
	return errors.Join(errs...)
}

// AppendBody appends the body node serves at at to dst (for tests: a
// request writes the same bytes without building them).
func (f *Farm) AppendBody(dst []byte, node int, at time.Time) []byte {
	dst = append(dst, f.tpl.prefix...)
	dst = f.tpl.render(dst, f.cfg.Schedule.Gauges(node, at))
	return append(dst, f.tpl.suffix...)
}

// contentType is the classic text format's, as vLLM serves it.
var contentType = []string{"text/plain; version=0.0.4; charset=utf-8"}

// handler serves the endpoints of one listener.
type handler struct {
	f        *Farm
	listener int
}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := h.f
	node, ok := parsePath(r.URL.Path)
	if !ok || node >= f.cfg.Nodes || node%f.cfg.Listeners != h.listener {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// Counted before the body goes out: a client that has read it all
	// finds it counted.
	f.requests.Add(1)
	bp := f.pool.Get().(*[]byte)
	region := f.tpl.render((*bp)[:0], f.cfg.Schedule.Gauges(node, f.cfg.Now()))
	hdr := w.Header()
	hdr["Content-Type"] = contentType
	hdr["Content-Length"] = []string{strconv.Itoa(len(f.tpl.prefix) + len(region) + len(f.tpl.suffix))}
	if r.Method == http.MethodGet {
		// Errors are the reader's hanging up: nothing to do.
		_, _ = w.Write(f.tpl.prefix)
		_, _ = w.Write(region)
		_, _ = w.Write(f.tpl.suffix)
	}
	*bp = region[:0]
	f.pool.Put(bp)
}

// parsePath is the node of /n/<digits>/metrics.
func parsePath(p string) (int, bool) {
	const pre, suf = "/n/", "/metrics"
	if len(p) <= len(pre)+len(suf) || p[:len(pre)] != pre || p[len(p)-len(suf):] != suf {
		return 0, false
	}
	digits := p[len(pre) : len(p)-len(suf)]
	if len(digits) > 6 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
