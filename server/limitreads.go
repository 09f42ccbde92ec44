package server

import (
	"context"

	"connectrpc.com/connect"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Reads are the DiagnosisService's unary reads, as the surfaces that call
// the service in process (the MCP server, Slack's command) use them. The
// service and a Connect client both have them.
type Reads interface {
	ListNodes(context.Context, *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error)
	GetNodeMetrics(context.Context, *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error)
	ComparePercentiles(context.Context, *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error)
	DiagnoseNode(context.Context, *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error)
}

// LimitReads returns svc with each call taken from the rate limit of the
// principal Wrap named in the call's context, as Interceptor takes each
// RPC: a surface that calls the service in process spends its caller's
// --rate-limit like the RPCs do, and a refusal is the same
// ResourceExhausted naming the limit.
func (l *Limiter) LimitReads(svc Reads) Reads { return limitedReads{l: l, svc: svc} }

type limitedReads struct {
	l   *Limiter
	svc Reads
}

func (r limitedReads) ListNodes(ctx context.Context, req *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	if err := r.l.allow(principalOf(ctx)); err != nil {
		return nil, err
	}
	return r.svc.ListNodes(ctx, req)
}

func (r limitedReads) GetNodeMetrics(ctx context.Context, req *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error) {
	if err := r.l.allow(principalOf(ctx)); err != nil {
		return nil, err
	}
	return r.svc.GetNodeMetrics(ctx, req)
}

func (r limitedReads) ComparePercentiles(ctx context.Context, req *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error) {
	if err := r.l.allow(principalOf(ctx)); err != nil {
		return nil, err
	}
	return r.svc.ComparePercentiles(ctx, req)
}

func (r limitedReads) DiagnoseNode(ctx context.Context, req *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error) {
	if err := r.l.allow(principalOf(ctx)); err != nil {
		return nil, err
	}
	return r.svc.DiagnoseNode(ctx, req)
}
