package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealthv1 "google.golang.org/grpc/health/grpc_health_v1"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
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
					return call.call(ctx, llmdiagv1.NewDiagnosisServiceClient(conns[g%2]), node)
				}
				p50, p99, h50 := interleaved(b, 1, nodes, rpc, health)
				b.ReportMetric(p50, "p50-µs")
				b.ReportMetric(p99, "p99-µs")
				b.ReportMetric(h50, "health-p50-µs")
				b.ReportMetric(p50/h50, "x-health")
			})
		}
	}
}
