package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/server"
)

// countingReads answers every read and counts the calls that reach it.
type countingReads struct{ calls int }

func (c *countingReads) ListNodes(context.Context, *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	c.calls++
	return connect.NewResponse(&llmdiagv1.ListNodesResponse{}), nil
}

func (c *countingReads) GetNodeMetrics(context.Context, *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error) {
	c.calls++
	return connect.NewResponse(&llmdiagv1.GetNodeMetricsResponse{}), nil
}

func (c *countingReads) ComparePercentiles(context.Context, *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error) {
	c.calls++
	return connect.NewResponse(&llmdiagv1.ComparePercentilesResponse{}), nil
}

func (c *countingReads) DiagnoseNode(context.Context, *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error) {
	c.calls++
	return connect.NewResponse(&llmdiagv1.DiagnoseNodeResponse{}), nil
}

// TestLimitReads: a surface calling the service in process (MCP, Slack)
// spends the rate limit of the principal its request came from, each read
// alike, and a refusal names the limit.
func TestLimitReads(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	lim := server.NewLimiter(server.Limits{RateLimit: 1, RateBurst: 4, Now: func() time.Time { return now },
		Principal: func(r *http.Request) string { return r.Header.Get(principalHeader) }})
	svc := &countingReads{}
	reads := lim.LimitReads(svc)
	calls := []func(ctx context.Context) error{
		func(ctx context.Context) error {
			_, err := reads.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
			return err
		},
		func(ctx context.Context) error {
			_, err := reads.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{}))
			return err
		},
		func(ctx context.Context) error {
			_, err := reads.ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{}))
			return err
		},
		func(ctx context.Context) error {
			_, err := reads.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{}))
			return err
		},
	}
	// call makes the i-th read inside a request from principal, through
	// the limiter's HTTP part, as the surfaces' handlers do.
	call := func(principal string, i int) error {
		var err error
		h := lim.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { err = calls[i%len(calls)](r.Context()) }))
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
		req.Header.Set(principalHeader, principal)
		h.ServeHTTP(httptest.NewRecorder(), req)
		return err
	}
	for i := range 4 {
		if err := call("alice", i); err != nil {
			t.Fatalf("read %d within alice's burst: %v", i+1, err)
		}
	}
	for i := range 4 {
		err := call("alice", i)
		if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "--rate-limit") || !strings.Contains(err.Error(), `"alice"`) {
			t.Fatalf("read %d past alice's burst: want resource exhausted naming the limit, got %v", i+1, err)
		}
	}
	if err := call("bob", 3); err != nil {
		t.Fatalf("bob while alice is limited: %v", err)
	}
	if svc.calls != 5 {
		t.Errorf("%d reads reached the service, want 5 (4 of alice's, 1 of bob's)", svc.calls)
	}
}
