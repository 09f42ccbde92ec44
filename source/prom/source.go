package prom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/tracing"
)

// ErrNoData is returned when not one query of a refresh succeeded
// (Prometheus unreachable, or refusing every query).
var ErrNoData = errors.New("no query to prometheus succeeded")

// Source reads the fleet from the Prometheus HTTP API. It is safe for
// concurrent use.
type Source struct {
	client  api.Client   // URLs of the API
	http    *http.Client // with Config's TLS, authentication and headers
	workers sync.Pool    // of *worker
	log     *slog.Logger
	now     func() time.Time
	cfg     Config

	queries     atomic.Int64 // sent since New
	lastRefresh atomic.Int64 // sent by the last Refresh
	invalid     atomic.Int64 // invalid node ids skipped by the last read
	warnedOnce  atomic.Bool  // an invalid node id was logged at warn level

	mu    sync.Mutex
	known []llmdiagv1.Engine // engines with nodes at the last Refresh

	slots   *limiter    // queries in flight
	windows *windowSets // fleet-wide on-demand windows
	sizes   bodySizes   // of the last fleet-wide answers
	bodies  bodyPool    // body buffers kept from one read to the next
}

// bodySizes remembers how large the last answer of each fleet-wide query
// was, by what the query reads, so that the next one is read into a buffer
// of about its size at once: a bucket query of 10,000 nodes answers ~20 MB,
// and growing a buffer to that by doubling clears and copies twice as much
// (workers do not outlive a garbage collection; their body buffers go back
// to bodyPool, which may keep them for the next read). The keys are
// bounded by the queries of the mapping table.
type bodySizes struct {
	mu   sync.Mutex
	last map[sizeKey]bodySize
}

// bodySize is the size of an answer: its bytes and its samples.
type bodySize struct{ bytes, samples int }

type sizeKey struct {
	engine  llmdiagv1.Engine
	shape   shape
	concept engine.Concept
	run     int
}

func keyOf(q query) sizeKey { return sizeKey{q.engine, q.shape, q.concept, q.run} }

// reserve makes room in w for an answer to q a little larger than the
// last one.
func (b *bodySizes) reserve(w *worker, q query, bodies *bodyPool) {
	b.mu.Lock()
	n := b.last[keyOf(q)]
	b.mu.Unlock()
	if n.bytes > 0 {
		need := n.bytes + n.bytes/8 + bytes.MinRead // the last read, of EOF, wants room too
		if w.buf.Cap() < need {
			bodies.put(w.buf.Bytes())
			w.buf = *bytes.NewBuffer(bodies.get(need))
		}
		w.buf.Reset()
	}
	if n.samples > 0 {
		n.samples += n.samples / 8
		w.vec.vs = slices.Grow(w.vec.vs[:0], n.samples)
		w.vec.vals = slices.Grow(w.vec.vals[:0], n.samples*len(q.want))
	}
}

// set records the size of q's answer, in w.
func (b *bodySizes) set(w *worker, q query) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		b.last = map[sizeKey]bodySize{}
	}
	b.last[keyOf(q)] = bodySize{w.buf.Len(), w.vec.len()}
}

// New returns a Source for cfg. It checks the configuration and reads the
// TLS and credential files, but does not contact Prometheus.
func New(cfg Config, log *slog.Logger, now func() time.Time) (*Source, error) {
	cfg.defaults()
	cfg.ModelLabels = slices.Clone(cfg.ModelLabels)
	cfg.Quantiles = slices.Clone(cfg.Quantiles)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// A user and password in the URL become basic authentication, added by
	// the transport like the others: the URL itself is sent without them.
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("prometheus url: %s", redact.Text(err.Error()))
	}
	user, password := u.User.Username(), ""
	if u.User != nil {
		password, _ = u.User.Password()
		u.User = nil
		cfg.URL = u.String()
	}
	rt, err := transport(cfg, user, password)
	if err != nil {
		return nil, err
	}
	client, err := api.NewClient(api.Config{Address: cfg.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prometheus client: %w", err)
	}
	configured := originOf(u)
	return &Source{
		client: client,
		http: &http.Client{Transport: rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if originOf(req.URL) != configured {
				return errOtherOrigin(req.URL, configured)
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		}},
		workers: sync.Pool{New: newWorker},
		bodies:  bodyPool{keepBytes: maxKeptBodyBytes},
		log:     log,
		now:     now,
		cfg:     cfg,
		slots:   newLimiter(cfg.MaxInFlight, cfg.OnDemandInFlight),
		windows: newWindowSets(cfg.WindowCacheBytes),
	}, nil
}

