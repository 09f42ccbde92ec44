package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/scrape/ring"
	"github.com/llmdiag/llmdiag/tracing"
)

// Options configure a Scraper. Zero values take the defaults shown.
type Options struct {
	// Timeout bounds one scrape (default 3s): connecting, waiting for the
	// answer, a free slot and the body. A Refresh waits no longer than this
	// for the scrapes it started, so keep it below the refresh cycle's
	// deadline (and below the refresh interval, for fresh verdicts).
	Timeout time.Duration
	// MaxBodyBytes bounds one /metrics body (default 16 MiB).
	MaxBodyBytes int64
	// Retention is how far back samples are kept for windows (default 1h).
	Retention time.Duration
	// FullResolution is how far back every sample is kept (default 6m;
	// serve sets it with FullResolution). Older samples are thinned to the
	// first of each LongStep (package ring): a window longer than this
	// starts at a sample less than LongStep before the one it would with
	// every sample kept, and says what it covers (NodeMetrics.covered).
	FullResolution time.Duration
	// MaxSamples bounds the samples kept whole per node (default 720).
	MaxSamples int
	// LongRetention, when longer than Retention, keeps samples up to this
	// age for long windows (the SLO burn alerts read up to 6h: serve sets
	// it to the longest SLO window when SLOs are configured). A window
	// longer than the samples reach back is computed over what they
	// cover, and says so (NodeMetrics.covered).
	LongRetention time.Duration
	// LongStep is the least spacing of the samples kept beyond
	// FullResolution (default 1m).
	LongStep time.Duration
	// Concurrency bounds the scrapes reading and parsing a body at once
	// (default 16), and with it the memory parsing takes. Waiting for a
	// target to answer takes no slot; targets whose last scrape ran out of
	// time share at most half of the slots (at least one).
	Concurrency int
	// StaleAfter marks metrics stale when older (default 30s).
	StaleAfter time.Duration
	// Spread starts a refresh's scrapes over this span instead of all at
	// once: the i-th of n targets (by id) starts i·Spread/n after the
	// refresh begins, so that a large fleet's parsing comes as a steady
	// trickle rather than one burst that takes every core (serve sets it
	// with the fast lane on, whose reads must not wait for CPU). Each
	// target keeps its place, so it is still scraped once an interval; a
	// target never read yet (the first refresh) starts at once. Refresh
	// then returns within Spread + Timeout; a context deadline sooner than
	// that shortens the spread, never leaves a target out. Default 0: all
	// at once.
	Spread time.Duration
	// Quantiles reported in distributions (default 0.5, 0.95, 0.99).
	Quantiles []float64
	// MaxSeries refuses an exposition with more series (sample lines;
	// default engine.DefaultMaxSeries, serve --scrape-max-series).
	MaxSeries int
	// MaxRankValues refuses an exposition with more distinct values of one
	// rank label (vLLM's engine, SGLang's dp_rank, tp_rank, …; default
	// engine.DefaultMaxRankValues, serve --scrape-max-ranks).
	MaxRankValues int
}

// FullResolution is how far back a scraper refreshed every interval for
// window keeps every sample: the longer of window and 5m (the SLO burn
// alerts' shortest window, and on-demand 1m and 5m windows) and two
// intervals, so that such a window reads the sample it starts at.
func FullResolution(window metrics.Window, interval time.Duration) time.Duration {
	return max(window.Duration(), 5*time.Minute) + 2*interval
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 16 << 20
	}
	if o.Retention <= 0 {
		o.Retention = time.Hour
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = 720
	}
	if o.FullResolution <= 0 {
		o.FullResolution = 6 * time.Minute
	}
	if o.LongStep <= 0 {
		o.LongStep = time.Minute
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 30 * time.Second
	}
	if len(o.Quantiles) == 0 {
		o.Quantiles = []float64{0.5, 0.95, 0.99}
	}
}

