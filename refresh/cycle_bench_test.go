package refresh_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/promfake"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/store/memory"
)

// TestPromfakeChild is the fake Prometheus of BenchmarkCycle, in the child
// process promfake.StartChild runs; elsewhere it skips.
func TestPromfakeChild(t *testing.T) { promfake.ServeChild(t) }

// BenchmarkCycle is one whole refresh (Loop.Once: source, diagnose, store,
// publish, sweep) of 1,000 and 10,000 vLLM nodes serving one model (2
// engine cores each, vLLM's bucket layouts: 107 buckets per node over five
// histograms) read with the Prometheus source from a fake Prometheus API on
// loopback, into the memory store, in steady state: every node already
// holds a full history (memory.DefaultHistoryLen points) and the clock
// moves on by the interval at each cycle, the fake answering at each
// query's time, and one cycle has run since (unmeasured), its garbage and
// the setup's collected. Run it with -benchtime 4x or more: the measured
// cycles then pay for their own collections, as a running loop's do.
//
// The fake runs in a child process (promfake.StartChild), so cpu-ms/op,
// this process's user and system time (getrusage of RUSAGE_SELF, every
// thread, the GC included), is llmdiag's own: not the ~100 MB of JSON the
// fake writes per refresh of 10,000 nodes. The wall time (ns/op, wall-ms/op
// and ns/node) includes waiting for the fake, which shares the machine.
//
// The nodes=10000 runs also report their per-node cost over the median of
// the nodes=1000 runs before them in the same process: per-node-x for CPU,
// per-node-x-wall for wall time (with -count, every nodes=1000 run comes
// first).
func BenchmarkCycle(b *testing.B) {
	qs, err := prom.Plan(prom.Config{}, "5m", engine.Engines()...)
	if err != nil {
		b.Fatal(err)
	}
	queries := make([]promfake.Query, len(qs))
	for i, q := range qs {
		queries[i] = promfake.Query{Expr: q.Expr, Engine: q.Engine, Shape: q.Shape, Concept: q.Concept}
	}
	var wall1k, cpu1k []float64 // per node, of the nodes=1000 runs so far
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			wall, cpu := benchCycle(b, queries, n)
			switch {
			case n == 1000:
				wall1k, cpu1k = append(wall1k, wall), append(cpu1k, cpu)
			case len(wall1k) > 0:
				b.ReportMetric(wall/median(wall1k), "per-node-x-wall")
				b.ReportMetric(cpu/median(cpu1k), "per-node-x")
			}
		})
	}
}

// median of vs, which it sorts.
func median(vs []float64) float64 {
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}

// benchCycle runs the cycles of n nodes and returns their wall and CPU time
// per node, in nanoseconds.
func benchCycle(b *testing.B, queries []promfake.Query, n int) (wall, cpu float64) {
	const interval = 5 * time.Second
	url := promfake.StartChild(b, "TestPromfakeChild", promfake.Spec{Queries: queries, Nodes: promfake.Fleet(n, false)})
	var clockNS atomic.Int64
	clockNS.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clockNS.Load()).UTC() }
	src, err := prom.New(prom.Config{URL: url, Timeout: time.Minute}, discardLog(), now)
	if err != nil {
		b.Fatal(err)
	}
	st := memory.New(memory.Options{Now: now}, "bench")
	loop := refresh.New(src, st, &nopRecorder{}, discardLog(), now, refresh.Config{
		Interval: interval, Timeout: 2 * time.Minute, Thresholds: diagnose.DefaultThresholds(),
	})
	ctx := b.Context()
	if err := loop.Once(ctx); err != nil {
		b.Fatal(err)
	}
	// A full history per node: the first refresh's point, repeated back in
	// time at the interval, its gauges and mean latency varying from one
	// refresh to the next as a live node's do (the trend is fitted on
	// distinct values, the worst case of its sort).
	recs, err := st.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if len(recs) != n {
		b.Fatalf("%d nodes stored, want %d", len(recs), n)
	}
	for j, rec := range recs {
		hist, err := st.History(ctx, rec.Node.GetId())
		if err != nil || len(hist) != 1 {
			b.Fatalf("history of %s: %d points, %v", rec.Node.GetId(), len(hist), err)
		}
		points := make([]diagnose.Point, memory.DefaultHistoryLen)
		for i := range points {
			points[i] = hist[0]
			points[i].At = hist[0].At.Add(-time.Duration(len(points)-1-i) * interval)
			if i < len(points)-1 {
				wobble := 1 + float64((i*7+j*3)%23)/100
				points[i].Queue = scaled(points[i].Queue, wobble)
				points[i].Running = scaled(points[i].Running, wobble)
				points[i].KVPressure = scaled(points[i].KVPressure, wobble/1.25)
				points[i].E2EMean = scaled(points[i].E2EMean, wobble)
			}
		}
		if _, err := st.Take(ctx, rec, points); err != nil {
			b.Fatal(err)
		}
	}
	// One cycle unmeasured: what a running loop carries from one cycle to
	// the next (each node's trend hint, the body buffers) is then as in
	// steady state.
	clockNS.Add(int64(interval))
	if err := loop.Once(ctx); err != nil {
		b.Fatal(err)
	}
	// The setup's garbage (the histories written above, some hundreds of
	// MB at 10,000 nodes) is collected now, as testing collects before a
	// benchmark, not during the measured cycles.
	runtime.GC()
	cpu0 := cpuTime(b)
	for b.Loop() {
		clockNS.Add(int64(interval))
		if err := loop.Once(ctx); err != nil {
			b.Fatal(err)
		}
	}
	cpuPerOp := float64(cpuTime(b)-cpu0) / float64(b.N)
	wallPerOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	// The last cycle read every node afresh: its last scrape (the fake's
	// scrape time is 2 s before the evaluation).
	recs, err = st.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, rec := range recs {
		if m := rec.Metrics; !m.GetUp() || m.GetStale() || !m.GetObservedAt().AsTime().Equal(now().Add(-2*time.Second)) || rec.Node.GetStatus() == llmdiagv1.Status_STATUS_UNKNOWN {
			b.Fatalf("%s: up %v, stale %v, observed %v (now %v), status %v", rec.Node.GetId(), m.GetUp(), m.GetStale(), m.GetObservedAt().AsTime(), now(), rec.Node.GetStatus())
		}
	}
	b.ReportMetric(cpuPerOp/1e6, "cpu-ms/op")
	b.ReportMetric(wallPerOp/1e6, "wall-ms/op")
	b.ReportMetric(wallPerOp/float64(n), "ns/node")
	b.ReportMetric(cpuPerOp/float64(n), "cpu-ns/node")
	return wallPerOp / float64(n), cpuPerOp / float64(n)
}

// scaled is v times k as a history point keeps it (float32), nil for nil.
func scaled(v *float64, k float64) *float64 {
	if v == nil {
		return nil
	}
	r := float64(float32(*v * k))
	return &r
}

// cpuTime is the user and system CPU time of this process so far: all its
// threads, not its children.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
