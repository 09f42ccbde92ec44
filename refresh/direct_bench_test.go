package refresh_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sim"
	"github.com/llmdiag/llmdiag/source/scrape"
	"github.com/llmdiag/llmdiag/store/memory"
)

// BenchmarkDirectScrape is what a refresh of nodes scraped directly costs
// per node once every node's sample ring is full: the whole refresh of
// `llmdiag serve --fleet` (Loop.Once over a scrape.Scraper, into the
// memory store, with serve's defaults: --interval 5s, --retention 1h,
// --stale-after 30s, the 5m window), in simulated time.
//
// The nodes are the seed simulator's (sim.Scenario "seed", seed 1, after
// its warm-up): node i reads as the seed's node i mod 5 (two DeepSeek
// nodes of 8 engine cores and ~172 KB expositions, two GLM, one Kimi),
// each with its DCGM exporter. Every cycle the simulation steps 5 s, its
// ten expositions are rendered once, and a clock the scraper, the loop
// and the store read moves to the simulated time; the scraper's client
// answers from the rendered bytes (no sockets). The rendering and the
// stepping are never measured.
//
// After 720 cycles (every ring full, every node's store history full),
// five more cycles run back to back, their expositions rendered before
// them, and each is measured with getrusage (RUSAGE_SELF: every thread,
// the garbage collector included):
//
//   - cpu-ms/node/refresh: the median of the five cycles' CPU time, per
//     node; cpu-ms/node/refresh-mean is the five's total over five (a
//     collection that began in one cycle is paid in the next);
//   - allocs/node/refresh and B/node/refresh: the heap allocations of the
//     five cycles, per cycle and node (runtime.MemStats, read outside the
//     measured spans);
//   - live-B/node: the heap in use after collections (liveHeap), once the rings are
//     full, over that before the scraper, the loop and the store existed,
//     per node; it includes what does not grow with the nodes (the series
//     memos, the store's event feed), so nodes=100 also reports
//     live-B/node-marginal: its heap over the median of the nodes=10 runs
//     before it in the same process (with -count, every nodes=10 run
//     comes first), per node added, what each node costs;
//   - fill-cpu-ms/node/refresh: the mean over the 720 cycles that filled
//     the rings (their collections included).
//
// It drives the Scraper through its public API only, so it measures
// whatever the scraper keeps its samples in. Run it with -benchtime 1x:
// one run is one whole fill (on two cores shared with other work,
// nodes=10 in 10–20 s, nodes=100 in under a minute to a few, as the
// refresh costs); -count 5 for medians across runs, -bench
// 'DirectScrape/nodes=10$' for a quick one.
func BenchmarkDirectScrape(b *testing.B) {
	var small []float64 // live heap of the nodes=10 runs so far
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				live := benchDirect(b, n)
				if n == 10 {
					small = append(small, float64(live))
				} else if len(small) > 0 {
					b.ReportMetric((float64(live)-median(small))/float64(n-10), "live-B/node-marginal")
				}
			}
		})
	}
}

// Serve's defaults the benchmark runs with.
const (
	directInterval = 5 * time.Second
	directRing     = 720 // --retention 1h at --interval 5s
	directMeasured = 5
)

