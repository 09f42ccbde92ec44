package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealthv1 "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/sim"
	"github.com/llmdiag/llmdiag/source/scrape"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/redisstore"
	"github.com/llmdiag/llmdiag/store/replica"
	"github.com/llmdiag/llmdiag/telemetry"
)

// benchStores are the stores BenchmarkUnary serves from, by name; each is
// built for one benchmark.
var benchStores = map[string]func(b *testing.B) store.Store{
	"memory": func(*testing.B) store.Store { return memory.New(memory.Options{}, "bench") },
	// What serve --redis runs: reads from this replica's copy.
	"redis": func(b *testing.B) store.Store {
		return replica.New(benchRedis(b), memory.New(memory.Options{}, "copy"), replica.Options{})
	},
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

// unaryCalls are what BenchmarkUnary measures against the health check:
// the answers a router or a bot asks for, at the default window (served
// from what the refresh prepared) and, apart, at another window (read from
// the source on demand, through the query cache).
var unaryCalls = []struct {
	name string
	call func(ctx context.Context, c llmdiagv1.DiagnosisServiceClient, node string) error
}{
	{"metrics", func(ctx context.Context, c llmdiagv1.DiagnosisServiceClient, node string) error {
		_, err := c.GetNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node})
		return err
	}},
	{"diagnose-en-md", diagnoseCall(llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN, "")},
	{"diagnose-en-text", diagnoseCall(llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT, "")},
	{"diagnose-zh-md", diagnoseCall(llmdiagv1.Language_LANGUAGE_ZH, llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN, "")},
	{"diagnose-zh-text", diagnoseCall(llmdiagv1.Language_LANGUAGE_ZH, llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT, "")},
	// What a router on its hot path asks for: four fields (read_mask).
	{"diagnose-router-mask", func(ctx context.Context, c llmdiagv1.DiagnosisServiceClient, node string) error {
		_, err := c.DiagnoseNode(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"routable", "load_score", "status", "root_cause"}}})
		return err
	}},
	// Off the default window: not held to the floor, reported apart.
	{"window-1m/diagnose-en-md", diagnoseCall(llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN, "1m")},
}

func diagnoseCall(lang llmdiagv1.Language, format llmdiagv1.ReportFormat, window string) func(context.Context, llmdiagv1.DiagnosisServiceClient, string) error {
	return func(ctx context.Context, c llmdiagv1.DiagnosisServiceClient, node string) error {
		_, err := c.DiagnoseNode(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, Language: lang, Format: format, Window: window})
		return err
	}
}

// BenchmarkUnary measures what a router or a bot pays for an answer
// against what it pays for a health probe on the same server in the same
// run: grpc.health.v1 Check, GetNodeMetrics and DiagnoseNode (English and
// Chinese, Markdown and text) over gRPC with grpc-go's client (what ghz
// and most routers use), 2 connections, at concurrency 1 and 8, for the
// memory store and a Redis replica (serve --redis: reads from the
// replica's copy). The server is built as serve builds it (limiter,
// telemetry interceptor), and the fleet is the seed scenario of the
// simulator, scraped and refreshed three times, as `make run` serves it.
//
// Each iteration is one call; calls alternate with health checks in
// rounds of 100, so load drift hits both alike. It reports the call's
// p50-µs and p99-µs, the health check's health-p50-µs, and x-health: the
// call's p50 ÷ the health check's, the figure the floor is judged by.
//
//	go test ./server -run '^$' -bench Unary -benchtime 3000x -count 5
func BenchmarkUnary(b *testing.B) {
	for _, st := range []string{"memory", "redis"} {
		for _, conc := range []int{1, 8} {
			for _, call := range unaryCalls {
				b.Run(fmt.Sprintf("store=%s/conc=%d/call=%s", st, conc, call.name), func(b *testing.B) {
					url, nodes := unaryService(b, benchStores[st](b))
					reportUnary(b, url, nodes, conc, call.call)
				})
			}
		}
	}
}

// reportUnary measures call against the service at url, interleaved with
// the health check, at concurrency conc over 2 gRPC connections, and
// reports p50-µs, p99-µs, health-p50-µs and x-health.
func reportUnary(b *testing.B, url string, nodes []string, conc int, call func(context.Context, llmdiagv1.DiagnosisServiceClient, string) error) {
	b.Helper()
	conns := make([]*grpc.ClientConn, 2)
	for i := range conns {
		cc, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cc.Close() })
		conns[i] = cc
	}
	health := func(ctx context.Context, g int, _ string) error {
		_, err := grpchealthv1.NewHealthClient(conns[g%2]).Check(ctx, &grpchealthv1.HealthCheckRequest{})
		return err
	}
	rpc := func(ctx context.Context, g int, node string) error {
		return call(ctx, llmdiagv1.NewDiagnosisServiceClient(conns[g%2]), node)
	}
	p50, p99, h50 := interleaved(b, conc, nodes, rpc, health)
	b.ReportMetric(p50, "p50-µs")
	b.ReportMetric(p99, "p99-µs")
	b.ReportMetric(h50, "health-p50-µs")
	b.ReportMetric(p50/h50, "x-health")
}

