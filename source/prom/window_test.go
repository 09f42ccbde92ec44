package prom

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/source"
)

// TestWindowFleetWide1000Nodes: every one of 1,000 nodes asked, all at
// once, for a non-default window now and a week back (what
// ComparePercentiles with a baseline asks) costs two reads, each the
// queries of a refresh: not a query set per node.
func TestWindowFleetWide1000Nodes(t *testing.T) {
	nodes := synthFleet(1000, true)
	qs := append(plan(t, defaultBuilder("5m"), engine.Engines()...), plan(t, defaultBuilder("1h"), engine.Engines()...)...)
	fake := newFakeProm(t, synthBodies(qs, nodes, testNow))
	src := newTestSource(t, fake.URL, nil)
	if _, err := src.Refresh(t.Context(), "5m"); err != nil {
		t.Fatal(err)
	}
	refresh := src.QueriesLastRefresh()
	before := len(fake.Seen())

	const week = 7 * 24 * time.Hour
	var (
		wg   sync.WaitGroup
		errs = make(chan error, 2*len(nodes))
	)
	for _, n := range nodes {
		for _, offset := range []time.Duration{0, week} {
			wg.Go(func() {
				// "60m" and "1h" are one window.
				w := "60m"
				if offset > 0 {
					w = "1h"
				}
				m, err := src.Window(t.Context(), n.ID, w, offset)
				switch {
				case err != nil:
					errs <- err
				case m.GetNode() != n.ID || m.GetWindow() != "1h" || m.GetTtft().GetCount() <= 0 || m.Queue == nil:
					errs <- errors.New("incomplete answer for " + n.ID + ": " + m.String())
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sent := fake.Seen()[before:]
	at := map[string]int{}
	for _, q := range sent {
		at[q.At]++
	}
	t.Logf("1,000 nodes: a refresh sends %d queries; 2,000 on-demand answers sent %d, at %d evaluation times", refresh, len(sent), len(at))
	if len(sent) > 2*refresh {
		t.Errorf("2,000 answers over 2 windows sent %d queries, more than two refreshes' %d", len(sent), 2*refresh)
	}
	if len(at) != 2 {
		t.Errorf("queries at %d evaluation times, want 2 (now and a week ago): %v", len(at), at)
	}
}

// TestWindowBudget: a read is charged to the request's budget before it is
// sent (refused whole when the budget cannot cover it), then refunded to
// what it sent; a reused read costs nothing.
func TestWindowBudget(t *testing.T) {
	fake := fleetFake(t, defaultBuilder("1h"))
	src := newTestSource(t, fake.URL, nil)
	planned := src.planned(src.builder(time.Hour, false))

	small := source.NewBudget(planned - 1)
	_, err := src.Window(source.WithBudget(t.Context(), small), "vllm-a:8000", "1h", 0)
	if !errors.Is(err, source.ErrOverBudget) || !strings.Contains(err.Error(), "budget of "+strconv.Itoa(planned-1)) {
		t.Fatalf("err = %v, want ErrOverBudget naming the budget of %d", err, planned-1)
	}
	if n := fake.Queries.Load(); n != 0 || small.Used() != 0 {
		t.Fatalf("a refused read sent %d queries and spent %d", n, small.Used())
	}

	b := source.NewBudget(planned)
	if _, err := src.Window(source.WithBudget(t.Context(), b), "vllm-a:8000", "1h", 0); err != nil {
		t.Fatal(err)
	}
	sent := int(fake.Queries.Load())
	if b.Used() != sent || sent >= planned {
		t.Errorf("spent %d of the budget, sent %d queries (at most %d planned)", b.Used(), sent, planned)
	}

	again := source.NewBudget(1)
	if _, err := src.Window(source.WithBudget(t.Context(), again), "sglang-a:30000", "1h", 0); err != nil {
		t.Fatal(err)
	}
	if again.Used() != 0 || int(fake.Queries.Load()) != sent {
		t.Errorf("a reused read spent %d and sent %d queries", again.Used(), int(fake.Queries.Load())-sent)
	}
}

// TestWindowReuseBounded: a read is reused until source.Reuse says, and
// the reads held fit in Config.WindowCacheBytes.
func TestWindowReuseBounded(t *testing.T) {
	var now atomic.Int64
	now.Store(testNow.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	for _, tc := range []struct {
		name        string
		maxBytes    int64
		advance     time.Duration
		sameRequest bool // both reads with one budget
		wantReads   int
	}{
		{"reused", 64 << 20, 0, false, 1},
		{"reused until it expires", 64 << 20, 15*time.Second - time.Millisecond, false, 1},
		{"expired", 64 << 20, 15 * time.Second, false, 2},
		{"over the byte bound", 1, 0, false, 2},
		{"expired, for the request that read it", 64 << 20, time.Hour, true, 1},
		{"over the byte bound, for the request that read it", 1, 0, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now.Store(testNow.UnixNano())
			fake := fleetFake(t, defaultBuilder("1h"))
			src, err := New(Config{URL: fake.URL, Timeout: 5 * time.Second, WindowCacheBytes: tc.maxBytes}, quietLog(), clock)
			if err != nil {
				t.Fatal(err)
			}
			first := source.WithBudget(t.Context(), source.NewBudget(1000))
			if _, err := src.Window(first, "vllm-a:8000", "1h", time.Hour); err != nil {
				t.Fatal(err)
			}
			one := fake.Queries.Load()
			now.Add(int64(tc.advance))
			second := source.WithBudget(t.Context(), source.NewBudget(1000))
			if tc.sameRequest {
				second = first
			}
			if _, err := src.Window(second, "sglang-a:30000", "1h", time.Hour); err != nil {
				t.Fatal(err)
			}
			if reads := fake.Queries.Load() / one; reads != int64(tc.wantReads) || fake.Queries.Load()%one != 0 {
				t.Errorf("%d queries, %d a read: want %d reads", fake.Queries.Load(), one, tc.wantReads)
			}
			src.windows.mu.Lock()
			defer src.windows.mu.Unlock()
			if src.windows.size > max(tc.maxBytes, 0) || src.windows.size < 0 {
				t.Errorf("%d bytes held, bound %d", src.windows.size, tc.maxBytes)
			}
		})
	}
}

// TestInFlightLimits: on-demand reads never hold more than their slots,
// all queries together never more than theirs, and a refresh completes
// while on-demand queries hang in Prometheus and fill every on-demand slot.
func TestInFlightLimits(t *testing.T) {
	fake := fleetFake(t, defaultBuilder("5m"))
	const maxAll, maxOnDemand = 6, 2
	var (
		release               = make(chan struct{})
		all, onDemand         atomic.Int64
		peakAll, peakOnDemand atomic.Int64
		refreshAt             = strconv.FormatInt(testNow.Unix(), 10)
		inner                 = fake.Config.Handler
		peak                  = func(p *atomic.Int64, v int64) {
			for o := p.Load(); v > o && !p.CompareAndSwap(o, v); o = p.Load() {
			}
		}
		releaseOnce sync.Once
		stop        = func() { releaseOnce.Do(func() { close(release) }) }
	)
	t.Cleanup(stop)
	fake.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			inner.ServeHTTP(w, r) // the targets API: no query
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		peak(&peakAll, all.Add(1))
		defer all.Add(-1)
		if strings.TrimSuffix(r.Form.Get("time"), ".000") != refreshAt {
			// On demand: hang until released.
			peak(&peakOnDemand, onDemand.Add(1))
			defer onDemand.Add(-1)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
	src := newTestSource(t, fake.URL, func(c *Config) {
		c.Timeout, c.MaxInFlight, c.OnDemandInFlight = time.Minute, maxAll, maxOnDemand
	})

	var windows sync.WaitGroup
	for i := range 5 {
		windows.Go(func() {
			if _, err := src.Window(context.Background(), "vllm-a:8000", "1h", time.Duration(i+1)*time.Hour); err != nil {
				t.Errorf("window %dh ago: %v", i+1, err)
			}
		})
	}
	testkit.Eventually(t, 30*time.Second, "on-demand queries to fill their slots", func() bool { return onDemand.Load() == maxOnDemand })

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	obs, err := src.Refresh(ctx, "5m")
	if err != nil || len(obs) == 0 {
		t.Fatalf("refresh beside stuck on-demand reads: %d nodes, %v", len(obs), err)
	}
	if n := onDemand.Load(); n != maxOnDemand {
		t.Errorf("%d on-demand queries in flight after the refresh, want still %d", n, maxOnDemand)
	}
	stop()
	windows.Wait()
	if p := peakOnDemand.Load(); p != maxOnDemand {
		t.Errorf("peak on-demand queries in flight %d, want %d", p, maxOnDemand)
	}
	if p := peakAll.Load(); p > maxAll {
		t.Errorf("peak queries in flight %d, over the limit of %d", p, maxAll)
	}
	t.Logf("peak in flight: %d of %d, on demand %d of %d", peakAll.Load(), maxAll, peakOnDemand.Load(), maxOnDemand)
}