// Scraper scrapes a set of targets, which SetTargets may change while it
// runs. It is safe for concurrent use.
type Scraper struct {
	// client follows redirects, for targets that opt in
	// (fleet.Node.FollowRedirects); noFollow is the same client without.
	client, noFollow *http.Client
	log              *slog.Logger
	now              func() time.Time
	opts             Options

	// slots bounds bodies read at once; suspect bounds those of targets
	// whose last scrape ran out of time, so they can never hold every slot.
	slots, suspect chan struct{}
	// memo is the series the engines' expositions have shown, for the
	// fleet (engine.SeriesMemo): a scrape parses only the lines it has not
	// seen before. GPU exporters' are parsed without it: their series are
	// each a GPU's own.
	memo *engine.SeriesMemo

	mu sync.RWMutex
	// targets are sorted by id; SetTargets replaces the slice, never
	// changes it.
	targets []fleet.Node
	rings   map[string]*ring.Ring
	states  map[string]*state
}

// state is what the scheduler knows of one target.
type state struct {
	// flight is the scrape in progress; nil when none is.
	flight *flight
	// slow: the last scrape that ended ran out of time, for want of an
	// answer or of the rest of the body (not of a free slot).
	slow bool
	// starved: the scrape in flight found no free slot in time, or found
	// one with less than a tenth of its time left (lateSlot): running out
	// of time then says nothing of the target either.
	starved bool
}

// flight is one scrape in progress.
type flight struct {
	started time.Time
	done    chan struct{} // closed when the scrape has ended and is recorded
	cancel  context.CancelFunc
}

// New returns a Scraper for targets. client may be nil (http.DefaultClient's
// transport with no global timeout is used; every scrape has its own
// deadline). Redirects are followed as client does for targets with
// FollowRedirects only; for the others a redirect is the answer.
func New(targets []fleet.Node, client *http.Client, log *slog.Logger, now func() time.Time, opts Options) *Scraper {
	opts.defaults()
	if client == nil {
		client = &http.Client{}
	}
	noFollow := *client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	ts := append([]fleet.Node(nil), targets...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	states := make(map[string]*state, len(ts))
	for _, t := range ts {
		states[t.ID] = &state{}
	}
	return &Scraper{
		client:   client,
		noFollow: &noFollow,
		log:      log,
		now:      now,
		opts:     opts,
		targets:  ts,
		slots:    make(chan struct{}, opts.Concurrency),
		suspect:  make(chan struct{}, max(1, opts.Concurrency/2)),
		memo:     engine.NewSeriesMemo(),
		rings:    make(map[string]*ring.Ring, len(ts)),
		states:   states,
	}
}

// Targets returns the scrape targets, sorted by id.
func (s *Scraper) Targets() []fleet.Node { return append([]fleet.Node(nil), s.current()...) }

// current is the targets now: a slice nobody changes.
func (s *Scraper) current() []fleet.Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.targets
}

