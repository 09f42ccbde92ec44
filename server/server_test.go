package server_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpchealthv1 "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// vLLM's request-latency buckets.
var e2eBounds = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680, math.Inf(1)}

// hist spreads n observations: most around typical seconds, a tail of 1% at tail.
func hist(n, typical, tail float64) *sample.Histogram {
	h := &sample.Histogram{Bounds: e2eBounds, Counts: make([]float64, len(e2eBounds))}
	for i, b := range e2eBounds {
		if b >= typical {
			h.Counts[i] += n * 0.99
		}
		if b >= tail {
			h.Counts[i] += n * 0.01
		}
	}
	h.Count, h.Sum = n, n*0.99*typical+n*0.01*tail
	return h
}

// fakeSource serves two samples per node a minute apart, so the default
// window has rates and window percentiles.
type fakeSource struct {
	now         time.Time
	nodes       []fleet.Node
	windowCalls atomic.Int32

	mu    sync.Mutex
	reads []windowRead // Window calls
}

// windowRead is what one Window call asked for.
type windowRead struct {
	window string
	offset time.Duration
}

func (f *fakeSource) windowReads() []windowRead {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]windowRead(nil), f.reads...)
}

func (f *fakeSource) samples(n fleet.Node) (older, newer *sample.Sample) {
	slow := 1.0
	if strings.HasPrefix(n.ID, "deepseek") {
		slow = 20
	}
	mk := func(at time.Time, k float64) *sample.Sample {
		s := &sample.Sample{
			At: at, Up: true, Engine: llmdiagv1.Engine_ENGINE_VLLM, Model: n.Model,
			Queue: sample.F(0), Running: sample.F(40), KVUsage: sample.F(0.3),
			PromptTokens: sample.F(k * 1.2e6), GenerationTokens: sample.F(k * 7260),
			Preemptions: sample.F(0), RequestsFinished: sample.F(k * 60),
		}
		s.Hists[sample.E2E] = hist(k*60, 10*slow, 40*slow)
		s.Hists[sample.TTFT] = hist(k*60, 0.5, 5)
		return s
	}
	return mk(f.now.Add(-time.Minute), 100), mk(f.now, 101)
}

func (f *fakeSource) metrics(n fleet.Node, window string) *llmdiagv1.NodeMetrics {
	older, newer := f.samples(n)
	if window == metrics.Lifetime {
		older = nil
	}
	m := metrics.Compute(newer, older, window, nil, f.now, 30*time.Second)
	m.Node = n.ID
	return m
}

func (f *fakeSource) Refresh(_ context.Context, window string) ([]source.Observation, error) {
	var out []source.Observation
	for _, n := range f.nodes {
		_, newer := f.samples(n)
		out = append(out, source.Observation{Node: n, Engine: newer.Engine, Sample: newer, Metrics: f.metrics(n, window)})
	}
	return out, nil
}

func (f *fakeSource) Window(_ context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	f.windowCalls.Add(1)
	f.mu.Lock()
	f.reads = append(f.reads, windowRead{window, offset})
	f.mu.Unlock()
	for _, n := range f.nodes {
		if n.ID == node {
			m := f.metrics(n, window)
			m.ObservedAt = timestamppb.New(m.GetObservedAt().AsTime().Add(-offset))
			return m, nil
		}
	}
	return nil, source.ErrUnknownNode
}

// startServer runs the whole service on a loopback port and returns its URL.
func startServer(t *testing.T) (string, *memory.Store) {
	url, st, _ := startServerAt(t, time.Now())
	return url, st
}

// startServerAt is startServer with the fleet's data observed at now.
func startServerAt(t *testing.T, now time.Time) (string, *memory.Store, *fakeSource) {
	t.Helper()
	src := &fakeSource{now: now, nodes: []fleet.Node{
		{ID: "deepseek-v4-0", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, TensorParallel: 1, ActiveParamsBillions: 37}},
		{ID: "deepseek-v4-1", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, TensorParallel: 1, ActiveParamsBillions: 37}},
		{ID: "glm-0", Model: "glm-4.6", Profile: fleet.Profile{TensorParallel: 8, ActiveParamsBillions: 32}},
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	tm, err := telemetry.New(reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second
	st := memory.New(memory.Options{}, "test")
	loop := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th})
	if err := loop.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, servertest.Options{Store: st, Source: src, Log: log, Registry: reg,
		Config:         server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: 30 * time.Second, Thresholds: th, OffsetStep: 5 * time.Second, MinHeartbeat: time.Second},
		HandlerOptions: []connect.HandlerOption{connect.WithInterceptors(tm.Interceptor())}})
	return srv.URL, st, src
}

