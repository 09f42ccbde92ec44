package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
)

// Options are the bounds a conformance test asks of a new store.
type Options struct {
	HistoryLen int // points kept per node
	FeedLen    int // events kept in the feed; trimming must be exact
	// Now is the store's clock (nil: time.Now); Sweep reads it.
	Now func() time.Time
}

// Harness makes stores for Conformance.
type Harness struct {
	// New returns an empty store of its own (its own feed) with the given
	// bounds; the test ends it.
	New func(t *testing.T, o Options) store.Store
	// Ahead returns a token of tok's feed past the feed's end (after 99
	// events, when the feed has fewer).
	Ahead func(tok string) string
}

// Conformance runs the behaviour every store.Store shares.
func Conformance(t *testing.T, h Harness) {
	t.Run("RecordsAndHistory", func(t *testing.T) { testRecordsAndHistory(t, h) })
	t.Run("Feed", func(t *testing.T) { testFeed(t, h) })
	t.Run("EventsWakesOnPublishAndHonoursContext", func(t *testing.T) { testEventsWake(t, h) })
	t.Run("CachedCoalescesConcurrentLoads", func(t *testing.T) { testCachedCoalesces(t, h) })
	t.Run("CachedExpiryAndErrors", func(t *testing.T) { testCachedExpiry(t, h) })
	t.Run("SweepForgetsUnwrittenNodes", func(t *testing.T) { testSweep(t, h) })
	t.Run("RemoveForgetsNamedNodes", func(t *testing.T) { testRemove(t, h) })
	t.Run("PutRecordLeavesHistory", func(t *testing.T) { testPutRecord(t, h) })
}