// unaryService scrapes the simulator's seed fleet into st as a running
// `make run` would have after two minutes (24 refreshes, 5 s apart, on a
// clock the benchmark moves), serves st as serve would, and returns the
// URL and the node ids. The clock then stands still: answers stay fresh.
// Interceptors ics go before telemetry's (the tracing one, as serve puts it).
func unaryService(b *testing.B, st store.Store, ics ...connect.Interceptor) (string, []string) {
	b.Helper()
	return unaryServiceREST(b, st, true, ics...)
}

// unaryServiceREST is unaryService, with the REST paths in front or not.
func unaryServiceREST(b *testing.B, st store.Store, rest bool, ics ...connect.Interceptor) (string, []string) {
	b.Helper()
	cfg := simtest.Scenario(b, "seed", 1)
	cfg.Warmup = 5 * time.Minute
	clock := testkit.NewClock(time.Now())
	f, err := sim.New(cfg, sim.WithClock(testkit.NewClock(time.Now()))) // stands still: the benchmark steps it
	if err != nil {
		b.Fatal(err)
	}
	simtest.Serve(b, f)
	ctx := b.Context()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	tm, err := telemetry.New(reg, clock.Now)
	if err != nil {
		b.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	scraper := scrape.New(f.FleetFile().Nodes, nil, log, clock.Now, scrape.Options{Timeout: 5 * time.Second})
	loop := refresh.New(scraper, st, tm, log, clock.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th})
	testkit.Eventually(b, 10*time.Second, "the simulator to warm up", func() bool { return f.Now() >= cfg.Warmup })
	for range 24 {
		f.Step(5 * time.Second)
		clock.Add(5 * time.Second)
		if err := loop.Once(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if s, ok := st.(interface{ Sync(context.Context) error }); ok {
		if err := s.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	srv := servertest.Start(b, servertest.Options{Store: st, Source: scraper, Log: log, Registry: reg, Now: clock.Now,
		Config:         server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: th.StaleAfter, Thresholds: th},
		HandlerOptions: []connect.HandlerOption{connect.WithInterceptors(append(ics, tm.Interceptor())...)},
		Limits:         &server.Limits{RateLimit: 1e9},
		NoREST:         !rest,
	})
	var nodes []string
	for _, n := range f.FleetFile().Nodes {
		nodes = append(nodes, n.ID)
	}
	return srv.URL, nodes
}

// interleaved makes b.N calls of rpc and as many of health from conc
// goroutines, alternating in rounds of 100 calls, and returns rpc's p50
// and p99 and health's p50, in µs. Goroutine g calls with g as its first
// argument (to pick its connection).
func interleaved(b *testing.B, conc int, nodes []string, rpc, health func(ctx context.Context, g int, node string) error) (p50, p99, h50 float64) {
	b.Helper()
	ctx := context.Background()
	for g := range 2 { // warm every connection, node and cache
		for _, n := range nodes {
			if err := rpc(ctx, g, n); err != nil {
				b.Fatal(err)
			}
			if err := health(ctx, g, n); err != nil {
				b.Fatal(err)
			}
		}
	}
	const round = 100
	var lat, hlat []time.Duration
	var mu sync.Mutex
	run := func(f func(context.Context, int, string) error, calls int, into *[]time.Duration) {
		var wg sync.WaitGroup
		for g := range conc {
			wg.Go(func() {
				var mine []time.Duration
				for i := g; i < calls; i += conc {
					start := time.Now()
					if err := f(ctx, g, nodes[i%len(nodes)]); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				*into = append(*into, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		calls := min(round, b.N-done)
		b.StartTimer()
		run(rpc, calls, &lat)
		b.StopTimer()
		run(health, calls, &hlat)
	}
	at := func(d []time.Duration, q float64) float64 {
		if len(d) == 0 {
			b.Fatal("no calls made")
		}
		slices.Sort(d)
		return float64(d[int(q*float64(len(d)-1))].Nanoseconds()) / 1e3
	}
	return at(lat, 0.5), at(lat, 0.99), at(hlat, 0.5)
}