// SetTargets makes targets the set scraped from the next Refresh on. A
// target already known (by id) keeps its samples, and its scrape in
// flight, even when its other fields changed; a new one starts without
// samples; one no longer given is forgotten with its samples, and what
// its scrape in flight brings back is dropped. Refresh and Window answer
// for the new set once SetTargets has returned (a Refresh already running
// answers for the set it started with).
func (s *Scraper) SetTargets(targets []fleet.Node) {
	ts := append([]fleet.Node(nil), targets...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	s.mu.Lock()
	defer s.mu.Unlock()
	states := make(map[string]*state, len(ts))
	for _, t := range ts {
		if st := s.states[t.ID]; st != nil {
			states[t.ID] = st
		} else {
			states[t.ID] = &state{}
		}
	}
	for id := range s.rings {
		if states[id] == nil {
			delete(s.rings, id)
		}
	}
	s.targets, s.states = ts, states
}

// Refresh scrapes every target whose previous scrape has ended (spread
// over Options.Spread when set), waits for them until they are all back,
// Options.Timeout has passed since the last one started or ctx's deadline
// comes, whichever is first, and returns one Observation per target with
// its indicators over window (a metrics.ParseWindow string).
//
// A scrape not back by then goes on to its own deadline and is recorded
// when it ends; meanwhile its target is reported from its last sample, with
// an error saying the scrape is still running (as down when it has none).
// Refresh fails only on a bad window or when ctx is cancelled (not merely
// past its deadline); then it stops the scrapes it started.
func (s *Scraper) Refresh(ctx context.Context, window string) ([]source.Observation, error) {
	dur, lifetime, err := metrics.ParseWindow(window)
	if err != nil {
		return nil, err
	}
	spread := s.opts.Spread
	if d, ok := ctx.Deadline(); ok {
		spread = min(spread, max(0, time.Until(d)-s.opts.Timeout))
	}
	wait, stop := context.WithTimeout(ctx, spread+s.opts.Timeout)
	defer stop()
	// Scrapes outlive this call, up to their own deadline: what a slow target
	// answers is kept for the next refresh.
	base := context.WithoutCancel(ctx)
	var started []*flight
	begin := time.Now()
	var pause *time.Timer
	targets := s.current()
starting:
	for i, t := range targets {
		if spread > 0 && s.scraped(t.ID) {
			// Starts due within a millisecond go together.
			if d := time.Until(begin.Add(spread * time.Duration(i) / time.Duration(len(targets)))); d > time.Millisecond {
				if pause == nil {
					pause = time.NewTimer(d)
					defer pause.Stop()
				} else {
					pause.Reset(d)
				}
				select {
				case <-pause.C:
				case <-ctx.Done():
					if errors.Is(ctx.Err(), context.Canceled) {
						break starting // the ones started are stopped below
					}
					// Past its deadline (the spread was cut to fit it):
					// the rest start at once.
				}
			}
		}
		if f := s.start(base, t); f != nil {
			started = append(started, f)
		}
	}
waiting:
	for _, f := range started {
		select {
		case <-f.done:
		case <-wait.Done():
			break waiting
		}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		for _, f := range started {
			f.cancel()
		}
		return nil, ctx.Err()
	}
	now := s.now()
	obs := make([]source.Observation, len(targets))
	for i, t := range targets {
		obs[i] = s.observe(t, dur, lifetime, window, now)
	}
	return obs, nil
}

// scraped reports whether node has a sample recorded: a node never read
// is not made to wait for its place in the spread.
func (s *Scraper) scraped(node string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.rings[node]
	return r != nil && r.Newest() != nil
}

// start begins a scrape of t unless one is still running; it returns the
// scrape begun, or nil.
func (s *Scraper) start(base context.Context, t fleet.Node) *flight {
	s.mu.Lock()
	st := s.states[t.ID]
	if st == nil || st.flight != nil { // gone (SetTargets), or still running

		s.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithTimeout(base, s.opts.Timeout)
	f := &flight{started: s.now(), done: make(chan struct{}), cancel: cancel}
	st.flight = f
	s.mu.Unlock()
	go func() {
		defer close(f.done)
		defer cancel()
		// The DCGM exporter is read alongside, within the same deadline.
		var gpu gpuRead
		var wg sync.WaitGroup
		// Under the refresh's span when it is traced (package tracing).
		ctx, span := tracing.Child(ctx, "scrape", trace.WithSpanKind(trace.SpanKindClient))
		if t.DCGM != "" {
			wg.Go(func() {
				// A span of its own: fetch notes status and bytes on ctx's.
				dctx, dspan := tracing.Child(ctx, "scrape.dcgm", trace.WithSpanKind(trace.SpanKindClient))
				gpu = s.scrapeDCGM(dctx, t)
				if dspan.IsRecording() {
					dspan.SetAttributes(attribute.String("llmdiag.node", t.ID), attribute.Int("llmdiag.scrape.warnings", len(gpu.warnings)))
				}
				dspan.End()
			})
		}
		smp := s.scrape(ctx, t)
		wg.Wait()
		gpu.into(smp)
		endScrape(span, t, smp)
		// The ring is appended to outside s.mu: encoding takes a while,
		// and other nodes' reads need not wait for it.
		if r := s.ringFor(t.ID, st); r != nil {
			r.Append(smp)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		// A scrape that ran out of time hung, whatever it had read; one
		// that found no slot says nothing of its target.
		if !st.starved {
			st.slow = errors.Is(ctx.Err(), context.DeadlineExceeded)
		}
		st.flight, st.starved = nil, false
	}()
	return f
}

// endScrape ends a scrape's span with what it found: the node, its engine,
// whether it was up, and its first error (errors name no secret: URLs in
// them are redacted).
func endScrape(span trace.Span, t fleet.Node, smp *sample.Sample) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("llmdiag.node", t.ID), attribute.String("llmdiag.engine", smp.Engine.String()),
			attribute.Bool("llmdiag.up", smp.Up), attribute.Int("llmdiag.scrape.errors", len(smp.Errors)))
		if len(smp.Errors) > 0 {
			span.SetStatus(codes.Error, smp.Errors[0])
		}
	}
	span.End()
}

