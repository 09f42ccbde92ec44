package prom

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
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

	slots   *limiter    // queries in flight
	windows *windowSets // fleet-wide on-demand windows
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
	rt, err := transport(cfg)
	if err != nil {
		return nil, err
	}
	client, err := api.NewClient(api.Config{Address: cfg.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prometheus client: %w", err)
	}
	return &Source{
		client:  client,
		http:    &http.Client{Transport: rt},
		workers: sync.Pool{New: newWorker},
		log:     log,
		now:     now,
		cfg:     cfg,
		slots:   newLimiter(cfg.MaxInFlight, cfg.OnDemandInFlight),
		windows: newWindowSets(cfg.WindowCacheBytes),
	}, nil
}

// QueriesLastRefresh is the number of queries the last Refresh sent.
func (s *Source) QueriesLastRefresh() int { return int(s.lastRefresh.Load()) }

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
	obs, n, err := s.read(ctx, b, window, dur, s.now())
	s.lastRefresh.Store(int64(n))
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

// read runs the queries of b at t in two rounds, identity of every engine
// and then the data of the engines that have nodes, and assembles the
// observations. n is the number of queries sent.
func (s *Source) read(ctx context.Context, b builder, window string, dur time.Duration, t time.Time) (obs []source.Observation, n int, err error) {
	a := newAssembly(s.cfg, b.rng == "", window, dur, t)
	var first []query
	for _, e := range engine.Engines() {
		m, ok := engine.Lookup(e)
		if !ok {
			continue
		}
		es := a.engine(m)
		qs, err := b.identity(m)
		if err != nil {
			// A mapping PromQL cannot express: the other engines go on.
			s.log.Error("engine mapping has no query", "engine", e, "err", err)
			es.errs = append(es.errs, fmt.Sprintf("no query for engine %s: %v", e, err))
			continue
		}
		first = append(first, qs...)
	}
	ok1, fail1 := s.run(ctx, a, first, t)
	n += len(first)
	if err := ctx.Err(); err != nil {
		return nil, n, err
	}
	if (ok1 == 0 && fail1 > 0) || (!a.identityOK && a.identities > 0) {
		// Without a single identity no node is known: nothing to report.
		return nil, n, fmt.Errorf("%w: %w", ErrNoData, a.firstErr)
	}
	var second []query
	for _, es := range a.engines {
		if len(es.nodes) == 0 {
			continue
		}
		qs, err := b.data(es.m)
		if err != nil {
			s.log.Error("engine mapping has no query", "engine", es.m.Engine, "err", err)
			es.errs = append(es.errs, fmt.Sprintf("no query for engine %s: %v", es.m.Engine, err))
			continue
		}
		second = append(second, qs...)
	}
	// The bucket queries are the large answers: start them first.
	slices.SortStableFunc(second, func(x, y query) int {
		return cmp.Compare(boolInt(x.shape != shapeBuckets), boolInt(y.shape != shapeBuckets))
	})
	ok2, fail2 := s.run(ctx, a, second, t)
	n += len(second)
	if err := ctx.Err(); err != nil {
		return nil, n, err
	}
	if ok2 == 0 && fail2 > 0 {
		return nil, n, fmt.Errorf("%w: %w", ErrNoData, a.firstErr)
	}
	if failed := fail1 + fail2; failed > 0 {
		s.log.Warn("some prometheus queries failed: their concepts are absent", "failed", failed, "of", n, "first", a.firstErr)
	}
	return a.observations(), n, nil
}

// run sends qs, at most Config.Concurrency at a time (and within the
// in-flight limit, see limiter), and adds each result
// to a as it arrives. It returns how many succeeded and failed.
func (s *Source) run(ctx context.Context, a *assembly, qs []query, t time.Time) (ok, failed int) {
	var (
		wg      sync.WaitGroup
		next    = make(chan query)
		nOK     atomic.Int64
		nFailed atomic.Int64
	)
	for range min(s.cfg.Concurrency, len(qs)) {
		wg.Go(func() {
			w := s.workers.Get().(*worker)
			defer s.workers.Put(w)
			for q := range next {
				warnings, err := s.query(ctx, w, q, t)
				if err != nil {
					nFailed.Add(1)
					if ctx.Err() == nil {
						s.log.Debug("prometheus query failed", "query", q.expr, "err", err)
					}
					a.fail(q, err)
					continue
				}
				nOK.Add(1)
				a.add(q, &w.vec, warnings)
			}
		})
	}
feed:
	for _, q := range qs {
		select {
		case next <- q:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return int(nOK.Load()), int(nFailed.Load())
}

// worker is what one query in flight reuses from one query to the next:
// the body buffer, the decoded vector and the interned label values (node
// ids recur in every query).
type worker struct {
	buf    bytes.Buffer
	vec    vector
	intern map[string]string
}

// maxIntern bounds a worker's interned values; past it they are forgotten.
const maxIntern = 1 << 18

func newWorker() any { return &worker{intern: map[string]string{}} }

// query runs one instant query at t with its own deadline and decodes the
// labels of q it reads into w.vec.
//
// It speaks the HTTP API at the URL client_golang's api.Client builds and
// reports errors as client_golang's v1.Error, but reads and decodes the body
// itself: v1.API.Query decodes every sample with encoding/json into a
// model.Sample with a map of its own (~10 µs a sample), which for 10,000
// nodes — a million bucket series per refresh — is over ten seconds of CPU,
// and buffers each body anew.
func (s *Source) query(ctx context.Context, w *worker, q query, t time.Time) (v1.Warnings, error) {
	release, err := s.slots.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	s.queries.Add(1)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	args := url.Values{}
	args.Set("query", q.expr)
	args.Set("time", strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', -1, 64))
	args.Set("timeout", model.Duration(s.cfg.Timeout).String())
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
		return warnings, fmt.Errorf("query: %w", &v1.Error{Type: typ, Msg: msg, Detail: detail(body)})
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

// detail is the start of an error body, for messages.
func detail(body []byte) string {
	const n = 512
	if len(body) > n {
		return string(body[:n]) + "…"
	}
	return string(body)
}

// do sends req and reads the body into w.buf, at most Config.MaxBodyBytes.
func (s *Source) do(w *worker, req *http.Request) (int, error) {
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	w.buf.Reset()
	if _, err := w.buf.ReadFrom(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes+1)); err != nil {
		return 0, fmt.Errorf("read response: %w", err)
	}
	if int64(w.buf.Len()) > s.cfg.MaxBodyBytes {
		return 0, fmt.Errorf("response larger than %d bytes", s.cfg.MaxBodyBytes)
	}
	return resp.StatusCode, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
