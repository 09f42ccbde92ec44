package memory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

func rec(id, model string) *store.Record {
	return &store.Record{
		Node:    &llmdiagv1.Node{Id: id, Model: model},
		Metrics: &llmdiagv1.NodeMetrics{Node: id, Model: model},
	}
}

func TestRecordsAndHistory(t *testing.T) {
	ctx := context.Background()
	s := memory.New(memory.Options{HistoryLen: 3}, "e1")
	for i := range 5 {
		if err := s.Put(ctx, rec("b", "m"), diagnose.Point{At: time.Unix(int64(i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, rec("a", "m"), diagnose.Point{At: time.Unix(9, 0)}); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Node.GetId() != "a" || list[1].Node.GetId() != "b" {
		t.Fatalf("List = %v, want a then b", list)
	}
	h, err := s.History(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || h[0].At.Unix() != 2 || h[2].At.Unix() != 4 {
		t.Fatalf("History = %v, want the last 3 points (2..4)", h)
	}
	// Records are copies: changing one does not change the store.
	got, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	got.Node.Model = "changed"
	again, _ := s.Get(ctx, "a")
	if again.Node.GetModel() != "m" {
		t.Fatalf("store shares its records with callers")
	}
	for _, call := range []func() error{
		func() error { _, err := s.Get(ctx, "nope"); return err },
		func() error { _, err := s.History(ctx, "nope"); return err },
	} {
		if err := call(); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown node: err = %v, want ErrNotFound", err)
		}
	}
}

func health(node string, s llmdiagv1.Status) *llmdiagv1.NodeHealth {
	return &llmdiagv1.NodeHealth{Node: node, Status: s}
}

func TestFeed(t *testing.T) {
	ctx := context.Background()
	s := memory.New(memory.Options{FeedLen: 4}, "e1")
	start, err := s.LastToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing yet: Events waits, then returns empty.
	evs, err := s.Events(ctx, start, 10, 20*time.Millisecond)
	if err != nil || len(evs) != 0 {
		t.Fatalf("empty feed: %v %v", evs, err)
	}
	var tokens []string
	for i := range 6 {
		ev, err := s.Publish(ctx, health(fmt.Sprint("n", i), llmdiagv1.Status_STATUS_OK))
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, ev.Token)
	}
	tests := []struct {
		name      string
		token     string
		max       int
		wantNodes []string
		wantErr   error
	}{
		{"resume in the middle", tokens[2], 10, []string{"n3", "n4", "n5"}, nil},
		{"max bounds the batch", tokens[1], 2, []string{"n2", "n3"}, nil},
		{"trimmed token", tokens[0], 10, nil, store.ErrTokenExpired},
		{"from the start, trimmed", start, 10, nil, store.ErrTokenExpired},
		{"other feed", "e0-3", 10, nil, store.ErrTokenExpired},
		{"garbage", "zzz", 10, nil, store.ErrTokenExpired},
		{"ahead of feed", "e1-99", 10, nil, store.ErrTokenExpired},
		{"up to date", tokens[5], 10, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := s.Events(ctx, tc.token, tc.max, 10*time.Millisecond)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var nodes []string
			for _, ev := range evs {
				nodes = append(nodes, ev.Health.GetNode())
			}
			if fmt.Sprint(nodes) != fmt.Sprint(tc.wantNodes) {
				t.Fatalf("events = %v, want %v", nodes, tc.wantNodes)
			}
		})
	}
}

func TestEventsWakesOnPublishAndHonoursContext(t *testing.T) {
	s := memory.New(memory.Options{}, "e1")
	ctx := context.Background()
	tok, _ := s.LastToken(ctx)
	got := make(chan []store.Event, 1)
	go func() {
		evs, _ := s.Events(ctx, tok, 10, time.Minute)
		got <- evs
	}()
	time.Sleep(10 * time.Millisecond)
	if _, err := s.Publish(ctx, health("x", llmdiagv1.Status_STATUS_CRIT)); err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-got:
		if len(evs) != 1 || evs[0].Health.GetNode() != "x" {
			t.Fatalf("woke with %v", evs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Events did not wake on Publish")
	}

	cctx, cancel := context.WithCancel(ctx)
	tok, _ = s.LastToken(ctx)
	errc := make(chan error, 1)
	go func() { _, err := s.Events(cctx, tok, 10, time.Minute); errc <- err }()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Events ignored cancellation")
	}
}
