package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

func f64(v float64) *float64 { return &v }

// addPoint stores one more refresh of node, a second after its last, with
// point p (its time set here).
func addPoint(t *testing.T, st *memory.Store, node string, p diagnose.Point) time.Time {
	t.Helper()
	ctx := context.Background()
	rec, err := st.Get(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	at := rec.Metrics.GetObservedAt().AsTime().Add(time.Second).Truncate(time.Millisecond)
	m := proto.Clone(rec.Metrics).(*llmdiagv1.NodeMetrics)
	m.ObservedAt = timestamppb.New(at)
	p.At = at
	if err := st.Put(ctx, &store.Record{Node: rec.Node, Metrics: m, Diagnosis: rec.Diagnosis}, p); err != nil {
		t.Fatal(err)
	}
	return at
}

func TestGetNodeHistory(t *testing.T) {
	url, st := startServer(t)
	at := addPoint(t, st, "deepseek-v4-0", diagnose.Point{
		Up: true, Queue: f64(3), Running: f64(40), KVPressure: f64(0.5),
		E2EMean: f64(12.5), E2EP99: f64(40), GenerationRate: f64(121),
		Status: llmdiagv1.Status_STATUS_WARN,
	})
	for name, a := range apis(t, url) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := a.history(ctx, &llmdiagv1.GetNodeHistoryRequest{Node: "deepseek-v4-0"})
			if err != nil {
				t.Fatal(err)
			}
			pts := resp.GetPoints()
			if len(pts) != 2 {
				t.Fatalf("%d points, want 2 (the refresh's and the one added)", len(pts))
			}
			// The refresh's point: gauges read, but its 5m window was
			// covered for a minute only, so no window figures: absent,
			// not 0.
			first := pts[0]
			if !first.GetUp() || first.Queue == nil || first.GetRunning() != 40 || first.KvPressure == nil {
				t.Errorf("first point %v: want up with queue, running 40 and KV pressure", first)
			}
			if first.E2EMeanSeconds != nil || first.E2EP99Seconds != nil || first.GenerationTokensPerSecond != nil {
				t.Errorf("first point %v: window figures of an uncovered window present, want absent", first)
			}
			last := pts[1]
			if !last.GetAt().AsTime().Equal(at) || !first.GetAt().AsTime().Before(at) {
				t.Errorf("points at %v, %v: want oldest first, the last at %v", first.GetAt().AsTime(), last.GetAt().AsTime(), at)
			}
			if last.GetQueue() != 3 || last.GetKvPressure() != 0.5 || last.GetE2EMeanSeconds() != 12.5 || last.GetE2EP99Seconds() != 40 ||
				last.GetGenerationTokensPerSecond() != 121 || last.GetStatus() != llmdiagv1.Status_STATUS_WARN {
				t.Errorf("last point %v: want the figures stored", last)
			}
			if resp.GetDegraded() != nil {
				t.Errorf("degraded %v from a memory store", resp.GetDegraded())
			}

			newest, err := a.history(ctx, &llmdiagv1.GetNodeHistoryRequest{Node: "deepseek-v4-0", Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(newest.GetPoints()) != 1 || !newest.GetPoints()[0].GetAt().AsTime().Equal(at) {
				t.Errorf("limit 1: %v, want the newest point only", newest.GetPoints())
			}
		})
	}
}