// observe is t's Observation from what has been recorded, at now.
func (s *Scraper) observe(t fleet.Node, dur time.Duration, lifetime bool, window string, now time.Time) source.Observation {
	s.mu.RLock()
	ring := s.rings[t.ID]
	var f *flight
	if st := s.states[t.ID]; st != nil {
		f = st.flight
	}
	s.mu.RUnlock()
	o := source.Observation{Node: t}
	if ring != nil {
		o.Sample = ring.Newest()
	}
	if o.Sample != nil {
		o.Engine = o.Sample.Engine
		o.Metrics = s.compute(t, ring, time.Time{}, dur, lifetime, window)
	}
	if f == nil {
		return o
	}
	running := fmt.Sprintf("scrape %s still running after %s (deadline %s)", redact.URL(t.URL), now.Sub(f.started).Round(time.Millisecond), s.opts.Timeout)
	if o.Metrics != nil {
		o.Metrics.Errors = append(o.Metrics.Errors, running+": figures are from the scrape before")
		return o
	}
	// Nothing read yet: the target has not answered within a refresh.
	eng, _ := fleet.ParseEngine(t.Engine)
	o.Sample = &sample.Sample{At: now, Engine: eng, Errors: []string{running + ": no answer yet"}}
	o.Engine = eng
	o.Metrics = s.computeOf(t, o.Sample, nil, window)
	return o
}

// lateSlot: a slot found with less than 1/lateSlot of the scrape timeout
// left marks the scrape starved, not its target slow, should it run out of
// time.
const lateSlot = 10