// QueriesLastRefresh is the number of queries the last Refresh sent.
func (s *Source) QueriesLastRefresh() int { return int(s.lastRefresh.Load()) }

// InvalidNodeIDs is the number of node ids the last Refresh or Window
// skipped because they are not valid fleet ids (fleet.ValidID).
func (s *Source) InvalidNodeIDs() int { return int(s.invalid.Load()) }

// invalidIDs counts the invalid node ids a skipped, and logs the first
// ones at warn level once in the life of s, then at debug level.
func (s *Source) invalidIDs(a *assembly) {
	s.invalid.Store(int64(a.nInvalid))
	if a.nInvalid == 0 {
		return
	}
	examples := slices.Sorted(maps.Keys(a.invalid))
	examples = examples[:min(len(examples), 5)]
	level := slog.LevelDebug
	if s.warnedOnce.CompareAndSwap(false, true) {
		level = slog.LevelWarn
	}
	s.log.Log(context.Background(), level, "node ids that are not valid fleet ids skipped (1-128 letters, digits and ._:/-, starting with a letter or digit); this is logged once",
		"label", s.cfg.NodeLabel, "count", a.nInvalid, "examples", examples)
}

// scrapeErrors asks the targets API for Prometheus's last scrape error of
// each active target and gives a those of its nodes that are not live.
// It is best effort: servers of the API without it (Thanos, Mimir) or an
// error leave the nodes without the detail.
func (s *Source) scrapeErrors(ctx context.Context, w *worker, a *assembly) {
	u := s.client.URL("/api/v1/targets", nil)
	u.RawQuery = "state=active"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return
	}
	code, err := s.do(w, req)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	var resp struct {
		Status string           `json:"status"`
		Data   v1.TargetsResult `json:"data"`
	}
	if err == nil {
		err = json.Unmarshal(w.buf.Bytes(), &resp)
	}
	if err != nil {
		s.log.Debug("prometheus targets api: no last scrape errors", "err", err)
		return
	}
	errs := map[string]string{}
	for _, tg := range resp.Data.Active {
		if id := string(tg.Labels[model.LabelName(s.cfg.NodeLabel)]); id != "" && tg.LastError != "" {
			errs[id] = redact.Text(tg.LastError) // Prometheus's own, but it may name a URL
		}
	}
	a.targetErrs(errs)
}

// QueriesTotal is the number of queries sent since New.
func (s *Source) QueriesTotal() int64 { return s.queries.Load() }

// Refresh reads every node of every engine over window (a
// metrics.ParseWindow string), evaluated now, and returns one Observation
// per node, sorted by node id. Observation.Sample carries the gauges, the
// model and the data- and tensor-parallel degree seen; Observation.Metrics
// the indicators.
func (s *Source) Refresh(ctx context.Context, window string) ([]source.Observation, error) {
	dur, lifetime, err := metrics.ParseWindow(window)
	if err != nil {
		return nil, err
	}
	b := s.builder(dur, lifetime)
	s.mu.Lock()
	hint := s.known
	s.mu.Unlock()
	// The engines that had nodes last time: their data queries need not
	// wait for this refresh's identity queries.
	t := s.now()
	obs, n, known, err := s.readHinted(ctx, b, window, dur, t, hint)
	if err == nil && len(s.cfg.DCGMJoin) > 0 {
		s.joinGPU(ctx, obs, t)
		n++
	}
	s.lastRefresh.Store(int64(n))
	if err == nil || len(known) > 0 {
		// (A refresh whose identities all failed tells nothing new.)
		s.mu.Lock()
		s.known = known
		s.mu.Unlock()
	}
	return obs, err
}

// builder returns the query builder of a window.
func (s *Source) builder(dur time.Duration, lifetime bool) builder {
	b := builder{node: s.cfg.NodeLabel, models: s.cfg.ModelLabels}
	if !lifetime {
		b.rng = model.Duration(dur).String()
	}
	if s.cfg.Lookback > 0 {
		b.lookback = model.Duration(s.cfg.Lookback).String()
	}
	return b
}

// read runs the queries of b at t and assembles the observations. n is
// the number of queries sent.
func (s *Source) read(ctx context.Context, b builder, window string, dur time.Duration, t time.Time) (obs []source.Observation, n int, err error) {
	obs, n, _, err = s.readHinted(ctx, b, window, dur, t, nil)
	return obs, n, err
}