// api is the part of the service the protocol matrix exercises, spelled
// once for the Connect client and once for grpc-go.
type api interface {
	listNodes(ctx context.Context, r *llmdiagv1.ListNodesRequest) (*llmdiagv1.ListNodesResponse, error)
	getNodeMetrics(ctx context.Context, r *llmdiagv1.GetNodeMetricsRequest) (*llmdiagv1.GetNodeMetricsResponse, error)
	compare(ctx context.Context, r *llmdiagv1.ComparePercentilesRequest) (*llmdiagv1.ComparePercentilesResponse, error)
	diagnose(ctx context.Context, r *llmdiagv1.DiagnoseNodeRequest) (*llmdiagv1.DiagnoseNodeResponse, error)
	history(ctx context.Context, r *llmdiagv1.GetNodeHistoryRequest) (*llmdiagv1.GetNodeHistoryResponse, error)
	// stream returns a receive function for StreamHealth.
	stream(ctx context.Context, r *llmdiagv1.StreamHealthRequest) (func() (*llmdiagv1.StreamHealthResponse, error), error)
}

type connectAPI struct{ c *client.Client }

func (a connectAPI) listNodes(ctx context.Context, r *llmdiagv1.ListNodesRequest) (*llmdiagv1.ListNodesResponse, error) {
	resp, err := a.c.ListNodes(ctx, connect.NewRequest(r))
	return msg(resp, err)
}

func (a connectAPI) getNodeMetrics(ctx context.Context, r *llmdiagv1.GetNodeMetricsRequest) (*llmdiagv1.GetNodeMetricsResponse, error) {
	resp, err := a.c.GetNodeMetrics(ctx, connect.NewRequest(r))
	return msg(resp, err)
}

func (a connectAPI) compare(ctx context.Context, r *llmdiagv1.ComparePercentilesRequest) (*llmdiagv1.ComparePercentilesResponse, error) {
	resp, err := a.c.ComparePercentiles(ctx, connect.NewRequest(r))
	return msg(resp, err)
}

func (a connectAPI) diagnose(ctx context.Context, r *llmdiagv1.DiagnoseNodeRequest) (*llmdiagv1.DiagnoseNodeResponse, error) {
	resp, err := a.c.DiagnoseNode(ctx, connect.NewRequest(r))
	return msg(resp, err)
}

func (a connectAPI) history(ctx context.Context, r *llmdiagv1.GetNodeHistoryRequest) (*llmdiagv1.GetNodeHistoryResponse, error) {
	resp, err := a.c.GetNodeHistory(ctx, connect.NewRequest(r))
	return msg(resp, err)
}

func (a connectAPI) stream(ctx context.Context, r *llmdiagv1.StreamHealthRequest) (func() (*llmdiagv1.StreamHealthResponse, error), error) {
	s, err := a.c.StreamHealth(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, err
	}
	return func() (*llmdiagv1.StreamHealthResponse, error) {
		if s.Receive() {
			return s.Msg(), nil
		}
		if err := s.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}, nil
}