// acquire takes a slot to read node's body, waiting at most until ctx is
// done; a target whose last scrape ran out of time first takes one of the
// slots such targets share. release gives them back.
func (s *Scraper) acquire(ctx context.Context, node string) (release func(), err error) {
	s.mu.RLock()
	st := s.states[node]
	if st == nil {
		st = &state{} // forgotten meanwhile (SetTargets): marks go nowhere
	}
	suspect := st.slow
	s.mu.RUnlock()
	full := func() error {
		s.mu.Lock()
		st.starved = true
		s.mu.Unlock()
		if suspect {
			return fmt.Errorf("no slot to read the answer in time: at most %d answers are read at once, %d of them from targets whose last scrape ran out of time, as this one's did", cap(s.slots), cap(s.suspect))
		}
		return fmt.Errorf("no slot to read the answer in time: at most %d answers are read at once", cap(s.slots))
	}
	if suspect {
		select {
		case s.suspect <- struct{}{}:
		case <-ctx.Done():
			return nil, full()
		}
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		if suspect {
			<-s.suspect
		}
		return nil, full()
	}
	release = func() {
		<-s.slots
		if suspect {
			<-s.suspect
		}
	}
	if ctx.Err() != nil { // a slot freed just as time ran out
		release()
		return nil, full()
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < s.opts.Timeout/lateSlot {
		s.mu.Lock()
		st.starved = true
		s.mu.Unlock()
	}
	return release, nil
}

// Window returns one node's indicators over window, ending offset ago, from
// the samples already recorded. The ring reaches back Options.Retention at
// most; an offset beyond what it holds is an error.
func (s *Scraper) Window(_ context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	dur, lifetime, err := metrics.ParseWindow(window)
	if err != nil {
		return nil, err
	}
	for _, t := range s.current() {
		if t.ID == node {
			s.mu.RLock()
			ring := s.rings[t.ID]
			s.mu.RUnlock()
			if ring == nil || ring.Newest() == nil {
				return nil, fmt.Errorf("%q has not been scraped yet", node)
			}
			var until time.Time
			if offset > 0 {
				until = s.now().Add(-offset)
			}
			if m := s.compute(t, ring, until, dur, lifetime, window); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("no samples of %q from %s ago: the oldest kept is from %s ago (--retention)", node, offset, s.now().Sub(ring.Oldest()).Round(time.Second))
		}
	}
	return nil, fmt.Errorf("%q: %w", node, source.ErrUnknownNode)
}

// compute makes the indicators of window from the samples ring keeps at
// or before until (all of them when until is zero); nil when it keeps
// none.
func (s *Scraper) compute(t fleet.Node, r *ring.Ring, until time.Time, dur time.Duration, lifetime bool, window string) *llmdiagv1.NodeMetrics {
	if lifetime {
		dur = 0
	}
	newest, base := r.Window(until, dur)
	if newest == nil {
		return nil
	}
	return s.computeOf(t, newest, base, window)
}

// computeOf makes the indicators of the window from base to newest (the
// lifetime when base is nil).
func (s *Scraper) computeOf(t fleet.Node, newest, base *sample.Sample, window string) *llmdiagv1.NodeMetrics {
	if base == nil {
		window = metrics.Lifetime
	}
	m := metrics.Compute(newest, base, window, s.opts.Quantiles, s.now(), s.opts.StaleAfter)
	m.Node = t.ID
	if base != nil {
		m.Covered = durationpb.New(newest.At.Sub(base.At))
	}
	if t.Model != "" {
		m.Model = t.Model
	}
	return m
}

// ringFor is the node's ring (package ring: samples kept whole for
// FullResolution, thinned to one per LongStep beyond, up to Retention or
// LongRetention, whichever is longer), made on its first sample; nil when
// the node's state is no longer st (forgotten by SetTargets). Samples of
// a target that is down are kept: they carry Up=false and the error,
// while the window computation skips them.
func (s *Scraper) ringFor(node string, st *state) *ring.Ring {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.states[node] != st {
		return nil
	}
	r := s.rings[node]
	if r == nil {
		r = ring.New(ring.Options{Full: s.opts.FullResolution, MaxFull: s.opts.MaxSamples,
			Keep: max(s.opts.Retention, s.opts.LongRetention), Step: s.opts.LongStep})
		s.rings[node] = r
	}
	return r
}

// scrape reads one target within ctx's deadline (start sets it). It never
// fails: problems go into the sample.
func (s *Scraper) scrape(ctx context.Context, t fleet.Node) *sample.Sample {
	eng, _ := fleet.ParseEngine(t.Engine) // validated with the fleet file
	down := func(err error) *sample.Sample {
		s.log.Debug("scrape failed", "node", t.ID, "url", redact.URL(t.URL), "err", err)
		return &sample.Sample{At: s.now(), Up: false, Engine: eng, Errors: []string{err.Error()}}
	}
	exp, at, release, err := s.fetch(ctx, t.ID, t.URL, t.FollowRedirects, s.memo)
	var unreadable unreadableError
	switch {
	case errors.As(err, &unreadable):
		s.log.Debug("parse failed", "node", t.ID, "err", err)
		return &sample.Sample{At: at, Up: true, Engine: eng, Errors: []string{fmt.Sprintf("parse %s: %v", redact.URL(t.URL), err)}}
	case err != nil:
		return down(fmt.Errorf("scrape %s: %w", redact.URL(t.URL), err))
	}
	defer release()
	if len(exp.Warnings) > 0 {
		s.log.Debug("exposition problems", "node", t.ID, "warnings", exp.Warnings)
	}
	if eng == llmdiagv1.Engine_ENGINE_UNSPECIFIED {
		eng = engine.Detect(exp.Families)
	}
	smp := engine.Extract(eng, exp.Families, at)
	smp.Up = true
	smp.Warnings = exp.Warnings
	return smp
}

// unreadableError is a fetch whose endpoint answered 200 with an exposition
// that could not be read (a parse error, or a body over MaxBodyBytes): the
// endpoint is up.
type unreadableError struct{ err error }

func (e unreadableError) Error() string { return e.err.Error() }
func (e unreadableError) Unwrap() error { return e.err }

// fetch GETs the exposition at u for node within ctx's deadline and parses
// it (through memo, when not nil) within the scraper's limits, holding one
// of the parse slots (acquire)
// until release is called; release is nil when err is not. An answer that
// is no exposition, or no answer, is an error; an exposition that does not
// parse is an unreadableError, with at set. Errors do not name u: callers
// say what was fetched.
func (s *Scraper) fetch(ctx context.Context, node, u string, follow bool, memo *engine.SeriesMemo) (exp *engine.Exposition, at time.Time, release func(), err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, at, nil, fmt.Errorf("build request: %w", err)
	}
	// Ask for the classic text format: it is what every engine serves.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	client := s.noFollow
	if follow {
		client = s.client
	}
	resp, err := client.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, at, nil, fmt.Errorf("no answer within %s: %w", s.opts.Timeout, err)
	}
	if err != nil {
		return nil, at, nil, err
	}
	defer resp.Body.Close()
	// The exposition's values are the engine's when it answered (an
	// exporter gathers them before its headers): not those of when the
	// body was read and parsed, which a busy llmdiag (or a wait for a
	// parse slot) can make much later. A read of the node that began after
	// this one then counts as newer, as its values are.
	at = s.now()
	// The caller's scrape span (start), when traced.
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	}
	// What an answer says is never quoted: errors reach every API caller,
	// and the body (or the reason phrase) of a page that is not an
	// exposition can be anything.
	if resp.StatusCode != http.StatusOK {
		return nil, at, nil, errors.New(notOK(req, resp, follow))
	}
	if ct := mediaType(resp.Header); !exposition[ct] {
		return nil, at, nil, fmt.Errorf("HTTP 200 with content type %s%s, not a Prometheus text exposition (text/plain or application/openmetrics-text)", ct, redirected(req, resp))
	}
	release, err = s.acquire(ctx, node)
	if err != nil {
		return nil, at, nil, err
	}
	lr := &countingReader{r: io.LimitReader(resp.Body, s.opts.MaxBodyBytes+1)}
	// The parse stops at the first line over a limit: a flood of series
	// costs what the limit allows, not what the body holds.
	exp, perr := engine.ParseMemo(lr, engine.Limits{MaxSeries: s.opts.MaxSeries, MaxRankValues: s.opts.MaxRankValues}, memo)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("llmdiag.scrape.bytes", lr.n))
	}
	if lr.n > s.opts.MaxBodyBytes {
		perr = fmt.Errorf("body exceeds %d bytes", s.opts.MaxBodyBytes)
	}
	if perr != nil {
		release()
		return nil, at, nil, unreadableError{withFlag(perr)}
	}
	return exp, at, release, nil
}

