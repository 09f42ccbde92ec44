package routertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/expofarm"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestExpofarmChild is the exposition farm of BenchmarkFastLaneToView, in
// the child process expofarm.StartChild runs; elsewhere it skips.
func TestExpofarmChild(t *testing.T) { expofarm.ServeChild(t) }

const benchNodes = 1000

// benchViews is the number of views: 100, or FL_VIEWS (to see what the
// views themselves cost: they share the 2 cores with serve).
var benchViews = 100

func init() {
	if v, err := strconv.Atoi(os.Getenv("FL_VIEWS")); err == nil && v > 0 {
		benchViews = v
	}
}

// BenchmarkFastLaneToView measures how long a router waits for a gauge
// change: 1,000 vLLM endpoints of 172 KB (internal/testing/expofarm, in a child
// process) whose routing gauges step between idle and saturated every
// half period: 2 s (period=4s, expofarm.DefaultSteps: 500 routability
// changes a second in all, 50,000 deliveries to the views, a stress far
// beyond a real fleet's) or 10 s (period=20s: 100 changes a second). They
// are read by `llmdiag serve` in this process with the fast lane every
// 250 ms and the refresh every 5 s (serve's default) or 30 s (its scrapes
// spread over half of it, serve's default with the fast lane), and 100
// client.Views are subscribed to the whole fleet (each its own client and
// connection, as 100 routers). A flip is a view's routability of a node
// changing; its latency runs from the endpoint's gauge change
// (Steps.LastChange) to the moment the view has applied the event (its
// event hook). The hysteresis holds a change for two fast reads, so the
// floor is one to two fast intervals.
//
// Run it with -benchtime 1x (and -v for the fast lane's counters).
// Reported: p50-ms, p99-ms and max-ms of the flips over a span that
// begins 10 s after the first refresh (and lasts 12 s, or the interval
// and 5 s, so that it takes in a refresh), flips/view, nodes-% (nodes
// that flipped in every view), unknown-flips-% (flips to UNKNOWN or DOWN:
// the refresh's, not the gauges'), behind-flips-% (flips that disagree
// with the gauges: late for the change before), cores (this process's
// CPU: serve's refresh, fast lane, store and streams, and the views) and
// farm-cores (the farm's). FL_VIEWS=10 runs 10 views instead of 100: the
// views share the 2 cores with serve, as routers would not.
func BenchmarkFastLaneToView(b *testing.B) {
	for _, interval := range []time.Duration{5 * time.Second, 30 * time.Second} {
		for _, period := range []time.Duration{4 * time.Second, 20 * time.Second} {
			b.Run(fmt.Sprintf("nodes=%d/views=%d/interval=%s/period=%s", benchNodes, benchViews, interval, period), func(b *testing.B) {
				steps := expofarm.DefaultSteps(benchNodes)
				steps.Period, steps.Stagger = period, period/benchNodes
				fastToView(b, interval, steps)
			})
		}
	}
}

