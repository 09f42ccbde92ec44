package tracing_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/tracing"
)

// otlpReceiver is a tiny OTLP/HTTP receiver: it decodes every export and
// keeps it with its Authorization header.
type otlpReceiver struct {
	mu    sync.Mutex
	reqs  []*collectortrace.ExportTraceServiceRequest
	auth  []string
	paths []string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want protobuf", http.StatusBadRequest)
		return
	}
	var m collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.reqs, r.auth, r.paths = append(r.reqs, &m), append(r.auth, req.Header.Get("Authorization")), append(r.paths, req.URL.Path)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// TestOTLPExport: with an endpoint set, spans reach a real OTLP/HTTP
// receiver on loopback at /v1/traces, with the service name and the
// headers of the environment, flushed by Shutdown; the log says where they
// go without the header's secret.
func TestOTLPExport(t *testing.T) {
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS":  "Authorization=Bearer%20hunter2",
		"OTEL_SERVICE_NAME":           "llmdiag-test",
	}
	cfg, err := tracing.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	tr, err := tracing.New(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.On() {
		t.Fatal("tracing off with an endpoint set")
	}
	ctx, root := tr.Provider.Tracer("test").Start(context.Background(), "root")
	_, child := tracing.Child(ctx, "child")
	child.End()
	root.End()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var names []string
	var service string
	for _, r := range rcv.reqs {
		for _, rs := range r.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
		}
	}
	if strings.Join(names, ",") != "child,root" || service != "llmdiag-test" {
		t.Errorf("received spans %v of service %q, want child,root of llmdiag-test", names, service)
	}
	if len(rcv.auth) == 0 || rcv.auth[0] != "Bearer hunter2" || rcv.paths[0] != "/v1/traces" {
		t.Errorf("exports with Authorization %q at %q, want the environment's header at /v1/traces", rcv.auth, rcv.paths)
	}
	if l := logs.String(); !strings.Contains(l, "tracing on") || !strings.Contains(l, srv.URL+"/v1/traces") || strings.Contains(l, "hunter2") {
		t.Errorf("log %q: want tracing on, the endpoint, and no header value", l)
	}
}

// TestExportFailureLoggedOnce: a collector that is not there is logged once,
// with the endpoint's password redacted, and the flush on exit is bounded by
// the export timeout.
func TestExportFailureLoggedOnce(t *testing.T) {
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:hunter2@" + testkit.ClosedAddr(t),
		"OTEL_EXPORTER_OTLP_TIMEOUT":  "300",
	}
	cfg, err := tracing.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	tr, err := tracing.New(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, s := tr.Provider.Tracer("test").Start(context.Background(), "lost")
		s.End()
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// ForceFlush exports now: one failed export per span.
		_ = tr.Provider.(interface{ ForceFlush(context.Context) error }).ForceFlush(fctx)
		cancel()
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tr.Shutdown(sctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("shutdown took %v", took)
	}
	l := logs.String()
	if n := strings.Count(l, "export failed"); n != 1 {
		t.Errorf("export failure logged %d times, want once:\n%s", n, l)
	}
	if strings.Contains(l, "hunter2") {
		t.Errorf("log quotes the endpoint's password:\n%s", l)
	}
}

