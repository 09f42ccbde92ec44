package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealthv1 "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/store/memory"
)

// BenchmarkUnaryREST measures what the REST paths cost: BenchmarkUnary's
// memory store at concurrency 1, GetNodeMetrics and DiagnoseNode (en,
// Markdown), over gRPC (grpc-go) and Connect (connect-go, binary) with the
// REST paths in front of the handler and without them (the transcoder
// only sees paths under /v1/, so those ratios should not move), and over
// REST (net/http GET, the JSON answer decoded with protojson, as a
// client would). Each reports x-health against the gRPC health check on
// the same server in the same run (BenchmarkUnary's method).
//
//	go test ./server -run '^$' -bench UnaryREST -benchtime 3000x -count 5
func BenchmarkUnaryREST(b *testing.B) {
	calls := []struct {
		name     string
		rpc      func(ctx context.Context, c llmdiagv1connect.DiagnosisServiceClient, node string) error
		path     string // the REST path after /v1/nodes/{node}
		response func() proto.Message
	}{
		{"metrics", func(ctx context.Context, c llmdiagv1connect.DiagnosisServiceClient, node string) error {
			_, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: node}))
			return err
		}, "/metrics", func() proto.Message { return &llmdiagv1.GetNodeMetricsResponse{} }},
		{"diagnose-en-md", func(ctx context.Context, c llmdiagv1connect.DiagnosisServiceClient, node string) error {
			_, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node, Language: llmdiagv1.Language_LANGUAGE_EN, Format: llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN}))
			return err
		}, "/diagnosis?language=LANGUAGE_EN&format=REPORT_FORMAT_MARKDOWN", func() proto.Message { return &llmdiagv1.DiagnoseNodeResponse{} }},
	}
	for _, rest := range []bool{false, true} {
		for _, protocol := range []string{"grpc", "connect", "rest"} {
			if protocol == "rest" && !rest {
				continue
			}
			for i, call := range calls {
				b.Run(fmt.Sprintf("rest-paths=%v/protocol=%s/call=%s", rest, protocol, call.name), func(b *testing.B) {
					base, nodes := unaryServiceREST(b, memory.New(memory.Options{}, "bench"), rest)
					switch protocol {
					case "grpc":
						reportUnary(b, base, nodes, 1, unaryCalls[i].call) // metrics, diagnose-en-md
					case "connect", "rest":
						reportHTTP(b, base, nodes, protocol, call.rpc, call.path, call.response)
					}
				})
			}
		}
	}
}

// reportHTTP is reportUnary for a Connect or REST caller over cleartext
// HTTP/2; the health check stays gRPC's.
func reportHTTP(b *testing.B, base string, nodes []string, protocol string, rpc func(context.Context, llmdiagv1connect.DiagnosisServiceClient, string) error, path string, response func() proto.Message) {
	b.Helper()
	cc, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	client := llmdiagv1connect.NewDiagnosisServiceClient(hc, base)
	health := func(ctx context.Context, _ int, _ string) error {
		_, err := grpchealthv1.NewHealthClient(cc).Check(ctx, &grpchealthv1.HealthCheckRequest{})
		return err
	}
	call := func(ctx context.Context, _ int, node string) error { return rpc(ctx, client, node) }
	if protocol == "rest" {
		call = func(ctx context.Context, _ int, node string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/nodes/"+url.PathEscape(node)+path, nil)
			if err != nil {
				return err
			}
			res, err := hc.Do(req)
			if err != nil {
				return err
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				return err
			}
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("HTTP %d: %s", res.StatusCode, body)
			}
			return protojson.Unmarshal(body, response())
		}
	}
	p50, p99, h50 := interleaved(b, 1, nodes, call, health)
	b.ReportMetric(p50, "p50-µs")
	b.ReportMetric(p99, "p99-µs")
	b.ReportMetric(h50, "health-p50-µs")
	b.ReportMetric(p50/h50, "x-health")
}
