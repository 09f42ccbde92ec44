package store_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := func(status llmdiagv1.Status, routable bool, age time.Duration) *store.Record {
		return &store.Record{Node: &llmdiagv1.Node{Id: "n", Status: status, Routable: routable},
			Metrics: &llmdiagv1.NodeMetrics{ObservedAt: timestamppb.New(now.Add(-age))}}
	}
	for _, tc := range []struct {
		name  string
		rec   *store.Record
		want  store.Routability
		stale bool
	}{
		{"routable", rec(llmdiagv1.Status_STATUS_OK, true, time.Second), store.Routable, false},
		{"not routable", rec(llmdiagv1.Status_STATUS_CRIT, false, time.Second), store.NotRoutable, false},
		{"stale", rec(llmdiagv1.Status_STATUS_CRIT, false, 31*time.Second), store.Unknown, true},
		{"at the staleness bound", rec(llmdiagv1.Status_STATUS_OK, true, 30*time.Second), store.Routable, false},
		{"UNKNOWN", rec(llmdiagv1.Status_STATUS_UNKNOWN, false, time.Second), store.Unknown, false},
		{"no record", nil, store.Unknown, false},
		{"no observation time", &store.Record{Node: &llmdiagv1.Node{Status: llmdiagv1.Status_STATUS_OK, Routable: true}}, store.Unknown, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, stale := store.Decide(tc.rec, now, 30*time.Second)
			if got != tc.want || stale != tc.stale {
				t.Errorf("Decide = %v, stale %v; want %v, stale %v", got, stale, tc.want, tc.stale)
			}
		})
	}
}