// testPutRecord: a RecordWriter (every store here is one) replaces a
// node's record and leaves its history; a node never Put is not found.
func testPutRecord(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t, Options{HistoryLen: 8, FeedLen: 16})
	rw, ok := s.(store.RecordWriter)
	if !ok {
		t.Fatalf("%T is no store.RecordWriter", s)
	}
	first := rec("a", "m")
	first.Metrics.ObservedAt = timestamppb.New(time.Unix(1, 0))
	if err := s.Put(ctx, first, diagnose.Point{At: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	fast := rec("a", "m")
	fast.Node.Routable = true
	fast.Metrics.ObservedAt = timestamppb.New(time.Unix(2, 0))
	if err := rw.PutRecord(ctx, fast); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Node.GetRoutable() || got.Metrics.GetObservedAt().AsTime().Unix() != 2 {
		t.Fatalf("Get after PutRecord = %v, want the record PutRecord wrote", got)
	}
	if hist, err := s.History(ctx, "a"); err != nil || len(hist) != 1 || hist[0].At.Unix() != 1 {
		t.Fatalf("History after PutRecord = %v, %v; want Put's one point", hist, err)
	}
	// Put goes on after it, appending to the history.
	next := rec("a", "m")
	next.Metrics.ObservedAt = timestamppb.New(time.Unix(3, 0))
	if err := s.Put(ctx, next, diagnose.Point{At: time.Unix(3, 0)}); err != nil {
		t.Fatal(err)
	}
	if hist, err := s.History(ctx, "a"); err != nil || len(hist) != 2 || hist[1].At.Unix() != 3 {
		t.Fatalf("History after Put = %v, %v; want points 1 and 3", hist, err)
	}
	if err := rw.PutRecord(ctx, rec("nope", "m")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutRecord of a node never Put: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutRecord of an unknown node made it: Get err = %v", err)
	}
}

func testRemove(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t, Options{HistoryLen: 3, FeedLen: 16})
	r, ok := s.(store.Remover)
	if !ok {
		t.Fatalf("%T is no store.Remover", s)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Put(ctx, rec(id, "m-"+id), diagnose.Point{At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := r.Remove(ctx, "c", "nope", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 2 || gone[0].Node.GetId() != "a" || gone[1].Node.GetId() != "c" || gone[0].Node.GetModel() != "m-a" {
		t.Fatalf("Remove = %v, want a and c's records, sorted", gone)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Node.GetId() != "b" {
		t.Fatalf("List after Remove = %v, %v; want b alone", list, err)
	}
	if _, err := s.History(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removed node's history: err = %v, want ErrNotFound", err)
	}
	if again, err := r.Remove(ctx, "a"); err != nil || len(again) != 0 {
		t.Fatalf("second Remove = %v, %v; want none", again, err)
	}
}

func testSweep(t *testing.T, h Harness) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := h.New(t, Options{HistoryLen: 3, FeedLen: 16, Now: clock})
	put := func(id string) {
		t.Helper()
		r := rec(id, "m-"+id)
		r.Node.Labels = map[string]string{"pool": id}
		if err := s.Put(ctx, r, diagnose.Point{At: clock()}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(recs []*store.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.Node.GetId())
		}
		return out
	}
	put("a")
	put("c")
	put("b")
	if gone, err := s.Sweep(ctx, 5*time.Minute); err != nil || len(gone) != 0 {
		t.Fatalf("Sweep of fresh nodes = %v, %v; want none", ids(gone), err)
	}
	advance(10 * time.Minute)
	put("b")
	gone, err := s.Sweep(ctx, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(gone)) != "[a c]" {
		t.Fatalf("Sweep = %v, want [a c] (sorted, b was written since)", ids(gone))
	}
	// What left comes back as it was, for the caller to announce.
	if gone[0].Node.GetModel() != "m-a" || gone[0].Node.GetLabels()["pool"] != "a" {
		t.Errorf("swept record = %v, want a's model and labels", gone[0].Node)
	}
	if list, err := s.List(ctx); err != nil || fmt.Sprint(ids(list)) != "[b]" {
		t.Fatalf("List after Sweep = %v, %v; want [b]", ids(list), err)
	}
	for _, call := range []func() error{
		func() error { _, err := s.Get(ctx, "a"); return err },
		func() error { _, err := s.History(ctx, "a"); return err },
	} {
		if err := call(); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("swept node: err = %v, want ErrNotFound", err)
		}
	}
	if again, err := s.Sweep(ctx, 5*time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("second Sweep = %v, %v; want none", ids(again), err)
	}
	// A node that comes back starts afresh.
	put("a")
	if hist, err := s.History(ctx, "a"); err != nil || len(hist) != 1 {
		t.Fatalf("History of a returning node = %v, %v; want its one new point", hist, err)
	}
	advance(6 * time.Minute)
	if gone, err := s.Sweep(ctx, 5*time.Minute); err != nil || fmt.Sprint(ids(gone)) != "[a b]" {
		t.Fatalf("Sweep = %v, %v; want [a b]", ids(gone), err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List = %v, %v; want empty", ids(list), err)
	}
}

func rec(id, model string) *store.Record {
	return &store.Record{
		Node:    &llmdiagv1.Node{Id: id, Model: model},
		Metrics: &llmdiagv1.NodeMetrics{Node: id, Model: model},
	}
}

func testRecordsAndHistory(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t, Options{HistoryLen: 3, FeedLen: 16})
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
	hist, err := s.History(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || hist[0].At.Unix() != 2 || hist[2].At.Unix() != 4 {
		t.Fatalf("History = %v, want the last 3 points (2..4)", hist)
	}
	// Every figure of a point comes back, and an absent one stays absent.
	f := func(v float64) *float64 { return &v }
	full := diagnose.Point{At: time.Unix(10, 0), Up: true, Queue: f(3), Running: f(40), KVPressure: f(0.5),
		E2EMean: f(12.5), GenerationRate: f(121), E2EP99: f(40.25), Status: llmdiagv1.Status_STATUS_WARN}
	sparse := diagnose.Point{At: time.Unix(11, 0), Up: true, Running: f(2), E2EP99: f(0.75), Status: llmdiagv1.Status_STATUS_OK}
	for _, p := range []diagnose.Point{full, sparse} {
		if err := s.Put(ctx, rec("c", "m"), p); err != nil {
			t.Fatal(err)
		}
	}
	hist, err = s.History(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	figures := func(p diagnose.Point) string {
		var b strings.Builder
		for _, v := range []*float64{p.Queue, p.Running, p.KVPressure, p.E2EMean, p.GenerationRate, p.E2EP99} {
			if v == nil {
				b.WriteString(" -")
			} else {
				fmt.Fprintf(&b, " %v", *v)
			}
		}
		return fmt.Sprintf("%d %v %v%s", p.At.Unix(), p.Up, p.Status, b.String())
	}
	if len(hist) != 2 || figures(hist[0]) != figures(full) || figures(hist[1]) != figures(sparse) {
		var got []string
		for _, p := range hist {
			got = append(got, figures(p))
		}
		t.Fatalf("History(c) = %q; want %q then %q", got, figures(full), figures(sparse))
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

func testFeed(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.New(t, Options{HistoryLen: 3, FeedLen: 4})
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
	if last, err := s.LastToken(ctx); err != nil || last != tokens[5] {
		t.Fatalf("LastToken = %q, %v; want %q", last, err, tokens[5])
	}
	other := h.New(t, Options{HistoryLen: 3, FeedLen: 4})
	var otherTok string
	for range 3 {
		ev, err := other.Publish(ctx, health("o", llmdiagv1.Status_STATUS_OK))
		if err != nil {
			t.Fatal(err)
		}
		otherTok = ev.Token
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
		{"other feed", otherTok, 10, nil, store.ErrTokenExpired},
		{"garbage", "zzz", 10, nil, store.ErrTokenExpired},
		{"ahead of feed", h.Ahead(tokens[5]), 10, nil, store.ErrTokenExpired},
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
			// Tokens of events read resume where Publish's would.
			for i, ev := range evs {
				var want string
				for j := range tokens {
					if fmt.Sprint("n", j) == tc.wantNodes[i] {
						want = tokens[j]
					}
				}
				if ev.Token != want {
					t.Fatalf("event %s has token %q, Publish gave %q", tc.wantNodes[i], ev.Token, want)
				}
			}
		})
	}
}

func testEventsWake(t *testing.T, h Harness) {
	s := h.New(t, Options{HistoryLen: 3, FeedLen: 16})
	ctx := context.Background()
	tok, _ := s.LastToken(ctx)
	got := make(chan []store.Event, 1)
	go func() {
		evs, _ := s.Events(ctx, tok, 10, time.Minute)
		got <- evs
	}()
	time.Sleep(50 * time.Millisecond)
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
	time.Sleep(20 * time.Millisecond)
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

func testCachedCoalesces(t *testing.T, h Harness) {
	s := h.New(t, Options{HistoryLen: 3, FeedLen: 16})
	var loads atomic.Int32
	release := make(chan struct{})
	load := func(context.Context) ([]byte, error) {
		loads.Add(1)
		<-release // hold the load until every caller is waiting on it
		return []byte("v"), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Cached(context.Background(), "q", time.Minute, load)
			if err == nil && string(v) != "v" {
				err = fmt.Errorf("got %q", v)
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("50 concurrent identical requests made %d loads, want 1", n)
	}
	if _, err := s.Cached(context.Background(), "q", time.Minute, load); err != nil || loads.Load() != 1 {
		t.Fatalf("cache miss after load: %v, loads %d", err, loads.Load())
	}
}

func testCachedExpiry(t *testing.T, h Harness) {
	s := h.New(t, Options{HistoryLen: 3, FeedLen: 16})
	ctx := context.Background()
	var loads atomic.Int32
	load := func(v string) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) { loads.Add(1); return []byte(v), nil }
	}
	if v, err := s.Cached(ctx, "a", 300*time.Millisecond, load("a1")); err != nil || string(v) != "a1" {
		t.Fatalf("first load: %q %v", v, err)
	}
	if v, _ := s.Cached(ctx, "a", 300*time.Millisecond, load("a2")); string(v) != "a1" {
		t.Fatalf("within ttl: %q", v)
	}
	time.Sleep(400 * time.Millisecond)
	if v, _ := s.Cached(ctx, "a", 300*time.Millisecond, load("a3")); string(v) != "a3" {
		t.Fatalf("after ttl: %q, want a reload", v)
	}
	boom := errors.New("boom")
	failing := func(context.Context) ([]byte, error) { loads.Add(1); return nil, boom }
	if _, err := s.Cached(ctx, "e", time.Minute, failing); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	before := loads.Load()
	if _, err := s.Cached(ctx, "e", time.Minute, failing); !errors.Is(err, boom) || loads.Load() != before+1 {
		t.Fatalf("errors must not be cached (loads %d → %d)", before, loads.Load())
	}
	// Keys are arbitrary bytes.
	if v, err := s.Cached(ctx, "window\x00{n}\x00:5m", time.Minute, load("w")); err != nil || string(v) != "w" {
		t.Fatalf("binary key: %q %v", v, err)
	}
	// A caller that gives up returns at once with its context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Cached(cctx, "slow", time.Minute, func(context.Context) ([]byte, error) { time.Sleep(time.Second); return nil, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
}