func msg[T any](resp *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

type grpcAPI struct {
	c llmdiagv1.DiagnosisServiceClient
}

func (a grpcAPI) listNodes(ctx context.Context, r *llmdiagv1.ListNodesRequest) (*llmdiagv1.ListNodesResponse, error) {
	return a.c.ListNodes(ctx, r)
}

func (a grpcAPI) getNodeMetrics(ctx context.Context, r *llmdiagv1.GetNodeMetricsRequest) (*llmdiagv1.GetNodeMetricsResponse, error) {
	return a.c.GetNodeMetrics(ctx, r)
}

func (a grpcAPI) compare(ctx context.Context, r *llmdiagv1.ComparePercentilesRequest) (*llmdiagv1.ComparePercentilesResponse, error) {
	return a.c.ComparePercentiles(ctx, r)
}

func (a grpcAPI) diagnose(ctx context.Context, r *llmdiagv1.DiagnoseNodeRequest) (*llmdiagv1.DiagnoseNodeResponse, error) {
	return a.c.DiagnoseNode(ctx, r)
}

func (a grpcAPI) history(ctx context.Context, r *llmdiagv1.GetNodeHistoryRequest) (*llmdiagv1.GetNodeHistoryResponse, error) {
	return a.c.GetNodeHistory(ctx, r)
}

func (a grpcAPI) stream(ctx context.Context, r *llmdiagv1.StreamHealthRequest) (func() (*llmdiagv1.StreamHealthResponse, error), error) {
	s, err := a.c.StreamHealth(ctx, r)
	if err != nil {
		return nil, err
	}
	return s.Recv, nil
}

// code extracts the RPC status code from either client's error.
func code(err error) string {
	if err == nil {
		return "ok"
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return connect.Code(s.Code()).String() // the numeric codes are the same
	}
	return connect.CodeOf(err).String()
}

func apis(t *testing.T, url string) map[string]api {
	t.Helper()
	out := map[string]api{}
	for _, p := range []client.Protocol{client.ProtocolConnect, client.ProtocolConnectJSON, client.ProtocolGRPC, client.ProtocolGRPCWeb} {
		c, err := client.New(url, client.WithProtocol(p))
		if err != nil {
			t.Fatal(err)
		}
		out["connect-go/"+string(p)] = connectAPI{c}
	}
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	out["grpc-go"] = grpcAPI{llmdiagv1.NewDiagnosisServiceClient(conn)}
	return out
}

func TestEveryRPCOverEveryProtocol(t *testing.T) {
	url, st := startServer(t)
	for name, a := range apis(t, url) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			nodes, err := a.listNodes(ctx, &llmdiagv1.ListNodesRequest{})
			if err != nil {
				t.Fatalf("ListNodes: %v", err)
			}
			if got := len(nodes.GetNodes()); got != 3 {
				t.Fatalf("ListNodes: %d nodes, want 3", got)
			}
			only, err := a.listNodes(ctx, &llmdiagv1.ListNodesRequest{Model: "glm-4.6"})
			if err != nil || len(only.GetNodes()) != 1 || only.GetNodes()[0].GetId() != "glm-0" {
				t.Fatalf("ListNodes(model=glm-4.6) = %v, %v", only, err)
			}

			m, err := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: "deepseek-v4-0"})
			if err != nil {
				t.Fatalf("GetNodeMetrics: %v", err)
			}
			mm := m.GetMetrics()
			if mm.GetWindow() != "5m" || mm.GetStaleness() == nil || mm.GetObservedAt() == nil {
				t.Fatalf("GetNodeMetrics: window %q staleness %v observed %v", mm.GetWindow(), mm.GetStaleness(), mm.GetObservedAt())
			}
			// One minute of deltas: 1 (×100) prompt tokens 1.2e6/60 s = 20,000 tok/s; generation 7260/60 = 121 tok/s.
			if got := mm.GetPromptTokensPerSecond(); math.Abs(got-20000) > 1e-6 {
				t.Fatalf("prompt rate = %v, want 20000", got)
			}
			if got := mm.GetGenerationTokensPerSecond(); math.Abs(got-121) > 1e-9 {
				t.Fatalf("generation rate = %v, want 121", got)
			}
			p99 := mm.GetE2E().GetPercentiles()[2]
			if p99.GetQuantile() != 0.99 || !(p99.GetLowerBound() < p99.GetValue() && p99.GetValue() <= p99.GetUpperBound()) {
				t.Fatalf("E2E P99 %v not within its bucket bounds", p99)
			}
			life, err := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: "deepseek-v4-0", Window: "lifetime"})
			if err != nil || life.GetMetrics().GetWindow() != "lifetime" || life.GetMetrics().GetE2E().GetCount() != 101*60 {
				t.Fatalf("lifetime window: %v, %v", life, err)
			}

			cmp, err := a.compare(ctx, &llmdiagv1.ComparePercentilesRequest{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_E2E, GroupBy: llmdiagv1.GroupBy_GROUP_BY_MODEL})
			if err != nil {
				t.Fatalf("ComparePercentiles: %v", err)
			}
			if len(cmp.GetRows()) != 2 || cmp.GetRows()[0].GetSubject() != "deepseek-v4" || len(cmp.GetRows()[0].GetNodes()) != 2 {
				t.Fatalf("ComparePercentiles by model: rows %v", cmp.GetRows())
			}
			// deepseek is 20× slower: rank 2 of 2 at every quantile; glm rank 1.
			for qi := range cmp.GetQuantiles() {
				if cmp.GetRows()[0].GetValues()[qi].GetRank() != 2 || cmp.GetRows()[1].GetValues()[qi].GetRank() != 1 {
					t.Fatalf("ranks at q%d: %v", qi, cmp.GetRows())
				}
			}
			byNode, err := a.compare(ctx, &llmdiagv1.ComparePercentilesRequest{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Nodes: []string{"glm-0", "deepseek-v4-1"}, Quantiles: []float64{0.5, 0.99}})
			if err != nil || len(byNode.GetRows()) != 2 || len(byNode.GetRows()[0].GetValues()) != 2 {
				t.Fatalf("ComparePercentiles by node: %v, %v", byNode, err)
			}

			for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
				d, err := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: "deepseek-v4-0", Language: lang})
				if err != nil {
					t.Fatalf("DiagnoseNode: %v", err)
				}
				if d.GetDiagnosis().GetRootCause() != llmdiagv1.Cause_CAUSE_DECODE_BOUND || len(d.GetDiagnosis().GetFindings()) < 6 || d.GetReport() == "" {
					t.Fatalf("DiagnoseNode(%v): cause %v, %d findings, report %d bytes", lang, d.GetDiagnosis().GetRootCause(), len(d.GetDiagnosis().GetFindings()), len(d.GetReport()))
				}
			}

			sctx, scancel := context.WithCancel(ctx)
			defer scancel()
			recv, err := a.stream(sctx, &llmdiagv1.StreamHealthRequest{Model: "deepseek-v4", HeartbeatInterval: durationpb.New(time.Second)})
			if err != nil {
				t.Fatalf("StreamHealth: %v", err)
			}
			var initial []string
			for {
				ev, err := recv()
				if err != nil {
					t.Fatalf("StreamHealth recv: %v", err)
				}
				if ev.GetKind() == llmdiagv1.EventKind_EVENT_KIND_SYNCED {
					break
				}
				if ev.GetKind() != llmdiagv1.EventKind_EVENT_KIND_INITIAL {
					t.Fatalf("before SYNCED got %v", ev.GetKind())
				}
				initial = append(initial, ev.GetHealth().GetNode())
			}
			if strings.Join(initial, ",") != "deepseek-v4-0,deepseek-v4-1" {
				t.Fatalf("initial state for model deepseek-v4: %v", initial)
			}
			// A change to a selected node arrives; one to another model does not.
			if _, err := st.Publish(ctx, &llmdiagv1.NodeHealth{Node: "glm-0", Model: "glm-4.6", Status: llmdiagv1.Status_STATUS_CRIT}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Publish(ctx, &llmdiagv1.NodeHealth{Node: "deepseek-v4-1", Model: "deepseek-v4", Status: llmdiagv1.Status_STATUS_CRIT, RootCause: llmdiagv1.Cause_CAUSE_OVERLOADED}); err != nil {
				t.Fatal(err)
			}
			sawHeartbeat := false
			for {
				ev, err := recv()
				if err != nil {
					t.Fatalf("StreamHealth recv: %v", err)
				}
				if ev.GetKind() == llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT {
					sawHeartbeat = true
					continue
				}
				if ev.GetKind() != llmdiagv1.EventKind_EVENT_KIND_CHANGE || ev.GetHealth().GetNode() != "deepseek-v4-1" || ev.GetResumeToken() == "" {
					t.Fatalf("want the deepseek-v4-1 change, got %v", ev)
				}
				break
			}
			// Nothing else is published: the next event is a heartbeat.
			if ev, err := recv(); err != nil || ev.GetKind() != llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT {
				t.Fatalf("want a heartbeat, got %v %v (earlier heartbeat: %v)", ev, err, sawHeartbeat)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	url, _ := startServer(t)
	q := func(qs ...float64) *llmdiagv1.ComparePercentilesRequest {
		return &llmdiagv1.ComparePercentilesRequest{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Quantiles: qs}
	}
	tests := []struct {
		name      string
		call      func(context.Context, api) error
		wantCode  string
		wantField string
	}{
		{"unknown node", func(ctx context.Context, a api) error {
			_, err := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: "no-such-node"})
			return err
		}, "not_found", "no-such-node"},
		{"unknown node in metrics", func(ctx context.Context, a api) error {
			_, err := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: "no-such-node"})
			return err
		}, "not_found", "no-such-node"},
		{"empty node id", func(ctx context.Context, a api) error {
			_, err := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{})
			return err
		}, "invalid_argument", "node"},
		{"node id with PromQL in it", func(ctx context.Context, a api) error {
			_, err := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: `x"} or vector(1)`})
			return err
		}, "invalid_argument", "node"},
		{"percentile above 1", func(ctx context.Context, a api) error { _, err := a.compare(ctx, q(0.5, 1.5)); return err }, "invalid_argument", "quantiles"},
		{"percentile 0", func(ctx context.Context, a api) error { _, err := a.compare(ctx, q(0)); return err }, "invalid_argument", "quantiles"},
		{"percentile NaN", func(ctx context.Context, a api) error { _, err := a.compare(ctx, q(math.NaN())); return err }, "invalid_argument", "quantiles"},
		{"percentile 1", func(ctx context.Context, a api) error { _, err := a.compare(ctx, q(1)); return err }, "invalid_argument", "quantiles"},
		{"unknown metric", func(ctx context.Context, a api) error {
			_, err := a.compare(ctx, &llmdiagv1.ComparePercentilesRequest{Metric: 99})
			return err
		}, "invalid_argument", "metric"},
		{"unspecified metric", func(ctx context.Context, a api) error {
			_, err := a.compare(ctx, &llmdiagv1.ComparePercentilesRequest{})
			return err
		}, "invalid_argument", "metric"},
		{"unparsable window", func(ctx context.Context, a api) error {
			_, err := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: "glm-0", Window: "five minutes"})
			return err
		}, "invalid_argument", "window"},
		{"negative window", func(ctx context.Context, a api) error {
			_, err := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: "glm-0", Window: "-5m"})
			return err
		}, "invalid_argument", "window"},
		{"window in compare", func(ctx context.Context, a api) error {
			r := q(0.5)
			r.Window = "abc"
			_, err := a.compare(ctx, r)
			return err
		}, "invalid_argument", "window"},
		{"unknown node in compare", func(ctx context.Context, a api) error {
			r := q(0.5)
			r.Nodes = []string{"glm-0", "ghost"}
			_, err := a.compare(ctx, r)
			return err
		}, "not_found", "ghost"},
		{"unknown language", func(ctx context.Context, a api) error {
			_, err := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: "glm-0", Language: 42})
			return err
		}, "invalid_argument", "language"},
		{"unknown node in history", func(ctx context.Context, a api) error {
			_, err := a.history(ctx, &llmdiagv1.GetNodeHistoryRequest{Node: "no-such-node"})
			return err
		}, "not_found", "no-such-node"},
		{"empty node id in history", func(ctx context.Context, a api) error {
			_, err := a.history(ctx, &llmdiagv1.GetNodeHistoryRequest{})
			return err
		}, "invalid_argument", "node"},
		{"invalid node id in history", func(ctx context.Context, a api) error {
			_, err := a.history(ctx, &llmdiagv1.GetNodeHistoryRequest{Node: "a b"})
			return err
		}, "invalid_argument", "node"},
		{"negative history limit", func(ctx context.Context, a api) error {
			_, err := a.history(ctx, &llmdiagv1.GetNodeHistoryRequest{Node: "glm-0", Limit: -1})
			return err
		}, "invalid_argument", "limit"},
		{"history limit over the maximum", func(ctx context.Context, a api) error {
			_, err := a.history(ctx, &llmdiagv1.GetNodeHistoryRequest{Node: "glm-0", Limit: server.MaxHistoryPoints + 1})
			return err
		}, "invalid_argument", "limit"},
		{"heartbeat too short", func(ctx context.Context, a api) error {
			recv, err := a.stream(ctx, &llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(time.Millisecond)})
			if err != nil {
				return err
			}
			_, err = recv()
			return err
		}, "invalid_argument", "heartbeat_interval"},
	}
	for name, a := range apis(t, url) {
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := tc.call(ctx, a)
				if got := code(err); got != tc.wantCode {
					t.Fatalf("code = %s (%v), want %s", got, err, tc.wantCode)
				}
				if !strings.Contains(err.Error(), tc.wantField) {
					t.Fatalf("error %q does not name %q", err, tc.wantField)
				}
			})
		}
	}
}

