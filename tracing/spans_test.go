package tracing_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/promfake"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/sim"
	"github.com/llmdiag/llmdiag/source/prom"
	"github.com/llmdiag/llmdiag/source/scrape"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/redisstore"
	"github.com/llmdiag/llmdiag/telemetry"
	"github.com/llmdiag/llmdiag/tracing"
)

// recorder is a provider sampling everything into an in-memory exporter,
// synchronously: a span is in the exporter once it has ended.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// simFleet serves the seed scenario's fleet on loopback until the test ends.
func simFleet(t *testing.T) *sim.Fleet {
	t.Helper()
	cfg := simtest.Scenario(t, "seed", 1)
	f, _ := simtest.Start(t, cfg)
	return f
}

// tree renders spans as an indented tree, children sorted by name and node,
// with the attributes named in show: what the goldens compare.
func tree(spans tracetest.SpanStubs, show ...string) string {
	children := map[trace.SpanID][]tracetest.SpanStub{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		if p := s.Parent.SpanID(); s.Parent.IsValid() && ids[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	label := func(s tracetest.SpanStub) string {
		l := s.Name
		for _, a := range s.Attributes {
			if slices.Contains(show, string(a.Key)) {
				l += fmt.Sprintf(" %s=%s", a.Key, a.Value.Emit())
			}
		}
		return l
	}
	var b strings.Builder
	var walk func(ss []tracetest.SpanStub, depth int)
	walk = func(ss []tracetest.SpanStub, depth int) {
		slices.SortFunc(ss, func(a, b tracetest.SpanStub) int { return strings.Compare(label(a), label(b)) })
		for _, s := range ss {
			fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), label(s))
			walk(children[s.SpanContext.SpanID()], depth+1)
		}
	}
	walk(roots, 0)
	return b.String()
}

func attr(s tracetest.SpanStub, key string) (string, bool) {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit(), true
		}
	}
	return "", false
}

// TestRefreshCycleSpans: one refresh of the simulator's fleet, scraped over
// HTTP, is one trace: the cycle, the source's read with a scrape per node
// under it (node, engine, status, bytes), and a store write per node.
func TestRefreshCycleSpans(t *testing.T) {
	f := simFleet(t)
	tp, exp := recorder(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tm, err := telemetry.New(prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	nodes := f.FleetFile().Nodes
	scraper := scrape.New(nodes, nil, log, time.Now, scrape.Options{Timeout: 5 * time.Second})
	loop := refresh.New(scraper, memory.New(memory.Options{}, "t"), tm, log, time.Now,
		refresh.Config{Thresholds: diagnose.DefaultThresholds(), TracerProvider: tp})
	if err := loop.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	testkit.Golden(t, "testdata/refresh-cycle.txt", []byte(tree(spans, "llmdiag.node", "llmdiag.nodes", "llmdiag.nodes.stored", "llmdiag.nodes.errors", "llmdiag.engine", "llmdiag.up", "http.response.status_code")))
	trace0 := spans[0].SpanContext.TraceID()
	scrapes := 0
	for _, s := range spans {
		if s.SpanContext.TraceID() != trace0 {
			t.Errorf("span %s in trace %s, not the cycle's %s", s.Name, s.SpanContext.TraceID(), trace0)
		}
		if s.Name != "scrape" {
			continue
		}
		scrapes++
		if b, _ := attr(s, "llmdiag.scrape.bytes"); b == "" || b == "0" {
			t.Errorf("scrape of %v: bytes %q, want the exposition's size", s.Attributes, b)
		}
	}
	if scrapes != len(nodes) {
		t.Errorf("%d scrape spans, want one per node (%d)", scrapes, len(nodes))
	}
}

// TestDiagnoseNodeSpans: one DiagnoseNode over Connect is a server span
// with the store reads under it; the call's trace id is the one its
// latency's exemplar names on /metrics (OpenMetrics).
func TestDiagnoseNodeSpans(t *testing.T) {
	f := simFleet(t)
	tp, exp := recorder(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	tm, err := telemetry.New(reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	st := memory.New(memory.Options{}, "t")
	scraper := scrape.New(f.FleetFile().Nodes, nil, log, time.Now, scrape.Options{Timeout: 5 * time.Second})
	// The refresh is not traced here: the spans are the RPC's alone.
	if err := refresh.New(scraper, st, tm, log, time.Now, refresh.Config{Thresholds: th}).Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr := tracing.With(tp)
	ics, err := tr.Interceptors()
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, servertest.Options{Store: st, Source: scraper, Log: log, Registry: reg,
		Config:         server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: th.StaleAfter, Thresholds: th},
		HandlerOptions: []connect.HandlerOption{connect.WithInterceptors(append(ics, tm.Interceptor())...)}})
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	node := f.FleetFile().Nodes[0].ID
	if _, err := c.DiagnoseNode(context.Background(), connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node})); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	testkit.Golden(t, "testdata/diagnose-node.txt", []byte(tree(spans, "llmdiag.node", "rpc.method", "rpc.response.status_code")))
	var rpc *tracetest.SpanStub
	for i, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			rpc = &spans[i]
		}
	}
	if rpc == nil {
		t.Fatalf("no server span in %v", spans)
	}

	// The exemplar: only in OpenMetrics, which the scraper must ask for.
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`trace_id="%s"`, rpc.SpanContext.TraceID())
	var line string
	for l := range strings.Lines(string(body)) {
		if strings.HasPrefix(l, "llmdiag_rpc_duration_seconds_bucket") && strings.Contains(l, "DiagnoseNode") && strings.Contains(l, " # ") {
			line = l
		}
	}
	if !strings.Contains(line, want) {
		t.Errorf("no DiagnoseNode latency bucket with an exemplar %s in /metrics (content type %s); exemplar line: %q", want, resp.Header.Get("Content-Type"), line)
	}
}

