package refresh_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store/memory"
)

// TestSetFleetRemovesGoneNodes: a node the fleet no longer has is removed
// at the next refresh, long before the retention, with a final removed
// event; one brought back before that refresh stays; without removeGone
// nothing is removed.
func TestSetFleetRemovesGoneNodes(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := memory.New(memory.Options{Now: clock}, "n")
	rec := &sets{}
	fl := func(ids ...string) map[string]fleet.Node {
		m := map[string]fleet.Node{}
		for _, id := range ids {
			m[id] = fleet.Node{ID: id, URL: "http://127.0.0.1:1/metrics"}
		}
		return m
	}
	src := &listed{now: &now, ids: []string{"a", "b", "c"}}
	loop := refresh.New(src, st, rec, slog.New(slog.DiscardHandler), clock, refresh.Config{
		Interval: 5 * time.Second, Retention: time.Hour, Thresholds: diagnose.DefaultThresholds(), Fleet: fl("a", "b", "c"),
	})
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	start, _ := st.LastToken(ctx)
	// b and c leave; c comes back before the refresh.
	src.ids = []string{"a", "c"}
	loop.SetFleet(fl("a"), true)
	loop.SetFleet(fl("a", "c"), true)
	now = now.Add(5 * time.Second)
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if rec.removed != 1 {
		t.Fatalf("removed %d nodes, want b alone", rec.removed)
	}
	if _, err := st.Get(ctx, "b"); err == nil {
		t.Fatal("b still in the store")
	}
	for _, id := range []string{"a", "c"} {
		if _, err := st.Get(ctx, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	evs, err := st.Events(ctx, start, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, e := range evs {
		if e.Health.GetRemoved() {
			removed = append(removed, e.Health.GetNode())
		}
	}
	if len(removed) != 1 || removed[0] != "b" {
		t.Fatalf("removed events %v, want [b]", removed)
	}
	// Without removeGone (Prometheus finds nodes itself) nothing leaves.
	loop.SetFleet(fl(), false)
	now = now.Add(5 * time.Second)
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if rec.removed != 1 || st.Len() != 2 {
		t.Fatalf("removed %d, store %d nodes; want nothing more removed", rec.removed, st.Len())
	}
}

// lockedList is listed whose ids change while Run reads them.
type lockedList struct {
	mu sync.Mutex
	listed
}

func (l *lockedList) set(ids ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = ids
}

func (l *lockedList) Refresh(ctx context.Context, fl string) ([]source.Observation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.listed.Refresh(ctx, fl)
}

// TestSetFleetRefreshesAtOnce: with an Interval of an hour, a node SetFleet
// adds is stored, and one it drops removed, at once: Run refreshes when
// the fleet's nodes change, not at its next tick.
func TestSetFleetRefreshesAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := memory.New(memory.Options{Now: clock}, "n")
	fl := func(ids ...string) map[string]fleet.Node {
		m := map[string]fleet.Node{}
		for _, id := range ids {
			m[id] = fleet.Node{ID: id, URL: "http://127.0.0.1:1/metrics"}
		}
		return m
	}
	src := &lockedList{listed: listed{now: &now, ids: []string{"a"}}}
	rec := &sets{}
	loop := refresh.New(src, st, rec, slog.New(slog.DiscardHandler), clock, refresh.Config{
		Interval: time.Hour, Retention: 2 * time.Hour, Thresholds: diagnose.DefaultThresholds(), Fleet: fl("a"),
	})
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-loop.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("no first refresh within 10s")
	}
	stored := func(id string) bool { _, err := st.Get(ctx, id); return err == nil }

	src.set("a", "b")
	loop.SetFleet(fl("a", "b"), true)
	testkit.Wait{For: 10 * time.Second}.Until(t, "b stored", func() bool { return stored("b") })

	src.set("b")
	loop.SetFleet(fl("b"), true)
	testkit.Wait{For: 10 * time.Second}.Until(t, "a removed", func() bool { return !stored("a") })
	if !stored("b") {
		t.Error("b removed with a")
	}
}

// TestFleetOnly: with FleetOnly, a node the source presents but the fleet
// does not list is not stored (reading Prometheus, discovery decides which
// series are nodes); one the fleet drops is removed as it goes.
func TestFleetOnly(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := memory.New(memory.Options{Now: clock}, "n")
	fl := func(ids ...string) map[string]fleet.Node {
		m := map[string]fleet.Node{}
		for _, id := range ids {
			m[id] = fleet.Node{ID: id}
		}
		return m
	}
	src := &listed{now: &now, ids: []string{"a", "b", "c"}}
	loop := refresh.New(src, st, &sets{}, slog.New(slog.DiscardHandler), clock, refresh.Config{
		Interval: 5 * time.Second, Retention: time.Hour, Thresholds: diagnose.DefaultThresholds(), Fleet: fl("a", "b"), FleetOnly: true,
	})
	stored := func() []string {
		var ids []string
		for _, id := range []string{"a", "b", "c"} {
			if _, err := st.Get(ctx, id); err == nil {
				ids = append(ids, id)
			}
		}
		return ids
	}
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("stored %v, want a and b, the fleet's", got)
	}
	loop.SetFleet(fl("a", "c"), true)
	now = now.Add(5 * time.Second)
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("stored %v after the fleet changed, want a and c", got)
	}
}