// directEpoch is the clock's time at simulated time 0.
var directEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// benchDirect runs the benchmark at n nodes and returns the live heap the
// nodes hold.
func benchDirect(b *testing.B, n int) int64 {
	cfg, err := sim.Scenario("seed", 1)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Warmup = sim.SeedWarmup
	f, err := sim.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	f.Step(cfg.Warmup)
	seed := f.FleetFile().Nodes
	tr := &renderedTransport{}

	var clockNS atomic.Int64
	now := func() time.Time { return time.Unix(0, clockNS.Load()).UTC() }
	step := func() (rendered, time.Time) {
		f.Step(directInterval)
		r := make(rendered, 2*len(seed))
		for _, s := range seed {
			m, err := f.Metrics(s.ID)
			if err != nil {
				b.Fatal(err)
			}
			d, err := f.DCGM(s.ID)
			if err != nil {
				b.Fatal(err)
			}
			r["/"+s.ID+"/metrics"], r["/"+s.ID+sim.DCGMPath] = m, d
		}
		return r, directEpoch.Add(f.Now())
	}

	heap0 := liveHeap()

	// The fleet: node i is the seed's node i mod 5, its engine and DCGM
	// URLs the transport's paths for that node.
	targets := make([]fleet.Node, n)
	byID := make(map[string]fleet.Node, n)
	for i := range targets {
		s := seed[i%len(seed)]
		t := s
		t.ID = fmt.Sprintf("node-%04d", i)
		t.URL = "http://sim/" + s.ID + "/metrics"
		t.DCGM = "http://sim/" + s.ID + sim.DCGMPath
		targets[i], byID[t.ID] = t, t
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second // serve's --stale-after
	st := memory.New(memory.Options{Now: now}, "bench")
	// Generous deadlines: two cores shared with other work must not make
	// a scrape miss its refresh (checked below).
	scraper := scrape.New(targets, &http.Client{Transport: tr}, discardLog(), now, scrape.Options{
		Timeout: time.Minute, StaleAfter: th.StaleAfter, LongRetention: refresh.SLORetention(th),
		FullResolution: scrape.FullResolution(metrics.DefaultWindow, directInterval),
	})
	loop := refresh.New(scraper, st, &nopRecorder{}, discardLog(), now, refresh.Config{
		Interval: directInterval, Timeout: 2 * time.Minute, Thresholds: th, Fleet: byID, Retention: time.Hour,
	})
	ctx := b.Context()
	cycle := func(r rendered, at time.Time) {
		tr.bodies.Store(&r)
		clockNS.Store(at.UnixNano())
		if err := loop.Once(ctx); err != nil {
			b.Fatal(err)
		}
	}

	// Fill every ring.
	var fillCPU time.Duration
	for range directRing {
		r, at := step()
		cpu0 := cpuTime(b)
		cycle(r, at)
		fillCPU += cpuTime(b) - cpu0
	}
	// The measured cycles, rendered first, then run back to back.
	steps := make([]rendered, directMeasured)
	ats := make([]time.Time, directMeasured)
	for i := range steps {
		steps[i], ats[i] = step()
	}
	cpus := make([]float64, directMeasured)
	var ms0, ms1 runtime.MemStats
	var allocs, bytes uint64
	var total time.Duration
	for i := range steps {
		runtime.ReadMemStats(&ms0)
		cpu0 := cpuTime(b)
		cycle(steps[i], ats[i])
		cpu := cpuTime(b) - cpu0
		runtime.ReadMemStats(&ms1)
		cpus[i] = float64(cpu) / float64(n)
		total += cpu
		allocs += ms1.Mallocs - ms0.Mallocs
		bytes += ms1.TotalAlloc - ms0.TotalAlloc
		checkDirect(b, st, n, ats[i])
	}
	steps = nil
	tr.bodies.Store(nil)
	live := int64(liveHeap()) - int64(heap0)
	runtime.KeepAlive(loop)
	runtime.KeepAlive(st)
	runtime.KeepAlive(scraper)

	b.ReportMetric(median(cpus)/1e6, "cpu-ms/node/refresh")
	b.ReportMetric(float64(total)/directMeasured/float64(n)/1e6, "cpu-ms/node/refresh-mean")
	b.ReportMetric(float64(fillCPU)/directRing/float64(n)/1e6, "fill-cpu-ms/node/refresh")
	b.ReportMetric(float64(allocs)/directMeasured/float64(n), "allocs/node/refresh")
	b.ReportMetric(float64(bytes)/directMeasured/float64(n), "B/node/refresh")
	b.ReportMetric(float64(live)/float64(n), "live-B/node")
	return live
}

// checkDirect fails the benchmark unless the refresh at at stored every
// node read afresh at at, up and without errors.
func checkDirect(b *testing.B, st *memory.Store, n int, at time.Time) {
	b.Helper()
	recs, err := st.List(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	if len(recs) != n {
		b.Fatalf("%d nodes stored, want %d", len(recs), n)
	}
	for _, rec := range recs {
		m := rec.Metrics
		if !m.GetUp() || m.GetStale() || len(m.GetErrors()) > 0 || !m.GetObservedAt().AsTime().Equal(at) || m.GetGpu() == nil {
			b.Fatalf("%s: up %v, stale %v, errors %q, observed %v (want %v), gpu %v", rec.Node.GetId(), m.GetUp(), m.GetStale(), m.GetErrors(), m.GetObservedAt().AsTime(), at, m.GetGpu() != nil)
		}
		if got := m.GetCovered().AsDuration(); got != 5*time.Minute {
			b.Fatalf("%s: window covered %v, want 5m", rec.Node.GetId(), got)
		}
	}
}

// rendered is one step's expositions by URL path.
type rendered map[string][]byte

// renderedTransport answers GETs from the expositions of the step in
// bodies, as a node's exporter would over HTTP.
type renderedTransport struct{ bodies atomic.Pointer[rendered] }

func (t *renderedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	code, body := http.StatusOK, []byte(nil)
	if r := t.bodies.Load(); r != nil {
		body = (*r)[req.URL.Path]
	}
	ct := "text/plain; version=0.0.4; charset=utf-8"
	if body == nil {
		code, body, ct = http.StatusNotFound, []byte("not found\n"), "text/plain"
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {ct}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// liveHeap is the heap in use after two collections: the first leaves
// what sync.Pools hold (the parse buffers) to the second, which frees it.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	return heapAlloc()
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
