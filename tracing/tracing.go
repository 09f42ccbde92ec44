package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/llmdiag/llmdiag/internal/redact"
)

// Scope is the instrumentation scope of llmdiag's own spans.
const Scope = "github.com/llmdiag/llmdiag"

// Bounds of the batch span processor: spans past a full queue are dropped,
// never waited for.
const (
	MaxQueueSize       = 2048
	MaxExportBatchSize = 512
	BatchTimeout       = 5 * time.Second
)

// Tracing is the provider and propagator serve passes to what makes root
// spans; Off when tracing is off.
type Tracing struct {
	// Provider makes the root spans; a no-op provider when off.
	Provider trace.TracerProvider
	// Propagator reads and writes W3C trace context and baggage.
	Propagator propagation.TextMapPropagator
	// TrustRemote makes an RPC's span the child of the caller's span (its
	// traceparent header), not a root linked to it (otelconnect's default,
	// for callers that are not trusted to choose what is sampled).
	TrustRemote bool
	on          bool
	shutdown    func(context.Context) error
}

// Off is tracing turned off: no-op provider, no interceptor, no goroutine.
func Off() *Tracing {
	return &Tracing{Provider: noop.NewTracerProvider(), Propagator: propagator(), shutdown: func(context.Context) error { return nil }}
}

// With is tracing on with the given provider (tests pass one with an
// in-memory exporter); its Shutdown does not shut tp down.
func With(tp trace.TracerProvider) *Tracing {
	return &Tracing{Provider: tp, Propagator: propagator(), on: true, shutdown: func(context.Context) error { return nil }}
}

func propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// New builds tracing from cfg: Off when cfg.Off says so, else a provider
// exporting over OTLP in batches (MaxQueueSize, MaxExportBatchSize,
// BatchTimeout; each export within cfg.Timeout). Export failures are logged
// on log once per outage, not per batch. It logs one line saying where
// traces go, the endpoint redacted of credentials, or why they go nowhere.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Tracing, error) {
	if cfg.Off != "" {
		log.Info("tracing off", "reason", cfg.Off)
		return Off(), nil
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	// The exporter's own retries stop within the export's deadline.
	switch cfg.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.Endpoint), otlptracegrpc.WithHeaders(cfg.Headers),
			otlptracegrpc.WithTimeout(cfg.Timeout))
	default:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint), otlptracehttp.WithHeaders(cfg.Headers),
			otlptracehttp.WithTimeout(cfg.Timeout))
	}
	if err != nil {
		// The exporter's error may quote the endpoint.
		return nil, fmt.Errorf("OTLP exporter for %s: %s", redact.URL(cfg.Endpoint), redact.Text(err.Error()))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(cfg.Resource...)),
		sdktrace.WithSampler(cfg.Sampler),
		sdktrace.WithBatcher(&loggingExporter{SpanExporter: exp, log: log, endpoint: redact.URL(cfg.Endpoint)},
			sdktrace.WithMaxQueueSize(MaxQueueSize), sdktrace.WithMaxExportBatchSize(MaxExportBatchSize),
			sdktrace.WithBatchTimeout(BatchTimeout), sdktrace.WithExportTimeout(cfg.Timeout)),
	)
	log.Info("tracing on: spans exported over OTLP", "endpoint", redact.URL(cfg.Endpoint), "protocol", cfg.Protocol,
		"service", cfg.ServiceName, "sampler", cfg.SamplerName)
	return &Tracing{Provider: tp, Propagator: propagator(), on: true, shutdown: tp.Shutdown}, nil
}

// On reports whether spans are recorded.
func (t *Tracing) On() bool { return t.on }

// Shutdown flushes the spans not yet exported and stops the exporter, within
// ctx's deadline (serve gives it a few seconds on exit).
func (t *Tracing) Shutdown(ctx context.Context) error { return t.shutdown(ctx) }

// Interceptors are the Connect interceptors that give each RPC its server
// span (otelconnect, with this provider and propagator, no metrics: the
// service's own are telemetry's) but health checks and reflection (Traced);
// none when tracing is off. They go before
// any interceptor that reads the span (telemetry's exemplars).
func (t *Tracing) Interceptors() ([]connect.Interceptor, error) {
	if !t.on {
		return nil, nil
	}
	opts := []otelconnect.Option{otelconnect.WithTracerProvider(t.Provider), otelconnect.WithPropagator(t.Propagator), otelconnect.WithoutMetrics(),
		otelconnect.WithFilter(func(_ context.Context, spec connect.Spec) bool { return Traced(spec.Procedure) })}
	if t.TrustRemote {
		opts = append(opts, otelconnect.WithTrustRemote())
	}
	i, err := otelconnect.NewInterceptor(opts...)
	if err != nil {
		return nil, fmt.Errorf("otelconnect: %w", err)
	}
	return []connect.Interceptor{i}, nil
}

// Traced reports whether an RPC to procedure gets a span: all but health
// checks (probes every few seconds) and server reflection.
func Traced(procedure string) bool {
	return !strings.HasPrefix(procedure, "/grpc.health.v1.") && !strings.HasPrefix(procedure, "/grpc.reflection.")
}

// Child starts a span named name under the span ctx carries, with that
// span's provider, when that span is recording; otherwise it returns ctx
// and a no-op span at no cost. Set attributes only when span.IsRecording(),
// so that an untraced call builds none.
func Child(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noop.Span{}
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, opts...)
}

// End ends span, marking it failed with err's message when err is not nil.
// Errors in llmdiag name no secret (they reach API callers too).
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// loggingExporter logs export failures on its own log, once when exports
// start failing and once when they work again, and keeps them from the
// SDK's process-wide error handler.
type loggingExporter struct {
	sdktrace.SpanExporter
	log      *slog.Logger
	endpoint string
	failing  atomic.Bool
}

func (e *loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	switch {
	case err != nil && !e.failing.Swap(true):
		e.log.Warn("tracing: export failed; spans are dropped until it works again (logged once)", "endpoint", e.endpoint,
			"spans", len(spans), "err", redact.Text(err.Error()))
	case err == nil && e.failing.Swap(false):
		e.log.Info("tracing: export works again", "endpoint", e.endpoint)
	}
	return nil
}