// TestOff: without an endpoint nothing records and no interceptor is added.
func TestOff(t *testing.T) {
	cfg, err := tracing.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	tr, err := tracing.New(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ics, err := tr.Interceptors()
	if tr.On() || len(ics) != 0 || err != nil {
		t.Errorf("off: On %v, %d interceptors (%v)", tr.On(), len(ics), err)
	}
	if _, s := tr.Provider.Tracer("t").Start(context.Background(), "x"); s.IsRecording() {
		t.Error("the off provider records")
	}
	if !strings.Contains(logs.String(), "tracing off") || !strings.Contains(logs.String(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("log %q: want tracing off and why", logs.String())
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestChildUntracedCostsNothing: with no recording span in ctx, Child
// allocates nothing and returns ctx itself.
func TestChildUntracedCostsNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, s := tracing.Child(ctx, "x")
		if c != ctx || s.IsRecording() {
			t.Fatal("an untraced Child made a span")
		}
		tracing.End(s, nil)
	})
	if allocs != 0 {
		t.Errorf("untraced Child: %v allocations, want 0", allocs)
	}
}

func TestTraced(t *testing.T) {
	for p, want := range map[string]bool{
		"/llmdiag.v1.DiagnosisService/DiagnoseNode":                      true,
		"/grpc.health.v1.Health/Check":                                   false,
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      false,
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": false,
	} {
		if got := tracing.Traced(p); got != want {
			t.Errorf("Traced(%s) = %v, want %v", p, got, want)
		}
	}
}

// redisErr is a Redis error reply (go-redis's own type is internal).
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestRedisHook: a command under a traced span becomes a client span named
// by the command, failed with its error's kind only; its key, arguments
// and the error's text appear nowhere. Untraced, no span.
func TestRedisHook(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status codes.Code
		desc   string
	}{
		{"ok", nil, codes.Unset, ""},
		{"a miss is an answer", redis.Nil, codes.Unset, ""},
		{"redis error by its code", redisErr("ERR unknown command 'hunter2', with args beginning with: 'secret-key'"), codes.Error, "redis error ERR"},
		{"deadline", context.DeadlineExceeded, codes.Error, "deadline exceeded"},
		{"other", errors.New("hunter2 secret-key"), codes.Error, "error"},
	}
	hook := tracing.RedisHook()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp, exp := recorder(t)
			ctx, root := tp.Tracer("t").Start(context.Background(), "root")
			cmd := redis.NewStringCmd(ctx, "get", "secret-key", "hunter2")
			called := false
			err := hook.ProcessHook(func(context.Context, redis.Cmder) error { called = true; return tc.err })(ctx, cmd)
			root.End()
			if !called || !errors.Is(err, tc.err) {
				t.Fatalf("next called %v, err %v", called, err)
			}
			spans := exp.GetSpans()
			if len(spans) != 2 || spans[0].Name != "redis get" || spans[0].Parent.SpanID() != spans[1].SpanContext.SpanID() {
				t.Fatalf("spans %v, want redis get under root", spans)
			}
			s := spans[0]
			if s.Status.Code != tc.status || s.Status.Description != tc.desc {
				t.Errorf("status %v %q, want %v %q", s.Status.Code, s.Status.Description, tc.status, tc.desc)
			}
			for _, a := range s.Attributes {
				if v := a.Value.Emit(); strings.Contains(v, "secret") || strings.Contains(v, "hunter2") {
					t.Errorf("attribute %s=%s quotes an argument", a.Key, v)
				}
			}
		})
	}
	t.Run("pipeline", func(t *testing.T) {
		tp, exp := recorder(t)
		ctx, root := tp.Tracer("t").Start(context.Background(), "root")
		cmds := []redis.Cmder{redis.NewStringCmd(ctx, "get", "k1"), redis.NewStatusCmd(ctx, "set", "k2", "hunter2")}
		if err := hook.ProcessPipelineHook(func(context.Context, []redis.Cmder) error { return nil })(ctx, cmds); err != nil {
			t.Fatal(err)
		}
		root.End()
		got := tree(exp.GetSpans(), "db.operation.batch.size", "llmdiag.redis.commands")
		if want := "root\n  redis pipeline db.operation.batch.size=2 llmdiag.redis.commands=get set\n"; got != want {
			t.Errorf("spans\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("untraced", func(t *testing.T) {
		called := false
		if err := hook.ProcessHook(func(context.Context, redis.Cmder) error { called = true; return nil })(context.Background(), redis.NewStringCmd(context.Background(), "get", "k")); err != nil || !called {
			t.Fatalf("untraced command: called %v, err %v", called, err)
		}
	})
}

// BenchmarkChild is what a store read or a scrape pays for its span: nothing
// when its caller is not traced (tracing off), a span when it is.
func BenchmarkChild(b *testing.B) {
	b.Run("untraced", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			_, s := tracing.Child(ctx, "x")
			tracing.End(s, nil)
		}
	})
	b.Run("traced", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		ctx, root := tp.Tracer("b").Start(context.Background(), "root")
		defer root.End()
		for b.Loop() {
			_, s := tracing.Child(ctx, "x")
			tracing.End(s, nil)
		}
	})
}