func TestHealthReflectionAndMetrics(t *testing.T) {
	url, _ := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	hc := grpchealth.NewClient(http.DefaultClient, url)
	resp, err := hc.Check(ctx, &grpchealth.CheckRequest{})
	if err != nil || resp.Status != grpchealth.StatusServing {
		t.Fatalf("health (connect) = %v, %v; want SERVING", resp, err)
	}
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gr, err := grpchealthv1.NewHealthClient(conn).Check(ctx, &grpchealthv1.HealthCheckRequest{Service: "llmdiag.v1.DiagnosisService"})
	if err != nil || gr.GetStatus() != grpchealthv1.HealthCheckResponse_SERVING {
		t.Fatalf("health (grpc-go) = %v, %v; want SERVING", gr, err)
	}

	// A call, then /metrics shows it by procedure and code.
	c, _ := client.New(url)
	if _, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: "ghost"})); err == nil {
		t.Fatal("want NotFound")
	}
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`llmdiag_rpc_requests_total{code="ok",procedure="/llmdiag.v1.DiagnosisService/ListNodes"} 1`,
		`llmdiag_rpc_requests_total{code="not_found",procedure="/llmdiag.v1.DiagnosisService/DiagnoseNode"} 1`,
		`llmdiag_rpc_duration_seconds_bucket{procedure="/llmdiag.v1.DiagnosisService/ListNodes"`,
		`llmdiag_refresh_duration_seconds_count 1`,
		`llmdiag_nodes{status="STATUS_WARN"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestStaleDataIsNeverHealthy: when the refresh stopped an hour ago, every
// answer says so — UNKNOWN, not routable — instead of repeating old verdicts.
func TestStaleDataIsNeverHealthy(t *testing.T) {
	url, _, _ := startServerAt(t, time.Now().Add(-time.Hour))
	c, _ := client.New(url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Msg.GetNodes() {
		if n.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN || n.GetRoutable() || n.GetStaleness().AsDuration() < 59*time.Minute {
			t.Errorf("%s: status %v routable %v staleness %v", n.GetId(), n.GetStatus(), n.GetRoutable(), n.GetStaleness().AsDuration())
		}
	}
	for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
		d, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: "glm-0", Language: lang}))
		if err != nil {
			t.Fatal(err)
		}
		if g := d.Msg.GetDiagnosis(); g.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN || g.GetRootCause() != llmdiagv1.Cause_CAUSE_NO_DATA || !g.GetStale() || g.GetRoutable() {
			t.Errorf("%v: status %v cause %v stale %v routable %v", lang, g.GetStatus(), g.GetRootCause(), g.GetStale(), g.GetRoutable())
		}
	}
	m, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0"}))
	if err != nil || !m.Msg.GetMetrics().GetStale() {
		t.Fatalf("metrics not marked stale: %v %v", m, err)
	}
	stream, err := c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for stream.Receive() && stream.Msg().GetKind() == llmdiagv1.EventKind_EVENT_KIND_INITIAL {
		if h := stream.Msg().GetHealth(); h.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN || h.GetRoutable() {
			t.Errorf("stream initial state for %s: %v routable %v", h.GetNode(), h.GetStatus(), h.GetRoutable())
		}
	}
}

// TestShutdownEndsStreams: on SIGTERM (ctx cancelled) open streams end at
// once, so clients reconnect elsewhere, and the server stops well within its
// grace period.
func TestShutdownEndsStreams(t *testing.T) {
	st := memory.New(memory.Options{}, "s")
	srv := servertest.Start(t, servertest.Options{Store: st, Grace: 30 * time.Second})
	c, _ := client.New(srv.URL, client.WithProtocol(client.ProtocolGRPC))
	stream, err := c.StreamHealth(context.Background(), connect.NewRequest(&llmdiagv1.StreamHealthRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() || stream.Msg().GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED {
		t.Fatalf("want SYNCED first on an empty fleet, got %v %v", stream.Msg(), stream.Err())
	}
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop() }()
	for stream.Receive() {
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v with a stream open", d)
	}
}

// TestConnectJSONOverHTTP1 is the curl call of README's The API: a plain HTTP/1.1 POST
// of JSON, no generated client.
func TestConnectJSONOverHTTP1(t *testing.T) {
	url, _ := startServer(t)
	c := &http.Client{Transport: &http.Transport{}} // HTTP/1.1 only for http:// URLs
	res, err := c.Post(url+"/llmdiag.v1.DiagnosisService/DiagnoseNode", "application/json", strings.NewReader(`{"node":"deepseek-v4-0","language":"LANGUAGE_ZH"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 1 {
		t.Fatalf("HTTP %d over %s: %s", res.StatusCode, res.Proto, body)
	}
	var resp llmdiagv1.DiagnoseNodeResponse
	if err := protojson.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.GetDiagnosis().GetRootCause() != llmdiagv1.Cause_CAUSE_DECODE_BOUND || !strings.Contains(resp.GetReport(), "根本原因") {
		t.Fatalf("cause %v, report:\n%s", resp.GetDiagnosis().GetRootCause(), resp.GetReport())
	}
	// Errors are JSON with the Connect code.
	res, err = c.Post(url+"/llmdiag.v1.DiagnosisService/GetNodeMetrics", "application/json", strings.NewReader(`{"node":"ghost"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"not_found"`) {
		t.Fatalf("unknown node over HTTP/1.1: %d %s", res.StatusCode, body)
	}
}

func TestOversizedRequestIsRefused(t *testing.T) {
	url, _ := startServer(t)
	c, _ := client.New(url)
	ids := make([]string, 200_000) // ≈ 2.4 MB encoded
	for i := range ids {
		ids[i] = "node-00000"
	}
	_, err := c.ComparePercentiles(context.Background(), connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Nodes: ids}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("err = %v, want resource_exhausted", err)
	}
	_, err = c.ComparePercentiles(context.Background(), connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Nodes: ids[:1001]}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "nodes") {
		t.Fatalf("err = %v, want invalid_argument naming nodes", err)
	}
}

