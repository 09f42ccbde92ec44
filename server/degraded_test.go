package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/replica"
	"github.com/llmdiag/llmdiag/telemetry"
)

// downable is a shared store that can be made unreachable. The Redis
// store's tests take a real redis-server down; this one checks what the
// service makes of a replica answering from its copy.
type downable struct {
	store.Store
	down atomic.Bool
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:6379: connection refused")

func (d *downable) Put(ctx context.Context, rec *store.Record, p diagnose.Point) error {
	if d.down.Load() {
		return errUnreachable
	}
	return d.Store.Put(ctx, rec, p)
}

func (d *downable) List(ctx context.Context) ([]*store.Record, error) {
	if d.down.Load() {
		return nil, errUnreachable
	}
	return d.Store.List(ctx)
}

func (d *downable) Publish(ctx context.Context, h *llmdiagv1.NodeHealth) (store.Event, error) {
	if d.down.Load() {
		return store.Event{}, errUnreachable
	}
	return d.Store.Publish(ctx, h)
}

func (d *downable) LastToken(ctx context.Context) (string, error) {
	if d.down.Load() {
		return "", errUnreachable
	}
	return d.Store.LastToken(ctx)
}

func (d *downable) Events(ctx context.Context, token string, max int, wait time.Duration) ([]store.Event, error) {
	if d.down.Load() {
		return nil, errUnreachable
	}
	return d.Store.Events(ctx, token, max, wait)
}

func TestSharedStoreOutage(t *testing.T) {
	now := time.Now()
	src := &fakeSource{now: now, nodes: []fleet.Node{
		{ID: "glm-0", Model: "glm-4.6"}, {ID: "glm-1", Model: "glm-4.6"},
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	tm, err := telemetry.New(reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = time.Minute
	shared := &downable{Store: memory.New(memory.Options{}, "shared")}
	rep := replica.New(shared, memory.New(memory.Options{}, "copy"), replica.Options{SyncEvery: 10 * time.Second}) // synced by hand below
	ctx := context.Background()
	loop := refresh.New(src, rep, tm, log, time.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th})
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rep.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, servertest.Options{Store: rep, Source: src, Log: log, Registry: reg,
		Config: server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: time.Minute, Thresholds: th, MinHeartbeat: time.Second}})
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	stream, err := c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for stream.Receive() && stream.Msg().GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED {
	}
	if stream.Err() != nil {
		t.Fatal(stream.Err())
	}

	shared.down.Store(true)
	if err := rep.Sync(ctx); err == nil {
		t.Fatal("Sync with the shared store down did not fail")
	}
	// Every unary RPC answers, from the copy, and says so.
	checks := []struct {
		rpc string
		do  func() (*llmdiagv1.Degraded, error)
	}{
		{"ListNodes", func() (*llmdiagv1.Degraded, error) {
			r, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
			if err == nil && len(r.Msg.GetNodes()) != 2 {
				t.Errorf("ListNodes during the outage: %d nodes, want 2", len(r.Msg.GetNodes()))
			}
			return r.Msg.GetDegraded(), err
		}},
		{"GetNodeMetrics", func() (*llmdiagv1.Degraded, error) {
			r, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0"}))
			return r.Msg.GetDegraded(), err
		}},
		{"DiagnoseNode", func() (*llmdiagv1.Degraded, error) {
			r, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: "glm-0"}))
			return r.Msg.GetDegraded(), err
		}},
		// A mask never hides that an answer is degraded.
		{"ListNodes masked", func() (*llmdiagv1.Degraded, error) {
			r, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"id"}}}))
			return r.Msg.GetDegraded(), err
		}},
		{"GetNodeMetrics masked", func() (*llmdiagv1.Degraded, error) {
			r, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0", ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"queue"}}}))
			return r.Msg.GetDegraded(), err
		}},
		{"DiagnoseNode masked", func() (*llmdiagv1.Degraded, error) {
			r, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: "glm-0", ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"routable", "status"}}}))
			return r.Msg.GetDegraded(), err
		}},
		{"ComparePercentiles", func() (*llmdiagv1.Degraded, error) {
			r, err := c.ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_E2E}))
			return r.Msg.GetDegraded(), err
		}},
	}
	for _, ck := range checks {
		d, err := ck.do()
		if err != nil {
			t.Errorf("%s during the outage: %v; want an answer from the copy", ck.rpc, err)
			continue
		}
		if d == nil || d.GetReason() == "" {
			t.Errorf("%s during the outage: degraded = %v, want the reason set", ck.rpc, d)
		}
	}

	// A status change made during the outage reaches the open stream once
	// the shared store answers again; meanwhile the stream stays open.
	if _, err := rep.Publish(ctx, &llmdiagv1.NodeHealth{Node: "glm-1", Model: "glm-4.6", Status: llmdiagv1.Status_STATUS_CRIT, RootCause: llmdiagv1.Cause_CAUSE_OVERLOADED}); err != nil {
		t.Fatalf("Publish during the outage: %v", err)
	}
	beats := 0
	for stream.Receive() {
		if stream.Msg().GetKind() == llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT {
			if beats++; beats == 2 {
				break
			}
		}
	}
	if beats < 2 {
		t.Fatalf("stream ended during the outage: %v", stream.Err())
	}
	shared.down.Store(false)
	if err := rep.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
		m := stream.Msg()
		if m.GetKind() == llmdiagv1.EventKind_EVENT_KIND_CHANGE {
			if m.GetHealth().GetNode() != "glm-1" || m.GetHealth().GetStatus() != llmdiagv1.Status_STATUS_CRIT {
				t.Errorf("first change after the outage = %v, want glm-1 CRIT", m.GetHealth())
			}
			break
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	r, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
	if err != nil || r.Msg.GetDegraded() != nil {
		t.Errorf("ListNodes after recovery: degraded %v, err %v; want neither", r.Msg.GetDegraded(), err)
	}
}
