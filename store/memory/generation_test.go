package memory_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/storetest"
	"github.com/llmdiag/llmdiag/store/memory"
)

// TestGeneration: the generation moves with every change to what reads
// return (a Put, a Take of another record, a node leaving by Delete,
// RetainUnwritten or Sweep) and stays when nothing changed, above all when
// a replica's full check takes what the store already holds.
func TestGeneration(t *testing.T) {
	ctx := context.Background()
	now := storetest.End
	s := memory.New(memory.Options{Now: func() time.Time { return now }}, "g")
	a, b := storetest.MakeNode(0, 3, nil), storetest.MakeNode(1, 3, nil)
	steps := []struct {
		name    string
		do      func() error
		changes bool
	}{
		{"Put", func() error { return s.Put(ctx, a.Record, a.Points[2]) }, true},
		{"Take of a new node", func() error { _, err := s.Take(ctx, b.Record, b.Points); return err }, true},
		{"Take of the same record and history", func() error { _, err := s.Take(ctx, b.Record, b.Points); return err }, false},
		{"Take of the same record, another history", func() error { _, err := s.Take(ctx, b.Record, b.Points[1:]); return err }, true},
		{"Take of an older record (refused)", func() error {
			older := proto.Clone(a.Record.Metrics).(*llmdiagv1.NodeMetrics)
			older.ObservedAt = timestamppb.New(storetest.End.Add(-time.Minute))
			took, err := s.Take(ctx, &store.Record{Node: a.Record.Node, Metrics: older}, a.Points[:1])
			if took {
				t.Error("Take replaced a newer record")
			}
			return err
		}, false},
		{"Delete of an unknown node", func() error { return s.Delete(ctx, "nope") }, false},
		{"RetainUnwritten keeping both", func() error {
			return s.RetainUnwritten(ctx, map[string]bool{a.Record.Node.GetId(): true, b.Record.Node.GetId(): true}, s.Puts())
		}, false},
		{"Sweep of nothing", func() error { _, err := s.Sweep(ctx, time.Hour); return err }, false},
		{"Delete", func() error { return s.Delete(ctx, b.Record.Node.GetId()) }, true},
		{"Sweep", func() error { now = now.Add(2 * time.Hour); _, err := s.Sweep(ctx, time.Hour); return err }, true},
	}
	for _, st := range steps {
		before := s.Generation()
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if changed := s.Generation() != before; changed != st.changes {
			t.Errorf("%s: generation changed %v, want %v", st.name, changed, st.changes)
		}
	}
	if s.Len() != 0 {
		t.Errorf("%d nodes left after the sweep", s.Len())
	}
}
