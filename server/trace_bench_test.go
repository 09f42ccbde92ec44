package server_test

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/tracing"
)

// BenchmarkUnaryTracing is BenchmarkUnary's memory store at concurrency 1,
// with tracing off (serve without OTEL_EXPORTER_OTLP_ENDPOINT: no
// interceptor) and on with every call sampled, its spans going through the
// batch span processor serve uses to an exporter that drops them: what
// tracing itself costs a call, apart from the network to a collector. The
// health check is not traced (tracing.Traced), so x-health shows the cost.
//
//	go test ./server -run '^$' -bench UnaryTracing -benchtime 3000x -count 5
func BenchmarkUnaryTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		for _, call := range unaryCalls[:2] {
			b.Run(fmt.Sprintf("tracing=%v/call=%s", on, call.name), func(b *testing.B) {
				tr := tracing.Off()
				if on {
					tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
						sdktrace.WithBatcher(tracetest.NewNoopExporter(), sdktrace.WithMaxQueueSize(tracing.MaxQueueSize), sdktrace.WithMaxExportBatchSize(tracing.MaxExportBatchSize)))
					b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
					tr = tracing.With(tp)
				}
				ics, err := tr.Interceptors()
				if err != nil {
					b.Fatal(err)
				}
				url, nodes := unaryService(b, memory.New(memory.Options{}, "bench"), ics...)
				reportUnary(b, url, nodes, 1, call.call)
			})
		}
	}
}
