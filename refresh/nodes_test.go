package refresh_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store/memory"
)

// listed presents the ids it is given, each with labels.
type listed struct {
	now *time.Time
	ids []string
}

func (l *listed) Window(context.Context, string, string, time.Duration) (*llmdiagv1.NodeMetrics, error) {
	return nil, source.ErrUnknownNode
}

func (l *listed) Refresh(context.Context, string) ([]source.Observation, error) {
	var obs []source.Observation
	for _, id := range l.ids {
		obs = append(obs, source.Observation{
			Node: fleet.Node{ID: id, Labels: map[string]string{"pool": "p1"}},
			Metrics: &llmdiagv1.NodeMetrics{Node: id, Model: "m", Window: "5m", Up: true, ObservedAt: timestamppb.New(*l.now),
				Queue: sample.F(0), Running: sample.F(1), KvPressure: sample.F(0.1)},
		})
	}
	return obs, nil
}

func TestAdmitSweepAndTell(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := memory.New(memory.Options{Now: clock}, "n")
	var logs testkit.SyncBuffer
	rec := &sets{}
	src := &listed{now: &now, ids: []string{"a", "b", "bad id", "c", strings.Repeat("x", 129)}}
	loop := refresh.New(src, st, rec, slog.New(slog.NewTextHandler(&logs, nil)), clock, refresh.Config{
		Interval: 5 * time.Second, Retention: time.Minute, MaxNodes: 2, Thresholds: diagnose.DefaultThresholds(),
	})
	start, _ := st.LastToken(ctx)
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Len() != 2 || rec.refused != 1 || rec.invalid != 2 || rec.maxKept != 2 {
		t.Fatalf("store %d nodes, refused %d, invalid %d, kept %d; want 2, 1, 2, 2", st.Len(), rec.refused, rec.invalid, rec.maxKept)
	}
	for _, want := range []string{`msg="skipped nodes with invalid ids`, `count=2 example="bad id"`, `msg="node cap reached`, "refused=1 max_nodes=2 kept=2"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	// a stays, b leaves the source: the cap keeps refusing c while b is
	// within the retention, then b is swept and c gets its place.
	src.ids = []string{"a", "c"}
	now = now.Add(30 * time.Second)
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "c"); err == nil || rec.refused != 2 {
		t.Fatalf("c admitted while b was within the retention (refused %d)", rec.refused)
	}
	now = now.Add(31 * time.Second)
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if rec.removed != 1 {
		t.Fatalf("removed %d, want b", rec.removed)
	}
	if _, err := st.Get(ctx, "b"); err == nil {
		t.Fatal("b is still in the store after the retention")
	}
	evs, err := st.Events(ctx, start, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1].Health
	if last.GetNode() != "b" || !last.GetRemoved() || last.GetRoutable() || last.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN ||
		last.GetRootCause() != llmdiagv1.Cause_CAUSE_NO_DATA || last.GetModel() != "m" || last.GetLabels()["pool"] != "p1" {
		t.Fatalf("last event = %v, want b's removal: UNKNOWN, NO_DATA, not routable, with its model and labels", last)
	}
	if got := last.GetStaleness().AsDuration(); got != 61*time.Second {
		t.Errorf("removal staleness %v, want 61s since b was last observed", got)
	}
	// The sweep ran after the refresh's admissions: c waits for the next.
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "c"); err != nil {
		t.Fatalf("c not admitted once b left: %v", err)
	}
	if !strings.Contains(logs.String(), `msg="nodes left the fleet: unseen for the retention" count=1 first=b`) {
		t.Errorf("log lacks the removal line:\n%s", logs.String())
	}
}

// A new run (a new ingest term) counts the nodes the store already holds
// against the cap.
func TestCapCountsWhatTheStoreHolds(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := memory.New(memory.Options{Now: clock}, "n")
	src := &listed{now: &now, ids: []string{"a", "b"}}
	cfg := refresh.Config{Retention: time.Hour, MaxNodes: 2, Thresholds: diagnose.DefaultThresholds()}
	if err := refresh.New(src, st, &sets{}, slog.New(slog.DiscardHandler), clock, cfg).Once(ctx); err != nil {
		t.Fatal(err)
	}
	rec := &sets{}
	src.ids = []string{"c"}
	if err := refresh.New(src, st, rec, slog.New(slog.DiscardHandler), clock, cfg).Once(ctx); err != nil {
		t.Fatal(err)
	}
	if rec.refused != 1 || st.Len() != 2 {
		t.Fatalf("a new loop over a full store: refused %d, store %d nodes; want 1 and 2", rec.refused, st.Len())
	}
}

// TestQuietNodesTurnUnknownOnce: a node the source stops presenting (a pod
// gone from Prometheus) is announced UNKNOWN and not routable once, after
// stale_after, so routers stop sending it traffic long before the retention
// sweeps it; when it comes back its verdict is news again.
func TestQuietNodesTurnUnknownOnce(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := memory.New(memory.Options{Now: clock}, "n")
	src := &listed{now: &now, ids: []string{"a", "b"}}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second // serve's --stale-after default
	loop := refresh.New(src, st, &sets{}, discardLog(), clock, refresh.Config{Interval: 5 * time.Second, Retention: time.Hour, Thresholds: th})
	once := func() []*llmdiagv1.NodeHealth {
		t.Helper()
		from, err := st.LastToken(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, from, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		var hs []*llmdiagv1.NodeHealth
		for _, e := range evs {
			hs = append(hs, e.Health)
		}
		return hs
	}
	if hs := once(); len(hs) != 2 {
		t.Fatalf("first refresh published %d events, want a's and b's", len(hs))
	}
	src.ids = []string{"a"}
	for _, step := range []time.Duration{5 * time.Second, 25 * time.Second} { // b unseen for 30s: not yet past stale_after
		now = now.Add(step)
		if hs := once(); len(hs) != 0 {
			t.Fatalf("%v after b left: events %v, want none while b is within stale_after", step, hs)
		}
	}
	now = now.Add(5 * time.Second)
	hs := once()
	if len(hs) != 1 {
		t.Fatalf("past stale_after: events %v, want one for b", hs)
	}
	if b := hs[0]; b.GetNode() != "b" || b.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN || b.GetRootCause() != llmdiagv1.Cause_CAUSE_NO_DATA ||
		b.GetRoutable() || b.GetRemoved() || b.GetModel() != "m" || b.GetLabels()["pool"] != "p1" || b.GetStaleness().AsDuration() != 35*time.Second {
		t.Fatalf("b's event = %v, want UNKNOWN, NO_DATA, not routable, not removed, model m, pool p1, 35s stale", b)
	}
	now = now.Add(5 * time.Second)
	if hs := once(); len(hs) != 0 {
		t.Fatalf("b announced again: %v", hs)
	}
	if _, err := st.Get(ctx, "b"); err != nil {
		t.Fatalf("b left the store before the retention: %v", err)
	}
	src.ids = []string{"a", "b"}
	now = now.Add(5 * time.Second)
	hs = once()
	if len(hs) != 1 || hs[0].GetNode() != "b" || !hs[0].GetRoutable() || hs[0].GetStatus() == llmdiagv1.Status_STATUS_UNKNOWN {
		t.Fatalf("b came back: events %v, want b's fresh verdict, routable", hs)
	}
	now = now.Add(5 * time.Second)
	if hs := once(); len(hs) != 0 {
		t.Fatalf("b's return published twice: %v", hs)
	}
}
