package expofarm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Reader reads one node's endpoint: the work a benchmark measures. Read
// must return by ctx's deadline; an error counts the read as failed.
type Reader interface {
	Read(ctx context.Context, url string) error
}

// ReaderFunc is a Reader of a function.
type ReaderFunc func(ctx context.Context, url string) error

// Read implements Reader.
func (f ReaderFunc) Read(ctx context.Context, url string) error { return f(ctx, url) }

// Bounds of Drive.
const (
	// MaxDriveNodes bounds DriveConfig.URLs: Drive runs a goroutine per
	// node.
	MaxDriveNodes = 100000
	// MaxInFlight bounds DriveConfig.MaxInFlight.
	MaxInFlight = 4096
)

// DriveConfig configures Drive. Zero values take the defaults shown.
type DriveConfig struct {
	// URLs are the nodes' endpoints, one per node (required).
	URLs []string
	// Interval is each node's cadence (default 250ms).
	Interval time.Duration
	// Jitter delays each tick of each node by a random time below it
	// (default Interval/10; negative for none). Every node's ticks also
	// start at a random phase of the interval.
	Jitter time.Duration
	// Warmup is how long nodes are read before the measured span starts
	// (default 1s).
	Warmup time.Duration
	// Span is the measured span (default 5s).
	Span time.Duration
	// Timeout bounds one read (default 4·Interval).
	Timeout time.Duration
	// MaxInFlight bounds the reads running at once (default 64): a tick
	// that finds them all taken is skipped, not queued.
	MaxInFlight int
	// Seed fixes the phases and jitter (default 1).
	Seed uint64
	// CPU is the CPU time the measurement reads (default CPUTime: this
	// process's).
	CPU func() time.Duration
}

// Result is what Drive measured over its span.
type Result struct {
	Wall time.Duration `json:"wall"` // the span, as measured
	CPU  time.Duration `json:"cpu"`  // CPU time used over it
	// Due counts the ticks in the span (nodes × span / interval, give or
	// take the jitter at the span's ends).
	Due int64 `json:"due"`
	// Reads counts the reads of ticks in the span; Failed of them
	// returned an error (FirstError is the first one's). Every tick due is
	// a read, Busy or NoSlot.
	Reads, Failed int64
	FirstError    string `json:"first_error,omitempty"`
	// Busy counts the ticks skipped because the node's previous read was
	// still running, NoSlot those skipped because MaxInFlight reads were.
	Busy, NoSlot int64
}

// Cores is the CPU time used per second of wall time.
func (r Result) Cores() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return r.CPU.Seconds() / r.Wall.Seconds()
}

// CPUPerRead is the CPU time per read (of every read, failed or not).
func (r Result) CPUPerRead() time.Duration {
	if r.Reads == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Reads)
}

// Demand is the cores it would take to read every due tick at
// CPUPerRead: Cores when no tick was skipped, more when the machine could
// not keep up.
func (r Result) Demand() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return r.CPUPerRead().Seconds() * float64(r.Due) / r.Wall.Seconds()
}

// Metrics is the result as benchmark metrics, unit to value: cores,
// cpu-us/read, demand-cores, read-% (reads of due ticks), fail-%.
func (r Result) Metrics() map[string]float64 {
	m := map[string]float64{
		"cores":        r.Cores(),
		"cpu-us/read":  float64(r.CPUPerRead()) / 1e3,
		"demand-cores": r.Demand(),
	}
	if r.Due > 0 {
		m["read-%"] = 100 * float64(r.Reads) / float64(r.Due)
	}
	if r.Reads > 0 {
		m["fail-%"] = 100 * float64(r.Failed) / float64(r.Reads)
	}
	return m
}

