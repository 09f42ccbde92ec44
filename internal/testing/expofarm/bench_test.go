package expofarm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkHandler is the farm's own work per request, without the
// network: the schedule, rendering the gauge region and handing the three
// parts to the ResponseWriter.
func BenchmarkHandler(b *testing.B) {
	f, err := New(Config{Nodes: 1000, Listeners: 1})
	if err != nil {
		b.Fatal(err)
	}
	h := handler{f: f}
	req := httptest.NewRequest(http.MethodGet, Path(42), nil)
	w := &discard{h: http.Header{}}
	b.SetBytes(int64(len(seedBody)))
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

// BenchmarkChildServe reads a farm of 1,000 endpoints served by a child
// process over loopback, 8 reads at once, and reports the child's CPU time
// per request (farm-cpu-us/req): net/http, the handler and writing ~172 KB
// to a loopback socket.
func BenchmarkChildServe(b *testing.B) {
	if os.Getenv(childEnv) != "" {
		b.Skip("in the child")
	}
	c := StartChild(b, "TestExpofarmChild", Spec{Nodes: 1000})
	tr := &http.Transport{MaxIdleConnsPerHost: 2, MaxIdleConns: 2000}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	st0, err := c.Stats(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(seedBody)))
	var mu sync.Mutex
	next := 0
	b.SetParallelism(4) // 8 readers on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 64<<10)
		for pb.Next() {
			mu.Lock()
			u := c.URLs[next%len(c.URLs)]
			next++
			mu.Unlock()
			resp, err := client.Get(u)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := io.CopyBuffer(io.Discard, resp.Body, buf); err != nil {
				b.Error(err)
			}
			resp.Body.Close()
		}
	})
	st1, err := c.Stats(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	reqs := st1.Requests - st0.Requests
	if reqs < int64(b.N) {
		b.Fatalf("the child served %d requests of %d", reqs, b.N)
	}
	b.ReportMetric(float64(st1.CPU-st0.CPU)/float64(reqs)/1e3, "farm-cpu-us/req")
	b.ReportMetric(float64(st1.Connections-st0.Connections)/float64(reqs), "conns/req")
}