// TestRefreshRedisSpans: with the Redis store (a real redis-server), each
// store write of a traced refresh has the Redis commands it sent under it,
// named by command, with no key in any attribute.
func TestRefreshRedisSpans(t *testing.T) {
	f := simFleet(t)
	rs := redistest.Start(t)
	rdb, err := redisstore.NewClient(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	rdb.AddHook(tracing.RedisHook())
	tp, exp := recorder(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tm, err := telemetry.New(prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// Untraced work (here: a write with no span) makes no Redis span.
	st := redisstore.New(rdb, redisstore.Options{Prefix: "tracetest:"})
	if _, err := st.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans from an untraced call", n)
	}
	scraper := scrape.New(f.FleetFile().Nodes, nil, log, time.Now, scrape.Options{Timeout: 5 * time.Second})
	loop := refresh.New(scraper, st, tm, log, time.Now, refresh.Config{Thresholds: diagnose.DefaultThresholds(), TracerProvider: tp})
	if err := loop.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	underPut := map[string]int{} // node → Redis spans under its store.put
	for _, s := range spans {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.Emit(), "tracetest:") {
				t.Errorf("span %s attribute %s quotes a key: %s", s.Name, a.Key, a.Value.Emit())
			}
		}
		if !strings.HasPrefix(s.Name, "redis ") {
			continue
		}
		if s.SpanKind != trace.SpanKindClient {
			t.Errorf("%s: kind %v, want client", s.Name, s.SpanKind)
		}
		if p, ok := byID[s.Parent.SpanID()]; ok && p.Name == "store.put" {
			node, _ := attr(p, "llmdiag.node")
			underPut[node]++
		}
	}
	for _, n := range f.FleetFile().Nodes {
		if underPut[n.ID] == 0 {
			t.Errorf("no Redis span under %s's store.put; spans:\n%s", n.ID, tree(spans, "llmdiag.node"))
		}
	}
}

// TestPrometheusQuerySpans: a refresh read from Prometheus (a fake API on
// loopback) has one client span per query sent, each with its kind and
// PromQL, under the span of the caller.
func TestPrometheusQuerySpans(t *testing.T) {
	fake := promfake.New(t, nil)
	src, err := prom.New(prom.Config{URL: fake.URL}, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tp, exp := recorder(t)
	ctx, root := tp.Tracer("t").Start(context.Background(), "root")
	_, _ = src.Refresh(ctx, "5m") // no series: what matters is the queries
	root.End()
	queries := 0
	for _, s := range exp.GetSpans() {
		if s.Name != "prometheus.query" {
			continue
		}
		queries++
		what, _ := attr(s, "llmdiag.query")
		expr, _ := attr(s, "db.query.text")
		if s.Parent.SpanID() != root.SpanContext().SpanID() || s.SpanKind != trace.SpanKindClient || what == "" || expr == "" {
			t.Errorf("query span %s (%s, %q, %q) not a client span under the caller's with its kind and PromQL", s.Name, s.SpanKind, what, expr)
		}
	}
	if sent := int(fake.Queries.Load()); queries == 0 || queries != sent {
		t.Errorf("%d query spans for %d queries sent", queries, sent)
	}
}
