package memory_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/storetest"
	"github.com/llmdiag/llmdiag/store/memory"
)

func sameRecord(t *testing.T, got, want *store.Record) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got, want proto.Message
	}{{"Node", got.Node, want.Node}, {"Metrics", got.Metrics, want.Metrics}, {"Diagnosis", got.Diagnosis, want.Diagnosis}} {
		g, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.got)
		if err != nil {
			t.Fatal(err)
		}
		w, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.want)
		if err != nil {
			t.Fatal(err)
		}
		if string(g) != string(w) {
			t.Fatalf("%s differs:\ngot  %v\nwant %v", c.name, c.got, c.want)
		}
	}
}

func samePoints(t *testing.T, got, want []diagnose.Point) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d points, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.At.Equal(w.At) || g.At.Location() != w.At.Location() || g.Up != w.Up || g.Status != w.Status {
			t.Fatalf("point %d: %+v, want %+v", i, g, w)
		}
		for k, pair := range [][2]*float64{{g.Queue, w.Queue}, {g.Running, w.Running}, {g.KVPressure, w.KVPressure}, {g.E2EMean, w.E2EMean}, {g.GenerationRate, w.GenerationRate}} {
			if (pair[0] == nil) != (pair[1] == nil) || pair[0] != nil && math.Float64bits(*pair[0]) != math.Float64bits(*pair[1]) {
				t.Fatalf("point %d gauge %d: %v, want %v", i, k, pair[0], pair[1])
			}
		}
	}
}

// The store gives back exactly what it was given: records and the last
// HistoryLen points, for a realistic fleet.
func TestStoreKeepsWhatItIsGiven(t *testing.T) {
	ctx := context.Background()
	const historyLen = 50
	s := memory.New(memory.Options{HistoryLen: historyLen}, "e")
	var fleet []storetest.Node
	storetest.Fleet(40, func(i int) int { return 1 + i*3 }, func(_ int, n storetest.Node) {
		for _, p := range n.Points {
			if err := s.Put(ctx, n.Record, p); err != nil {
				t.Fatal(err)
			}
		}
		fleet = append(fleet, n)
	})
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(fleet) {
		t.Fatalf("List: %d records, want %d", len(list), len(fleet))
	}
	var buf store.HistoryBuf
	for _, n := range fleet {
		id := n.Record.Node.GetId()
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sameRecord(t, got, n.Record)
		h, err := s.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		samePoints(t, h, n.Points[max(0, len(n.Points)-historyLen):])
		// HistoryInto reads the same, node after node into one buffer
		// (histories long and short, whatever it held before).
		into, err := s.HistoryInto(ctx, id, &buf)
		if err != nil {
			t.Fatal(err)
		}
		samePoints(t, into, n.Points[max(0, len(n.Points)-historyLen):])
	}
	// A short history after the long ones.
	first := fleet[0]
	into, err := s.HistoryInto(ctx, first.Record.Node.GetId(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	samePoints(t, into, first.Points)
	if _, err := s.HistoryInto(ctx, "nobody", &buf); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("HistoryInto of an unknown node: %v, want ErrNotFound", err)
	}
	for i := 1; i < len(list); i++ {
		if list[i-1].Node.GetId() >= list[i].Node.GetId() {
			t.Fatalf("List is not sorted by id")
		}
	}
}

// Callers own what they get: changing it does not change the store, and
// changing what was put does not either.
func TestStoreSharesNothing(t *testing.T) {
	ctx := context.Background()
	s := memory.New(memory.Options{}, "e")
	n := storetest.MakeNode(0, 5, nil)
	for i := 1; n.Record.Metrics.GetTtft() == nil || n.Record.Metrics.GetE2E() == nil; i++ {
		n = storetest.MakeNode(i, 5, nil)
	}
	id := n.Record.Node.GetId()
	for i := range n.Points {
		q, r := float64(i), float64(10+i)
		n.Points[i].Queue, n.Points[i].Running = &q, &r
	}
	for _, p := range n.Points {
		if err := s.Put(ctx, n.Record, p); err != nil {
			t.Fatal(err)
		}
	}
	want := proto.Clone(n.Record.Metrics)
	*n.Points[0].Queue = -1
	n.Record.Metrics.Ttft.BucketBounds[0] = -1
	got, _ := s.Get(ctx, id)
	got.Metrics.E2E.BucketBounds[1] = -2
	got.Node.LastSeen.Seconds = 7
	h, _ := s.History(ctx, id)
	*h[1].Running = -3
	again, _ := s.Get(ctx, id)
	if !proto.Equal(again.Metrics, want) || proto.Equal(again.Node, got.Node) {
		t.Fatal("the store shares messages with its callers")
	}
	h2, _ := s.History(ctx, id)
	if *h2[0].Queue == -1 || *h2[1].Running == -3 {
		t.Fatal("the store shares history points with its callers")
	}
}

// A record protobuf cannot marshal (a string that is not UTF-8) is kept as
// it is.
func TestStoreKeepsInvalidUTF8(t *testing.T) {
	ctx := context.Background()
	s := memory.New(memory.Options{}, "e")
	n := storetest.MakeNode(1, 2, nil)
	n.Record.Node.Url = "http://\xff/metrics"
	n.Record.Metrics.Errors = []string{"bad \xfe byte"}
	if err := s.Put(ctx, n.Record, n.Points[1]); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, n.Record.Node.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if got.Node.GetUrl() != n.Record.Node.Url || got.Metrics.GetErrors()[0] != "bad \xfe byte" || !proto.Equal(got.Diagnosis, n.Record.Diagnosis) {
		t.Fatalf("record with invalid UTF-8 changed: %v", got)
	}
}

func TestStoreConcurrentUse(t *testing.T) {
	ctx := context.Background()
	s := memory.New(memory.Options{HistoryLen: 40}, "e")
	var fleet []storetest.Node
	storetest.Fleet(8, func(int) int { return 60 }, func(_ int, n storetest.Node) { fleet = append(fleet, n) })
	var wg sync.WaitGroup
	for w, n := range fleet {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for _, p := range n.Points {
				if err := s.Put(ctx, n.Record, p); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			id := fleet[(w+1)%len(fleet)].Record.Node.GetId()
			for range 60 {
				if _, err := s.List(ctx); err != nil {
					t.Error(err)
				}
				if _, err := s.Get(ctx, id); err != nil && !isNotFound(err) {
					t.Error(err)
				}
				if h, err := s.History(ctx, id); err != nil && !isNotFound(err) || len(h) > 40 {
					t.Error(err, len(h))
				}
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	for _, n := range fleet {
		h, err := s.History(ctx, n.Record.Node.GetId())
		if err != nil {
			t.Fatal(err)
		}
		samePoints(t, h, n.Points[len(n.Points)-40:])
	}
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