// fastToView is BenchmarkFastLaneToView with steps.
func fastToView(b *testing.B, interval time.Duration, steps expofarm.Steps) {
	child := expofarm.StartChild(b, "TestExpofarmChild", expofarm.Spec{Nodes: benchNodes, Steps: steps})
	f := fleet.File{}
	for i, u := range child.URLs {
		f.Nodes = append(f.Nodes, fleet.Node{ID: fmt.Sprintf("node-%04d", i), URL: u, Engine: "vllm", Model: "m"})
	}
	data, err := f.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetPath, data, 0o600); err != nil {
		b.Fatal(err)
	}
	// The farm's counters never move (internal/testing/expofarm): with requests
	// running, the STALLED rule would read every node as a hung engine
	// (not routable) after 3 refreshes. Nothing here is stalled.
	thresholdsPath := filepath.Join(dir, "thresholds.yaml")
	if err := os.WriteFile(thresholdsPath, []byte("stalled_min_for: 1000h\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var serveErr testkit.SyncBuffer
	wg.Go(func() {
		env := cli.Env{Getenv: func(string) string { return "" }, Stdout: &testkit.SyncBuffer{}, Stderr: &serveErr}
		if err := cli.Run(ctx, []string{"serve", "--fleet", fleetPath, "--listen", addr, "--log-level", "warn",
			"--fast-interval", "250ms", "--interval", interval.String(), "--thresholds", thresholdsPath, "--max-streams-per-principal", "0"}, env); err != nil && ctx.Err() == nil {
			b.Errorf("serve: %v\n%s", err, serveErr.String())
		}
	})

	index := make(map[string]int, benchNodes)
	for i, n := range f.Nodes {
		index[n.ID] = i
	}
	// Each view records its flips on its own goroutine (the hook's).
	type recorder struct {
		last  map[string]bool
		from  time.Time // flips before it are warm-up
		lat   []time.Duration
		nodes map[string]bool
		// unknown counts the flips to a status that is no reading
		// (UNKNOWN, DOWN): the refresh's, not the gauges'.
		unknown int
		// behind counts the flips that disagree with the gauges now:
		// flips of the change before this one.
		behind int
	}
	var mu sync.Mutex // guards from across the recorders
	var from time.Time
	recs := make([]*recorder, benchViews)
	views := make([]*client.View, benchViews)
	for v := range benchViews {
		c, err := client.New("http://"+addr, client.WithProtocol(client.ProtocolGRPC))
		if err != nil {
			b.Fatal(err)
		}
		r := &recorder{last: map[string]bool{}, nodes: map[string]bool{}}
		recs[v] = r
		views[v] = c.Watch(ctx, client.Selector{Model: "m", Heartbeat: 5 * time.Second}, client.WithEventHook(func(ev *llmdiagv1.StreamHealthResponse) {
			h := ev.GetHealth()
			if h == nil {
				return
			}
			now := time.Now()
			id, ok := h.GetNode(), h.GetRoutable()
			was, known := r.last[id]
			r.last[id] = ok
			if !known || was == ok {
				return
			}
			if r.from.IsZero() {
				mu.Lock()
				r.from = from
				mu.Unlock()
				if r.from.IsZero() {
					return
				}
			}
			if now.Before(r.from) {
				return
			}
			i := index[id]
			changed := steps.LastChange(i, now)
			// The gauges now agree with the flip (saturated: not
			// routable) unless the flip is of the change before.
			if saturated := steps.Gauges(i, now) == steps.High; saturated == ok {
				changed = changed.Add(-steps.Period / 2)
				r.behind++
			}
			if st := h.GetStatus(); st == llmdiagv1.Status_STATUS_UNKNOWN || st == llmdiagv1.Status_STATUS_DOWN {
				r.unknown++
			}
			r.lat = append(r.lat, now.Sub(changed))
			r.nodes[id] = true
		}))
	}
	for _, v := range views {
		select {
		case <-v.Synced():
		case <-time.After(time.Minute):
			b.Fatalf("a view did not sync within a minute: %+v\n%s", v.Status(), serveErr.String())
		}
	}
	// The fast lane reads a node once the refresh has: the span begins
	// after the first refresh.
	for deadline := time.Now().Add(2 * time.Minute); !refreshed(addr); {
		if time.Now().After(deadline) {
			b.Fatalf("no refresh within 2 minutes\n%s", serveErr.String())
		}
		time.Sleep(100 * time.Millisecond) // polling serve's /metrics, not synchronising
	}
	for b.Loop() {
		warm := time.NewTimer(10 * time.Second)
		<-warm.C
		mu.Lock()
		from = time.Now()
		mu.Unlock()
		cpu0 := expofarm.CPUTime()
		farm0, err := child.Stats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		// The span takes in at least one refresh.
		span := time.NewTimer(max(12*time.Second, interval+5*time.Second))
		<-span.C
		cpu := expofarm.CPUTime() - cpu0
		wall := time.Since(from)
		farm1, err := child.Stats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		fastMetrics(b, addr)
		cancel() // the views stop: their recorders are read below
		for _, v := range views {
			<-v.Done()
		}
		var all []time.Duration
		everywhere := map[string]int{}
		unknown, behind := 0, 0
		for _, r := range recs {
			unknown += r.unknown
			behind += r.behind
			all = append(all, r.lat...)
			for id := range r.nodes {
				everywhere[id]++
			}
		}
		if len(all) == 0 {
			b.Fatalf("no view saw a flip\n%s", serveErr.String())
		}
		slices.Sort(all)
		q := func(p float64) float64 { return float64(all[min(len(all)-1, int(p*float64(len(all))))]) / 1e6 }
		flipped := 0
		for _, n := range everywhere {
			if n == benchViews {
				flipped++
			}
		}
		b.Logf("flips' latency: p75 %.0f ms, p90 %.0f ms, p95 %.0f ms", q(0.75), q(0.90), q(0.95))
		b.ReportMetric(q(0.50), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(all[len(all)-1])/1e6, "max-ms")
		b.ReportMetric(float64(len(all))/float64(benchViews), "flips/view")
		b.ReportMetric(100*float64(flipped)/float64(benchNodes), "nodes-%")
		b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
		b.ReportMetric((farm1.CPU-farm0.CPU).Seconds()/wall.Seconds(), "farm-cores")
		b.ReportMetric(100*float64(unknown)/float64(len(all)), "unknown-flips-%")
		b.ReportMetric(100*float64(behind)/float64(len(all)), "behind-flips-%")
		if s := serveErr.String(); s != "" {
			b.Logf("serve's log:\n%s", s[:min(len(s), 4000)])
		}
	}
}

// fastMetrics logs serve's fast-lane, refresh and stream counters: how
// many fast reads were made, skipped and why, and how long they took.
func fastMetrics(b *testing.B, addr string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Logf("serve's /metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var lines []string
	for l := range strings.Lines(string(body)) {
		if (strings.HasPrefix(l, "llmdiag_fast_") || strings.Contains(l, "fanout") || strings.Contains(l, "stream") || strings.HasPrefix(l, "llmdiag_refresh")) && !strings.Contains(l, "_bucket") && !strings.HasPrefix(l, "#") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	b.Logf("fast lane:\n%s", strings.Join(lines, "\n"))
}

// refreshed reports whether serve at addr has finished a refresh.
func refreshed(addr string) bool {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for l := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(l, "llmdiag_refresh_duration_seconds_count "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && n >= 1
		}
	}
	return false
}