// readHinted is read with the data queries of the engines of hint queued
// from the start, next to the identity queries (see cycle). known are the
// engines the identity queries found nodes of, even when it fails. When ctx has a
// deadline, every query ends before it (cycle.end) and what arrived by then
// is used: a query not answered in time leaves its concept absent on the
// nodes of its engine, with the timeout named in their errors. It fails
// only when no identity query succeeded (no node is known) or ctx was
// cancelled.
func (s *Source) readHinted(ctx context.Context, b builder, window string, dur time.Duration, t time.Time, hint []llmdiagv1.Engine) (obs []source.Observation, n int, known []llmdiagv1.Engine, err error) {
	a := newAssembly(s.cfg, b.rng == "", window, dur, t)
	c := newCycle(ctx, s, a, b, t)
	c.mu.Lock()
	for _, e := range engine.Engines() {
		m, ok := engine.Lookup(e)
		if !ok {
			continue
		}
		es := a.engine(m)
		q, err := b.identity(m)
		if err != nil {
			// A mapping PromQL cannot express: the other engines go on.
			s.log.Error("engine mapping has no query", "engine", e, "err", err)
			a.engineErr(es, fmt.Sprintf("no query for engine %s: %v", e, err))
			continue
		}
		c.push(q)
		if slices.Contains(hint, e) {
			c.queueData(es)
		}
	}
	c.mu.Unlock()
	c.run()
	n = c.sent
	// What the identities told, even when the data failed.
	known = a.enginesWithNodes()
	s.invalidIDs(a)
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, n, known, err
	}
	if !a.identityOK || (c.dataOK == 0 && c.dataBad > 0) {
		// Without a single identity no node is known; without any data
		// the nodes would be reported empty, where the last good records
		// say more while they age: nothing to report.
		if a.firstErr == nil {
			return nil, n, known, ErrNoData
		}
		return nil, n, known, fmt.Errorf("%w: %w", ErrNoData, a.firstErr)
	}
	if c.failed > 0 || c.dropped > 0 {
		s.log.Warn("some prometheus queries failed or were not sent: their concepts are absent",
			"failed", c.failed, "not_sent", c.dropped, "sent", n, "first", a.firstErr)
	}
	return a.observations(), n, known, nil
}

// worker is what one query in flight reuses from one query to the next:
// the body buffer, the decoded vector and the interned label values (node
// ids recur in every query).
type worker struct {
	buf    bytes.Buffer
	ctype  string // the answer's media type ("none", "invalid")
	vec    vector
	intern map[string]string
}

// maxKeptBodyBytes bounds the body buffers bodyPool keeps between reads,
// all together: at 10,000 vLLM nodes a refresh reads ~250 MB of JSON, ten
// bucket answers of 20–25 MB each among them, with up to
// Config.Concurrency (default 8) of them read at once; their buffers, each
// sized to its answer and an eighth, take some 220 MB.
const maxKeptBodyBytes = 256 << 20

// bodyPool keeps the body buffers of the queries from one read to the
// next, within keepBytes in all (what does not fit is dropped), so that a
// refresh reads into the buffers the last one allocated rather than
// clearing its ~100 MB of answers anew: the workers, in a sync.Pool, do
// not outlive the several garbage collections of a refresh of 10,000
// nodes.
type bodyPool struct {
	mu        sync.Mutex
	free      [][]byte
	kept      int // bytes: the capacities of free
	keepBytes int
}

// get returns an empty buffer with room for n bytes: the smallest kept
// that has, or a new one.
func (p *bodyPool) get(n int) []byte {
	p.mu.Lock()
	best := -1
	for i, b := range p.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(p.free[best])) {
			best = i
		}
	}
	if best < 0 {
		p.mu.Unlock()
		return make([]byte, 0, n)
	}
	b := p.free[best]
	last := len(p.free) - 1
	p.free[best], p.free[last] = p.free[last], nil
	p.free = p.free[:last]
	p.kept -= cap(b)
	p.mu.Unlock()
	return b[:0]
}

// put keeps b for a later get, unless that would take the pool past
// keepBytes.
func (p *bodyPool) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept+cap(b) > p.keepBytes {
		return
	}
	p.kept += cap(b)
	p.free = append(p.free, b[:0])
}

// maxIntern bounds a worker's interned values; past it they are forgotten.
const maxIntern = 1 << 18

func newWorker() any { return &worker{intern: map[string]string{}} }