// Drive reads every URL every cfg.Interval with rd, each node on its own
// schedule (a random phase, a random jitter per tick), for cfg.Warmup and
// then cfg.Span, and returns what it measured over the span. A node's
// tick that comes while its previous read runs is skipped (Busy), as is
// one that finds cfg.MaxInFlight reads running (NoSlot): nothing queues.
// Drive returns when every read it started has ended (those in flight at
// the span's end are counted, not cancelled); it fails on a bad config or
// when ctx ends first, cancelling the reads.
func Drive(ctx context.Context, cfg DriveConfig, rd Reader) (Result, error) {
	if err := cfg.defaults(); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6578706f6661726d))
	start := time.Now()
	measure := start.Add(cfg.Warmup)
	end := measure.Add(cfg.Span)
	var (
		slots = make(chan struct{}, cfg.MaxInFlight)
		c     counters
		wg    sync.WaitGroup
	)
	for _, u := range cfg.URLs {
		n := &driven{
			url: u, cfg: &cfg, rd: rd, slots: slots, c: &c, measure: measure, end: end,
			rng:  rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())),
			next: start.Add(time.Duration(rng.Int64N(int64(cfg.Interval)))),
		}
		wg.Go(func() { n.run(ctx) })
	}
	var res Result
	var cpu0 time.Duration
	var w0 time.Time
	at := func(t time.Time) error {
		tm := time.NewTimer(time.Until(t))
		defer tm.Stop()
		select {
		case <-tm.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := at(measure)
	if err == nil {
		cpu0, w0 = cfg.CPU(), time.Now()
		err = at(end)
		res.CPU, res.Wall = cfg.CPU()-cpu0, time.Since(w0)
	}
	if err != nil {
		cancel()
	}
	// The nodes stop at the span's end; reads in flight end by their
	// deadline.
	wg.Wait()
	if err != nil {
		return Result{}, fmt.Errorf("drive: %w", err)
	}
	res.Due, res.Reads, res.Failed = c.due.Load(), c.reads.Load(), c.failed.Load()
	res.Busy, res.NoSlot = c.busy.Load(), c.noSlot.Load()
	if e := c.firstErr.Load(); e != nil {
		res.FirstError = *e
	}
	return res, nil
}

func (cfg *DriveConfig) defaults() error {
	if len(cfg.URLs) == 0 || len(cfg.URLs) > MaxDriveNodes {
		return fmt.Errorf("drive: %d urls: want 1..%d", len(cfg.URLs), MaxDriveNodes)
	}
	if cfg.Interval == 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Jitter == 0 {
		cfg.Jitter = cfg.Interval / 10
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = time.Second
	}
	if cfg.Span == 0 {
		cfg.Span = 5 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 4 * cfg.Interval
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.CPU == nil {
		cfg.CPU = CPUTime
	}
	switch {
	case cfg.Interval < time.Millisecond:
		return fmt.Errorf("drive: interval %s: at least 1ms", cfg.Interval)
	case cfg.Jitter >= cfg.Interval:
		return fmt.Errorf("drive: jitter %s: below the interval (%s)", cfg.Jitter, cfg.Interval)
	case cfg.Warmup < 0:
		return fmt.Errorf("drive: warmup %s: negative", cfg.Warmup)
	case cfg.Span <= 0 || cfg.Span > time.Hour:
		return fmt.Errorf("drive: span %s: want above 0, at most 1h", cfg.Span)
	case cfg.Timeout < 0:
		return fmt.Errorf("drive: timeout %s: negative", cfg.Timeout)
	case cfg.MaxInFlight < 0 || cfg.MaxInFlight > MaxInFlight:
		return fmt.Errorf("drive: max in flight %d: want 1..%d", cfg.MaxInFlight, MaxInFlight)
	}
	cfg.Jitter = max(0, cfg.Jitter)
	return nil
}

type counters struct {
	due, reads, failed, busy, noSlot atomic.Int64
	firstErr                         atomic.Pointer[string]
}

// driven is one node Drive reads.
type driven struct {
	url          string
	cfg          *DriveConfig
	rd           Reader
	slots        chan struct{}
	c            *counters
	measure, end time.Time
	rng          *rand.Rand
	next         time.Time // the next tick, before jitter
}

// run reads the node at each tick until end.
func (n *driven) run(ctx context.Context) {
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	for {
		tick := n.next
		if n.cfg.Jitter > 0 {
			tick = tick.Add(time.Duration(n.rng.Int64N(int64(n.cfg.Jitter))))
		}
		n.next = n.next.Add(n.cfg.Interval)
		if !tick.Before(n.end) {
			return
		}
		tm.Reset(time.Until(tick))
		select {
		case <-tm.C:
		case <-ctx.Done():
			return
		}
		measured := !tick.Before(n.measure)
		if measured {
			n.c.due.Add(1)
		}
		select {
		case n.slots <- struct{}{}:
		default:
			if measured {
				n.c.noSlot.Add(1)
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
		err := n.rd.Read(rctx, n.url)
		cancel()
		<-n.slots
		if measured {
			n.c.reads.Add(1)
			if err != nil {
				n.c.failed.Add(1)
				msg := err.Error()
				n.c.firstErr.CompareAndSwap(nil, &msg)
			}
		}
		// Skip the ticks that came while reading.
		for now := time.Now(); n.next.Before(now) && n.next.Before(n.end); n.next = n.next.Add(n.cfg.Interval) {
			if !n.next.Before(n.measure) {
				n.c.due.Add(1)
				n.c.busy.Add(1)
			}
		}
	}
}

// CPUTime is the user and system CPU time of this process so far: all its
// threads (the GC's too), not its children.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
