package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
)

// Options configure a Scraper. Zero values take the defaults shown.
type Options struct {
	// Timeout bounds one scrape (default 3s).
	Timeout time.Duration
	// MaxBodyBytes bounds one /metrics body (default 16 MiB).
	MaxBodyBytes int64
	// Retention is how far back samples are kept for windows (default 1h).
	Retention time.Duration
	// MaxSamples bounds the ring per node (default 720).
	MaxSamples int
	// Concurrency bounds simultaneous scrapes (default 16).
	Concurrency int
	// StaleAfter marks metrics stale when older (default 30s).
	StaleAfter time.Duration
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

// Scraper scrapes a fixed set of targets. It is safe for concurrent use.
type Scraper struct {
	client  *http.Client
	log     *slog.Logger
	now     func() time.Time
	opts    Options
	targets []fleet.Node

	mu    sync.RWMutex
	rings map[string][]*sample.Sample
}

// New returns a Scraper for targets. client may be nil (http.DefaultClient's
// transport with no global timeout is used; every scrape has its own deadline).
func New(targets []fleet.Node, client *http.Client, log *slog.Logger, now func() time.Time, opts Options) *Scraper {
	opts.defaults()
	if client == nil {
		client = &http.Client{}
	}
	ts := append([]fleet.Node(nil), targets...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	return &Scraper{
		client:  client,
		log:     log,
		now:     now,
		opts:    opts,
		targets: ts,
		rings:   make(map[string][]*sample.Sample, len(ts)),
	}
}

// Targets returns the scrape targets, sorted by id.
func (s *Scraper) Targets() []fleet.Node { return append([]fleet.Node(nil), s.targets...) }

// Refresh scrapes every target once, records the samples, and returns each
// node's indicators over window (a metrics.ParseWindow string).
func (s *Scraper) Refresh(ctx context.Context, window string) ([]source.Observation, error) {
	dur, lifetime, err := metrics.ParseWindow(window)
	if err != nil {
		return nil, err
	}
	obs := make([]source.Observation, len(s.targets))
	sem := make(chan struct{}, s.opts.Concurrency)
	var wg sync.WaitGroup
	for i, t := range s.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return
			}
			smp := s.scrape(ctx, t)
			s.record(t.ID, smp)
			s.mu.RLock()
			ring := s.rings[t.ID]
			s.mu.RUnlock()
			obs[i] = source.Observation{Node: t, Engine: smp.Engine, Sample: smp, Metrics: s.compute(t, ring, dur, lifetime, window)}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return obs, nil
}

// Window returns one node's indicators over window, ending offset ago, from
// the samples already recorded. The ring reaches back Options.Retention at
// most; an offset beyond what it holds is an error.
func (s *Scraper) Window(_ context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	dur, lifetime, err := metrics.ParseWindow(window)
	if err != nil {
		return nil, err
	}
	for _, t := range s.targets {
		if t.ID == node {
			s.mu.RLock()
			ring := s.rings[t.ID]
			s.mu.RUnlock()
			end := len(ring)
			if offset > 0 {
				cutoff := s.now().Add(-offset)
				end = sort.Search(len(ring), func(i int) bool { return ring[i].At.After(cutoff) })
			}
			if end == 0 {
				if len(ring) == 0 {
					return nil, fmt.Errorf("%q has not been scraped yet", node)
				}
				return nil, fmt.Errorf("no samples of %q from %s ago: the oldest kept is from %s ago (--retention)", node, offset, s.now().Sub(ring[0].At).Round(time.Second))
			}
			return s.compute(t, ring[:end], dur, lifetime, window), nil
		}
	}
	return nil, fmt.Errorf("%q: %w", node, source.ErrUnknownNode)
}

// compute makes the indicators of window from ring, whose last sample ends
// the window; nil when ring is empty.
func (s *Scraper) compute(t fleet.Node, ring []*sample.Sample, dur time.Duration, lifetime bool, window string) *llmdiagv1.NodeMetrics {
	if len(ring) == 0 {
		return nil
	}
	var newest, base *sample.Sample
	if lifetime {
		newest = ring[len(ring)-1]
	} else {
		newest, base = metrics.Pick(ring, dur)
	}
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

// record appends smp to the node's ring, trimming by count and age. Samples of
// a target that is down are kept: they carry Up=false and the error, while
// the window computation skips them.
func (s *Scraper) record(node string, smp *sample.Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ring := append(s.rings[node], smp)
	cut := 0
	for cut < len(ring)-1 && (len(ring)-cut > s.opts.MaxSamples || smp.At.Sub(ring[cut].At) > s.opts.Retention) {
		cut++
	}
	if cut > 0 {
		ring = append(ring[:0:0], ring[cut:]...)
	}
	s.rings[node] = ring
}

// scrape reads one target. It never fails: problems go into the sample.
func (s *Scraper) scrape(ctx context.Context, t fleet.Node) *sample.Sample {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	eng, _ := fleet.ParseEngine(t.Engine) // validated with the fleet file
	down := func(err error) *sample.Sample {
		s.log.Debug("scrape failed", "node", t.ID, "url", t.URL, "err", err)
		return &sample.Sample{At: s.now(), Up: false, Engine: eng, Errors: []string{err.Error()}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return down(fmt.Errorf("build request: %w", err))
	}
	// Ask for the classic text format: it is what every engine serves.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return down(fmt.Errorf("scrape %s: %w", t.URL, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return down(fmt.Errorf("scrape %s: HTTP %s", t.URL, resp.Status))
	}
	body := io.LimitReader(resp.Body, s.opts.MaxBodyBytes+1)
	lr := &countingReader{r: body}
	// The parse stops at the first line over a limit: a flood of series
	// costs what the limit allows, not what the body holds.
	exp, perr := engine.Parse(lr, engine.Limits{MaxSeries: s.opts.MaxSeries, MaxRankValues: s.opts.MaxRankValues})
	at := s.now()
	if lr.n > s.opts.MaxBodyBytes {
		perr = fmt.Errorf("body exceeds %d bytes", s.opts.MaxBodyBytes)
	}
	if perr != nil {
		s.log.Debug("parse failed", "node", t.ID, "err", perr)
		return &sample.Sample{At: at, Up: true, Engine: eng, Errors: []string{fmt.Sprintf("parse %s: %v", t.URL, withFlag(perr))}}
	}
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