// query runs one instant query at t, once it has a slot (see limiter), with
// its own deadline (Config.Timeout, or ctx's when sooner, also sent to
// Prometheus) and decodes the labels of q it reads into w.vec.
//
// It speaks the HTTP API at the URL client_golang's api.Client builds and
// reports errors as client_golang's v1.Error, but reads and decodes the body
// itself: v1.API.Query decodes every sample with encoding/json into a
// model.Sample with a map of its own (~10 µs a sample), which for 10,000
// nodes — a million bucket series per refresh — is over ten seconds of CPU,
// and buffers each body anew.
func (s *Source) query(ctx context.Context, w *worker, q query, t time.Time) (v1.Warnings, error) {
	// A span under the refresh's or the RPC's, when that is traced.
	ctx, span := tracing.Child(ctx, "prometheus.query", trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return s.send(ctx, w, q, t)
	}
	expr := q.expr
	if len(expr) > maxSpanExpr {
		expr = expr[:maxSpanExpr] + "…"
	}
	span.SetAttributes(attribute.String("db.system.name", "prometheus"), attribute.String("llmdiag.query", q.what()),
		attribute.String("db.query.text", expr))
	warnings, err := s.send(ctx, w, q, t)
	span.SetAttributes(attribute.Int("llmdiag.response.bytes", w.buf.Len()), attribute.Int("llmdiag.warnings", len(warnings)))
	tracing.End(span, err)
	return warnings, err
}

// maxSpanExpr bounds the PromQL a query's span quotes.
const maxSpanExpr = 2048

// send is query's request and answer.
func (s *Source) send(ctx context.Context, w *worker, q query, t time.Time) (v1.Warnings, error) {
	release, err := s.slots.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	s.queries.Add(1)
	budget := s.cfg.Timeout
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d))
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	args := url.Values{}
	args.Set("query", q.expr)
	args.Set("time", strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', -1, 64))
	// Prometheus takes the timeout in whole milliseconds at least.
	args.Set("timeout", model.Duration(max(budget, time.Millisecond)).String())
	u := s.client.URL("/api/v1/query", nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(args.Encode()))
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	code, err := s.do(w, req)
	if err == nil && code == http.StatusMethodNotAllowed {
		// Some implementations of the API take GET only.
		u.RawQuery = args.Encode()
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil); err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		code, err = s.do(w, req)
	}
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if len(w.intern) > maxIntern {
		clear(w.intern)
	}
	body := w.buf.Bytes()
	r, derr := decodeVector(body, q.want, &w.vec, w.intern)
	warnings := v1.Warnings(r.warnings)
	switch {
	case code/100 != 2 && (derr != nil || (code != http.StatusBadRequest && code != http.StatusUnprocessableEntity)):
		typ, msg := v1.ErrServer, fmt.Sprintf("server error: %d", code)
		if code/100 == 4 {
			typ, msg = v1.ErrClient, fmt.Sprintf("client error: %d", code)
		}
		return warnings, fmt.Errorf("query: %w", &v1.Error{Type: typ, Msg: msg, Detail: detail(w)})
	case derr != nil:
		return warnings, fmt.Errorf("query: %w", &v1.Error{Type: v1.ErrBadResponse, Msg: derr.Error()})
	case r.status != "success":
		typ := v1.ErrorType(r.errorType)
		if typ == "" {
			typ = v1.ErrBadResponse
		}
		return warnings, fmt.Errorf("query: %w", &v1.Error{Type: typ, Msg: r.error})
	}
	return warnings, nil
}

// detail describes an error answer: Prometheus's own error string when it
// is the API's JSON, else its content type and size only, since a page
// that is not the API's (a proxy's, a login form) may hold anything.
func detail(w *worker) string {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if json.Unmarshal(w.buf.Bytes(), &r) == nil && r.Status == "error" && r.Error != "" {
		return r.Error
	}
	return fmt.Sprintf("%d bytes of %s", w.buf.Len(), w.ctype)
}

// do sends req and reads the body into w.buf, at most Config.MaxBodyBytes.
func (s *Source) do(w *worker, req *http.Request) (int, error) {
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	w.buf.Reset()
	if n := resp.ContentLength; n > 0 && n <= s.cfg.MaxBodyBytes {
		if need := int(n) + bytes.MinRead; w.buf.Cap() < need { // the last read, of EOF, wants room too
			s.bodies.put(w.buf.Bytes())
			w.buf = *bytes.NewBuffer(s.bodies.get(need))
		}
	}
	w.ctype = "none"
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if w.ctype, _, err = mime.ParseMediaType(ct); err != nil || len(w.ctype) > 100 {
			w.ctype = "invalid"
		}
	}
	if _, err := w.buf.ReadFrom(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes+1)); err != nil {
		return 0, fmt.Errorf("read response: %w", err)
	}
	if int64(w.buf.Len()) > s.cfg.MaxBodyBytes {
		return 0, fmt.Errorf("response larger than %d bytes", s.cfg.MaxBodyBytes)
	}
	return resp.StatusCode, nil
}
