package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Call is one kind of call.
type Call struct {
	// Name names the kind in the result.
	Name string
	// Do makes one call: the i-th of its measurement (or warm-up), from
	// worker w (0 to the concurrency less one). A caller can spread workers
	// over connections by w, and requests over subjects by i.
	Do func(ctx context.Context, w, i int) error
}

// Config bounds a run. Zero values take the defaults.
type Config struct {
	// Concurrency lists the concurrencies to measure at (default 1 and 8).
	Concurrency []int
	// Calls is the number of calls of one kind at one concurrency in one
	// round (default 2000).
	Calls int
	// Rounds is the number of rounds (default 3).
	Rounds int
	// Warmup is the number of calls of each kind made before the first
	// round, at the highest concurrency, and not measured (default 200;
	// negative: none).
	Warmup int
	// Timeout bounds one call (default 10s).
	Timeout time.Duration
	// Duration bounds the whole run (default 10 minutes).
	Duration time.Duration
	// Now is the clock latencies are read from (default time.Now).
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultCalls    = 2000
	DefaultRounds   = 3
	DefaultWarmup   = 200
	DefaultTimeout  = 10 * time.Second
	DefaultDuration = 10 * time.Minute
)

// DefaultConcurrency is Config.Concurrency's default.
func DefaultConcurrency() []int { return []int{1, 8} }

func (c Config) withDefaults() Config {
	if len(c.Concurrency) == 0 {
		c.Concurrency = DefaultConcurrency()
	}
	if c.Calls <= 0 {
		c.Calls = DefaultCalls
	}
	if c.Rounds <= 0 {
		c.Rounds = DefaultRounds
	}
	switch {
	case c.Warmup == 0:
		c.Warmup = DefaultWarmup
	case c.Warmup < 0:
		c.Warmup = 0
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Check reports what is wrong with c's explicit values (a concurrency below
// 1, or negative counts), naming the field.
func (c Config) Check() error {
	for _, n := range c.Concurrency {
		if n < 1 {
			return fmt.Errorf("concurrency %d: want at least 1", n)
		}
	}
	switch {
	case c.Calls < 0:
		return fmt.Errorf("calls %d: want at least 1", c.Calls)
	case c.Rounds < 0:
		return fmt.Errorf("rounds %d: want at least 1", c.Rounds)
	case c.Timeout < 0:
		return fmt.Errorf("timeout %v: want more than 0", c.Timeout)
	case c.Duration < 0:
		return fmt.Errorf("duration %v: want more than 0", c.Duration)
	}
	return nil
}

// Row is one kind of call at one concurrency: medians over the rounds
// measured.
type Row struct {
	Call        string
	Concurrency int
	P50         time.Duration
	P90         time.Duration
	P99         time.Duration
	// PerSecond is calls completed a second.
	PerSecond float64
	// Ratio is P50 over the floor's P50 at the same concurrency, taken per
	// round (1 for the floor itself).
	Ratio float64
}

// Result is what Run measured.
type Result struct {
	// Rows are in the order of the concurrencies, then of the calls.
	Rows []Row
	// Rounds is the number of rounds measured: fewer than asked when
	// Duration passed first.
	Rounds int
	// Elapsed is the run's time, warm-up included.
	Elapsed time.Duration
}

// ErrNoRound is returned when Duration passed before one round ended.
var ErrNoRound = errors.New("loadtest: no round finished within the duration")

// Run warms up and measures calls, the first of which is the floor; see
// the package documentation.
func Run(ctx context.Context, cfg Config, calls []Call) (Result, error) {
	if err := cfg.Check(); err != nil {
		return Result{}, err
	}
	if len(calls) == 0 {
		return Result{}, errors.New("loadtest: no calls")
	}
	cfg = cfg.withDefaults()
	start := cfg.Now()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	// over tells an error of a call from the end of the run's time.
	over := func() bool { return parent.Err() == nil && ctx.Err() != nil }

	top := slices.Max(cfg.Concurrency)
	for _, c := range calls {
		if _, err := measure(ctx, cfg, c, top, cfg.Warmup); err != nil {
			if over() {
				return result(nil, cfg, calls, cfg.Now().Sub(start))
			}
			return Result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	// rounds[r][k][j]: round r, concurrency k, call j.
	var rounds [][][]sample
	for range cfg.Rounds {
		round := make([][]sample, len(cfg.Concurrency))
		for k, conc := range cfg.Concurrency {
			for _, c := range calls {
				s, err := measure(ctx, cfg, c, conc, cfg.Calls)
				if err != nil {
					if over() {
						return result(rounds, cfg, calls, cfg.Now().Sub(start))
					}
					return Result{}, err
				}
				round[k] = append(round[k], s)
			}
		}
		rounds = append(rounds, round)
	}
	return result(rounds, cfg, calls, cfg.Now().Sub(start))
}

// sample is one measurement: one kind at one concurrency in one round.
type sample struct {
	p50, p90, p99 time.Duration
	perSecond     float64
}

// measure makes n calls of c from conc workers.
func measure(ctx context.Context, cfg Config, c Call, conc, n int) (sample, error) {
	if n == 0 {
		return sample{}, nil
	}
	lat := make([]time.Duration, n)
	var next atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once  sync.Once
		first error
	)
	fail := func(err error) {
		once.Do(func() { first = err; cancel() })
	}
	begin := cfg.Now()
	var wg sync.WaitGroup
	for w := range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				cctx, ccancel := context.WithTimeout(ctx, cfg.Timeout)
				at := cfg.Now()
				err := c.Do(cctx, w, i)
				lat[i] = cfg.Now().Sub(at)
				ccancel()
				if err != nil {
					fail(fmt.Errorf("%s (concurrency %d): %w", c.Name, conc, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return sample{}, first
	}
	if err := ctx.Err(); err != nil { // the run's end: calls left unmade
		return sample{}, err
	}
	wall := cfg.Now().Sub(begin)
	slices.Sort(lat)
	s := sample{p50: rank(lat, 0.50), p90: rank(lat, 0.90), p99: rank(lat, 0.99)}
	if wall > 0 {
		s.perSecond = float64(n) / wall.Seconds()
	}
	return s, nil
}

// rank is the q-quantile of sorted by nearest rank.
func rank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// result folds the rounds into rows.
func result(rounds [][][]sample, cfg Config, calls []Call, elapsed time.Duration) (Result, error) {
	if len(rounds) == 0 {
		return Result{}, fmt.Errorf("%w (%v): lower the calls or the rounds, or allow more time", ErrNoRound, cfg.Duration)
	}
	res := Result{Rounds: len(rounds), Elapsed: elapsed}
	for k, conc := range cfg.Concurrency {
		for j, c := range calls {
			var p50, p90, p99 []time.Duration
			var rate, ratio []float64
			for _, r := range rounds {
				s, floor := r[k][j], r[k][0]
				p50, p90, p99 = append(p50, s.p50), append(p90, s.p90), append(p99, s.p99)
				rate = append(rate, s.perSecond)
				if floor.p50 > 0 {
					ratio = append(ratio, float64(s.p50)/float64(floor.p50))
				}
			}
			row := Row{Call: c.Name, Concurrency: conc, P50: median(p50), P90: median(p90), P99: median(p99), PerSecond: median(rate)}
			if len(ratio) > 0 {
				row.Ratio = median(ratio)
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

// median is the middle of xs (the mean of the two middle ones for an even
// count).
func median[T time.Duration | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
