package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/redistest"
	"github.com/llmdiag/llmdiag/internal/servertest"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/redisstore"
	"github.com/llmdiag/llmdiag/store/replica"
	"github.com/llmdiag/llmdiag/telemetry"
)

// benchStores are the stores BenchmarkRPC compares, by name; each is built
// for one benchmark and filled by one refresh of the same fleet. The memory
// store is the baseline the others are compared with in the same run.
var benchStores = []struct {
	name string
	make func(b *testing.B) store.Store
}{
	{"memory", func(*testing.B) store.Store { return memory.New(memory.Options{}, "bench") }},
	// What serve --redis runs: reads from this replica's copy.
	{"redis", func(b *testing.B) store.Store {
		return replica.New(benchRedis(b), memory.New(memory.Options{}, "copy"), replica.Options{})
	}},
	// Every read a round trip to Redis: what the copy saves.
	{"redis-direct", func(b *testing.B) store.Store { return benchRedis(b) }},
}

// benchRedis is a Redis store on a redis-server of its own.
func benchRedis(b *testing.B) *redisstore.Store {
	rs := redistest.Start(b)
	rdb, err := redisstore.NewClient(rs.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rdb.Close() })
	return redisstore.New(rdb, redisstore.Options{})
}

// BenchmarkRPC measures GetNodeMetrics and DiagnoseNode through the whole
// service over loopback (Connect protocol, binary), for each store, at
// concurrency 1 and 64. Besides ns/op (wall time per call at that
// concurrency, so 1e9/ns-per-op calls a second) it reports p50-µs and
// p99-µs, the latency one call sees.
func BenchmarkRPC(b *testing.B) {
	for _, st := range benchStores {
		for _, rpc := range []string{"GetNodeMetrics", "DiagnoseNode"} {
			for _, conc := range []int{1, 64} {
				b.Run(fmt.Sprintf("store=%s/rpc=%s/conc=%d", st.name, rpc, conc), func(b *testing.B) {
					c := benchService(b, st.make(b))
					call := func(ctx context.Context, node string) error {
						if rpc == "GetNodeMetrics" {
							_, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: node}))
							return err
						}
						_, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node}))
						return err
					}
					runConcurrent(b, conc, call)
				})
			}
		}
	}
}

var benchNodes = []string{"deepseek-v4-0", "deepseek-v4-1", "glm-0"}

// benchService fills st with one refresh of the fake fleet, serves it on
// loopback and returns a client.
func benchService(b *testing.B, st store.Store) *client.Client {
	b.Helper()
	src := &fakeSource{now: time.Now(), nodes: []fleet.Node{
		{ID: benchNodes[0], Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, ActiveParamsBillions: 37}},
		{ID: benchNodes[1], Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, ActiveParamsBillions: 37}},
		{ID: benchNodes[2], Model: "glm-4.6", Profile: fleet.Profile{TensorParallel: 8, ActiveParamsBillions: 32}},
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	tm, err := telemetry.New(reg, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	if err := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: "5m", Thresholds: th}).Once(ctx); err != nil {
		b.Fatal(err)
	}
	if s, ok := st.(interface{ Sync(context.Context) error }); ok {
		if err := s.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	srv := servertest.Start(b, servertest.Options{Store: st, Source: src, Log: log, Registry: reg,
		Config: server.Config{DefaultWindow: "5m", StaleAfter: time.Hour, Thresholds: th}})
	b.Cleanup(cancel)
	c, err := client.New(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// runConcurrent makes b.N calls from conc goroutines and reports the
// latency percentiles.
func runConcurrent(b *testing.B, conc int, call func(context.Context, string) error) {
	b.Helper()
	ctx := context.Background()
	for _, n := range benchNodes { // warm the connections and caches
		if err := call(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < b.N; i += conc {
				start := time.Now()
				if err := call(ctx, benchNodes[i%len(benchNodes)]); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(start))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	at := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