// TestOnDemandWindowsGoThroughTheCache: 50 concurrent identical requests for
// a non-default window cost one computation; another offset is another key.
func TestOnDemandWindowsGoThroughTheCache(t *testing.T) {
	url, _, src := startServerAt(t, time.Now())
	c, _ := client.New(url, client.WithProtocol(client.ProtocolGRPC))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0", Window: "1h"}))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := src.windowCalls.Load(); n != 1 {
		t.Fatalf("50 identical requests made %d window computations, want 1", n)
	}
	resp, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0", Window: "1h", Offset: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	if n := src.windowCalls.Load(); n != 2 {
		t.Fatalf("an offset request made %d computations in all, want 2", n)
	}
	// Staleness is against the time asked about: the data is from then.
	if m := resp.Msg.GetMetrics(); m.GetStale() || m.GetStaleness().AsDuration() > time.Minute || time.Since(m.GetObservedAt().AsTime()) < 59*time.Minute {
		t.Fatalf("1h-ago window: observed %v, staleness %v, stale %v", m.GetObservedAt().AsTime(), m.GetStaleness().AsDuration(), m.GetStale())
	}
	for _, bad := range []*durationpb.Duration{durationpb.New(-time.Second), durationpb.New(31 * 24 * time.Hour), {Seconds: 1, Nanos: -5}} {
		_, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0", Offset: bad}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "offset") {
			t.Errorf("offset %v: %v, want invalid_argument naming offset", bad, err)
		}
	}
}