// notOK describes the answer to req other than 200 by its status code and
// content type; a redirect not followed also by where it points (without
// query).
func notOK(req *http.Request, resp *http.Response, follow bool) string {
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if text := http.StatusText(resp.StatusCode); text != "" {
		msg += " " + text
	}
	if loc, err := resp.Location(); err == nil && resp.StatusCode/100 == 3 && !follow {
		return msg + " to " + where(loc) + ", not followed (follow_redirects: true on the node follows redirects)"
	}
	return msg + " (content type " + mediaType(resp.Header) + ")" + redirected(req, resp)
}

// redirected names where the redirects req was answered by ended, if any.
func redirected(req *http.Request, resp *http.Response) string {
	if resp.Request == nil || resp.Request.URL == nil || resp.Request.URL.Redacted() == req.URL.Redacted() {
		return ""
	}
	return " (after redirects to " + where(resp.Request.URL) + ")"
}

// where is u without its query and fragment, its password redacted, cut to
// 200 bytes.
func where(u *url.URL) string {
	v := *u
	v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = "", false, "", ""
	s := redact.URL(v.String())
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// exposition holds the content types of the text formats engine.Parse
// reads; none at all is taken as text too.
var exposition = map[string]bool{"none": true, "text/plain": true, "application/openmetrics-text": true}

// mediaType is the media type of h's Content-Type, without parameters;
// "none" when absent, "invalid" when it does not parse.
func mediaType(h http.Header) string {
	ct := h.Get("Content-Type")
	if ct == "" {
		return "none"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || len(mt) > 100 {
		return "invalid"
	}
	return mt
}

// withFlag names the serve flag of the limit that refused an exposition.
func withFlag(err error) error {
	var le *engine.LimitError
	if !errors.As(err, &le) {
		return err
	}
	switch le.Limit {
	case engine.LimitSeries:
		return fmt.Errorf("%w (serve --scrape-max-series)", err)
	case engine.LimitRankValues:
		return fmt.Errorf("%w (serve --scrape-max-ranks)", err)
	}
	return err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

var _ source.Source = (*Scraper)(nil)
