package prom

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/source"
)

// BenchmarkRefresh10kNodes is one refresh of 10,000 vLLM nodes (2 engine
// cores each, vLLM's bucket layouts: 107 buckets per node over five
// histograms) from a fake Prometheus API on loopback answering canned
// vectors. It reports ns and bytes allocated per node; the canned bodies
// are built before the timer starts, and the fake server's own work (writing
// ~100 MB of JSON per refresh over loopback) runs on the same machine.
func BenchmarkRefresh10kNodes(b *testing.B) {
	const n = 10000
	nodes := synthFleet(n, false)
	bodies := synthBodies(plan(b, defaultBuilder("5m"), engine.Engines()...), nodes, testNow)
	fake := newFakeProm(b, bodies)
	src := newTestSource(b, fake.URL, func(c *Config) { c.Timeout = time.Minute })
	var size int
	for _, c := range bodies {
		size += len(c.Body)
	}
	b.ReportAllocs()
	var ms0, ms1, live0, live1 runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&live0)
	b.ResetTimer()
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime(b)
	var obs []source.Observation
	for b.Loop() {
		var err error
		obs, err = src.Refresh(b.Context(), "5m")
		if err != nil {
			b.Fatal(err)
		}
		if len(obs) != n {
			b.Fatalf("got %d observations", len(obs))
		}
	}
	cpu := cpuTime(b) - cpu0
	runtime.ReadMemStats(&ms1)
	// CPU of the whole process: the source, the fake server and the GC.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/n, "B/node")
	b.ReportMetric(float64(src.QueriesLastRefresh()), "queries")
	// What the observations of one refresh hold on to.
	b.StopTimer()
	runtime.GC()
	runtime.GC() // the second empties the pool of query buffers
	runtime.ReadMemStats(&live1)
	b.ReportMetric(float64(int64(live1.HeapAlloc)-int64(live0.HeapAlloc))/n, "live-B/node")
	runtime.KeepAlive(obs)
	b.ReportMetric(float64(size)/1e6, "MB-json")
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeVector decodes the largest answer of a 10,000-node refresh:
// the TTFT buckets, 230,000 samples.
func BenchmarkDecodeVector(b *testing.B) {
	nodes := synthFleet(10000, false)
	bodies := synthBodies(plan(b, defaultBuilder("5m"), engine.Engines()...), nodes, testNow)
	var big []byte
	for _, c := range bodies {
		if len(c.Body) > len(big) {
			big = c.Body
		}
	}
	w := newWorker().(*worker)
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeVector(big, []string{"instance", "le"}, &w.vec, w.intern); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(w.vec.len()), "ns/sample")
}
