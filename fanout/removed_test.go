package fanout_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fanout"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

func removed(node string) *llmdiagv1.NodeHealth {
	return &llmdiagv1.NodeHealth{Node: node, Model: "m", Status: llmdiagv1.Status_STATUS_UNKNOWN, RootCause: llmdiagv1.Cause_CAUSE_NO_DATA, Removed: true}
}

// A removal reaches every subscriber, even one last sent the same status,
// cause and routability, and the hub forgets the node.
func TestRemovedNodeLeavesHubAndSubscribers(t *testing.T) {
	st, h, _ := start(t, 64, fanout.Options{})
	sub, _ := syncSub(t, h, fanout.SubOptions{Heartbeat: time.Hour})
	unknown := &llmdiagv1.NodeHealth{Node: "a", Model: "m", Status: llmdiagv1.Status_STATUS_UNKNOWN, RootCause: llmdiagv1.Cause_CAUSE_NO_DATA}
	publish(t, st, unknown)
	first := publish(t, st, health("b", llmdiagv1.Status_STATUS_OK, 0.1))
	for range 2 {
		next(t, sub)
	}
	if n := h.Nodes(); n != 2 {
		t.Fatalf("hub holds %d nodes, want 2", n)
	}
	publish(t, st, removed("a"))
	if m := next(t, sub); m.Health.GetNode() != "a" || !m.Health.GetRemoved() {
		t.Fatalf("next = %v, want a's removal (same status as last sent, still news)", m.Health)
	}
	testkit.Eventually(t, 5*time.Second, "hub forgets the removed node", func() bool { return h.Nodes() == 1 })
	// A new subscriber does not see it; one resuming from before the
	// removal gets it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s2, _, seen, err := h.Sync(ctx, fanout.SubOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if len(seen) != 1 || seen[0].GetNode() != "b" {
		t.Errorf("Sync after the removal saw %v, want only b", seen)
	}
	resumed, err := h.Resume(ctx, first.Token, fanout.SubOptions{Heartbeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if m := next(t, resumed); m.Health.GetNode() != "a" || !m.Health.GetRemoved() {
		t.Errorf("resumed subscriber got %v, want a's removal", m.Health)
	}
}

// expiring is a feed whose reader's position expires on demand.
type expiring struct {
	*memory.Store
	expire atomic.Bool
}

func (e *expiring) Events(ctx context.Context, token string, max int, wait time.Duration) ([]store.Event, error) {
	if e.expire.CompareAndSwap(true, false) {
		return nil, store.ErrTokenExpired
	}
	return e.Store.Events(ctx, token, max, wait)
}

// A hub that fell behind and resynchronises from the current state tells
// its subscribers about the nodes that left meanwhile.
func TestResyncRemovesNodesThatLeft(t *testing.T) {
	feed := &expiring{Store: memory.New(memory.Options{}, "r")}
	var current atomic.Pointer[[]*llmdiagv1.NodeHealth]
	h := fanout.New(feed, fanout.Options{Wait: 50 * time.Millisecond, Current: func(context.Context) ([]*llmdiagv1.NodeHealth, error) {
		return *current.Load(), nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	go h.Run(ctx)
	t.Cleanup(func() { cancel(); <-h.Done() })
	sub, _ := syncSub(t, h, fanout.SubOptions{Heartbeat: time.Hour})
	a, b := health("a", llmdiagv1.Status_STATUS_OK, 0.1), health("b", llmdiagv1.Status_STATUS_OK, 0.2)
	publish(t, feed, a)
	publish(t, feed, b)
	for range 2 {
		next(t, sub)
	}
	current.Store(&[]*llmdiagv1.NodeHealth{b})
	feed.expire.Store(true)
	testkit.Eventually(t, 5*time.Second, "hub resyncs", func() bool { return h.Stats().Resyncs == 1 })
	m := next(t, sub)
	if m.Health.GetNode() != "a" || !m.Health.GetRemoved() || m.Health.GetRoutable() || m.Health.GetModel() != "m" {
		t.Fatalf("after resync: %v, want a's removal with its model", m.Health)
	}
	if n := h.Nodes(); n != 1 {
		t.Errorf("hub holds %d nodes after the resync, want 1", n)
	}
}
