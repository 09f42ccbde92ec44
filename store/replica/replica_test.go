package replica_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/replica"
)

// flaky is a shared store that can be taken down or made to fence writes.
// Unit tests of the replica's logic use it; the Redis store's tests run the
// replica against a real redis-server.
type flaky struct {
	store.Store
	down, fenced atomic.Bool
	// refused counts the calls answered with errDown: each would cost a
	// real client its dial retries.
	refused atomic.Int64
	// listed, when set, runs after List read the shared store: a write
	// racing a sync.
	listed func()
}

var errDown = errors.New("connection refused")

func (f *flaky) err() error {
	if f.down.Load() {
		f.refused.Add(1)
		return errDown
	}
	return nil
}

func (f *flaky) Put(ctx context.Context, rec *store.Record, p diagnose.Point) error {
	if f.fenced.Load() {
		return store.ErrFenced
	}
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.Put(ctx, rec, p)
}

func (f *flaky) Publish(ctx context.Context, h *llmdiagv1.NodeHealth) (store.Event, error) {
	if f.fenced.Load() {
		return store.Event{}, store.ErrFenced
	}
	if err := f.err(); err != nil {
		return store.Event{}, err
	}
	return f.Store.Publish(ctx, h)
}

func (f *flaky) List(ctx context.Context) ([]*store.Record, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	recs, err := f.Store.List(ctx)
	if f.listed != nil {
		f.listed()
	}
	return recs, err
}

func (f *flaky) Cached(ctx context.Context, key string, ttl time.Duration, load func(context.Context) ([]byte, error)) ([]byte, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Store.Cached(ctx, key, ttl, load)
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func record(id string, at time.Time, status llmdiagv1.Status) *store.Record {
	return &store.Record{
		Node:    &llmdiagv1.Node{Id: id, Model: "m", Status: status},
		Metrics: &llmdiagv1.NodeMetrics{Node: id, Model: "m", ObservedAt: timestamppb.New(at), Up: true},
	}
}

func health(id string, s llmdiagv1.Status) *llmdiagv1.NodeHealth {
	return &llmdiagv1.NodeHealth{Node: id, Status: s}
}

func setup(t *testing.T) (*flaky, *replica.Store, *time.Time) {
	t.Helper()
	now := t0
	shared := &flaky{Store: memory.New(memory.Options{}, "shared")}
	r := replica.New(shared, memory.New(memory.Options{}, "copy"), replica.Options{
		SyncEvery: time.Second, PendingMax: 3, Now: func() time.Time { return now },
	})
	return shared, r, &now
}

func TestCopyFollowsTheSharedStore(t *testing.T) {
	ctx := context.Background()
	shared, r, now := setup(t)
	if _, _, degraded := r.Degraded(); !degraded {
		t.Error("a copy never synced is not degraded")
	}
	// Another replica (the leader) writes to the shared store.
	for i, id := range []string{"a", "b"} {
		if err := shared.Store.Put(ctx, record(id, t0.Add(time.Duration(i)*time.Second), llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("before Sync: Get(a) err = %v, want ErrNotFound: reads come from the copy", err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := r.List(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("List after Sync = %d records, %v; want 2", len(recs), err)
	}
	if h, err := r.History(ctx, "b"); err != nil || len(h) != 1 {
		t.Fatalf("History(b) = %v, %v; want the shared store's one point", h, err)
	}
	if reason, _, degraded := r.Degraded(); degraded {
		t.Errorf("synced copy degraded: %s", reason)
	}
	// A node that vanished from the shared store leaves the copy.
	gone := memory.New(memory.Options{}, "shared2")
	_ = gone.Put(ctx, record("a", t0, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true})
	shared.Store = gone
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("b vanished from the shared store but the copy still has it (err %v)", err)
	}
	// Staleness past three sync periods is reported.
	*now = now.Add(5 * time.Second)
	if reason, age, degraded := r.Degraded(); !degraded || age != 5*time.Second || !strings.Contains(reason, "not brought up to date") {
		t.Errorf("Degraded() = %q, %v, %v; want degraded, 5s old", reason, age, degraded)
	}
}

func TestOutageKeepsAnsweringAndLosesNoStatusChange(t *testing.T) {
	ctx := context.Background()
	shared, r, now := setup(t)
	if err := r.Put(ctx, record("a", t0, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Publish(ctx, health("a", llmdiagv1.Status_STATUS_OK)); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := r.LastToken(ctx)
	if err != nil {
		t.Fatal(err)
	}

	shared.down.Store(true)
	*now = now.Add(time.Second)
	// The leader keeps refreshing: no error, and this replica answers fresh.
	if err := r.Put(ctx, record("a", t0.Add(time.Second), llmdiagv1.Status_STATUS_CRIT), diagnose.Point{At: t0.Add(time.Second), Up: true}); err != nil {
		t.Fatalf("Put while the shared store is down = %v, want nil", err)
	}
	for _, s := range []llmdiagv1.Status{llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Status_STATUS_WARN} {
		if _, err := r.Publish(ctx, health("a", s)); err != nil {
			t.Fatalf("Publish while the shared store is down = %v, want queued", err)
		}
	}
	if err := r.Sync(ctx); err == nil {
		t.Fatal("Sync with the shared store down did not fail")
	}
	rec, err := r.Get(ctx, "a")
	if err != nil || rec.Node.GetStatus() != llmdiagv1.Status_STATUS_CRIT {
		t.Fatalf("Get during the outage = %v, %v; want this replica's newest record", rec, err)
	}
	if reason, _, degraded := r.Degraded(); !degraded || !strings.Contains(reason, "connection refused") {
		t.Errorf("Degraded() during the outage = %q, %v", reason, degraded)
	}
	if got, err := r.Cached(ctx, "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("v"), nil }); err != nil || string(got) != "v" {
		t.Errorf("Cached during the outage = %q, %v; want the local cache's answer", got, err)
	}

	shared.down.Store(false)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := r.Events(ctx, first, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []llmdiagv1.Status
	for _, e := range evs {
		got = append(got, e.Health.GetStatus())
	}
	if want := []llmdiagv1.Status{llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Status_STATUS_WARN}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("events after the outage = %v, want %v in order", got, want)
	}
	// The copy kept its newer record over the shared store's older one.
	if rec, err := r.Get(ctx, "a"); err != nil || rec.Node.GetStatus() != llmdiagv1.Status_STATUS_CRIT {
		t.Errorf("after Sync Get = %v, %v; the newer local record was lost", rec, err)
	}
	if reason, _, degraded := r.Degraded(); degraded {
		t.Errorf("still degraded after recovery: %s", reason)
	}
}

func TestQueueBoundedAndFencingStops(t *testing.T) {
	ctx := context.Background()
	shared, r, _ := setup(t)
	shared.down.Store(true)
	for range 5 {
		if _, err := r.Publish(ctx, health("a", llmdiagv1.Status_STATUS_WARN)); err != nil {
			t.Fatal(err)
		}
	}
	if reason, _, _ := r.Degraded(); !strings.Contains(reason, "2 health events dropped") {
		t.Errorf("Degraded reason %q does not count the 2 events past PendingMax 3", reason)
	}
	shared.down.Store(false)
	shared.fenced.Store(true)
	// The queued events are refused: the store answers, so the next write
	// goes to it and hears the refusal.
	if err := r.Sync(ctx); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Sync with fenced events queued = %v, want ErrFenced", err)
	}
	err := r.Put(ctx, record("a", t0, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true})
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("fenced Put = %v, want ErrFenced so the stale leader stops", err)
	}
}

// TestStateAndFeedLeaveNoGap: a subscriber takes the copy's state (List) and
// reads the feed after LastToken; a change the shared store has and the copy
// does not yet must come through the feed.
func TestStateAndFeedLeaveNoGap(t *testing.T) {
	ctx := context.Background()
	shared, r, _ := setup(t)
	if _, err := r.LastToken(ctx); !errors.Is(err, replica.ErrNotSynced) {
		t.Errorf("LastToken before any Sync = %v, want ErrNotSynced", err)
	}
	if err := shared.Store.Put(ctx, record("a", t0, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Store.Publish(ctx, health("a", llmdiagv1.Status_STATUS_OK)); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The leader (another replica) moves on; this copy has not synced since.
	if err := shared.Store.Put(ctx, record("a", t0.Add(time.Second), llmdiagv1.Status_STATUS_CRIT), diagnose.Point{At: t0.Add(time.Second), Up: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Store.Publish(ctx, health("a", llmdiagv1.Status_STATUS_CRIT)); err != nil {
		t.Fatal(err)
	}
	recs, err := r.List(ctx)
	if err != nil || len(recs) != 1 || recs[0].Node.GetStatus() != llmdiagv1.Status_STATUS_OK {
		t.Fatalf("copy = %v, %v; want a still OK", recs, err)
	}
	tok, err := r.LastToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := r.Events(ctx, tok, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Health.GetStatus() != llmdiagv1.Status_STATUS_CRIT {
		t.Errorf("events after the copy's token = %v; want the CRIT the copy does not hold yet", evs)
	}
}

// TestOutageWritesDoNotWait: once the shared store did not answer, the
// writer's Put, Publish and Cached go to the copy without trying it again
// (a real client spends seconds of dial retries on each try, which stalled
// the leader's refresh for the whole outage); Sync alone tries it, and once
// it answers, writes reach it again.
func TestOutageWritesDoNotWait(t *testing.T) {
	ctx := context.Background()
	shared, r, _ := setup(t)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	shared.down.Store(true)
	for i := range 10 {
		at := t0.Add(time.Duration(i) * time.Second)
		if err := r.Put(ctx, record("a", at, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: at, Up: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Publish(ctx, health("a", llmdiagv1.Status_STATUS_OK)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Cached(ctx, "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("v"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := shared.refused.Load(); n != 1 {
		t.Errorf("the shared store was tried %d times by 30 writes and reads during the outage; want 1 (the first)", n)
	}
	if err := r.Sync(ctx); err == nil {
		t.Fatal("Sync with the shared store down did not fail")
	}
	if n := shared.refused.Load(); n != 2 {
		t.Errorf("after a Sync the shared store was tried %d times; want 2", n)
	}
	shared.down.Store(false)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Minute)
	if err := r.Put(ctx, record("a", at, llmdiagv1.Status_STATUS_WARN), diagnose.Point{At: at, Up: true}); err != nil {
		t.Fatal(err)
	}
	if rec, err := shared.Store.Get(ctx, "a"); err != nil || rec.Node.GetStatus() != llmdiagv1.Status_STATUS_WARN {
		t.Errorf("after recovery the shared store holds %v, %v; want the WARN just written", rec, err)
	}
}

// TestSyncKeepsANodeWrittenMeanwhile: a node the writer adds while Sync
// reads the shared store (or while the shared store is down) is not in the
// shared store's listing, yet it must stay in the copy: dropping it lost its
// history and made the next refresh announce it again.
func TestSyncKeepsANodeWrittenMeanwhile(t *testing.T) {
	ctx := context.Background()
	shared, r, _ := setup(t)
	if err := r.Put(ctx, record("a", t0, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	shared.listed = func() {
		shared.listed = nil
		if err := r.Put(ctx, record("b", t0, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true}); err != nil {
			t.Error(err)
		}
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "b"); err != nil {
		t.Fatalf("b, written while Sync read the shared store, left the copy: %v", err)
	}
	// Written during an outage: kept through the sync that recovers.
	shared.down.Store(true)
	if err := r.Put(ctx, record("c", t0, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true}); err != nil {
		t.Fatal(err)
	}
	shared.down.Store(false)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "c"); err != nil {
		t.Fatalf("c, written during the outage, left the copy at recovery: %v", err)
	}
	// A node the shared store dropped and nobody writes leaves the copy.
	gone := memory.New(memory.Options{}, "shared2")
	shared.Store = gone
	for range 2 {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if recs, err := r.List(ctx); err != nil || len(recs) != 0 {
		t.Errorf("copy after the shared store emptied = %d records, %v; want none", len(recs), err)
	}
}

// TestSyncNeverUndoesANewerWrite races the writer against Sync: the copy's
// record of a node never goes back to an older observation. It did when
// Sync checked the copy and then loaded the shared store's older record in
// two steps: the writer's Put between them was undone, so the next refresh
// compared with the wrong state and a status change was never announced.
func TestSyncNeverUndoesANewerWrite(t *testing.T) {
	ctx := context.Background()
	shared := &flaky{Store: memory.New(memory.Options{}, "shared")}
	r := replica.New(shared, memory.New(memory.Options{}, "copy"), replica.Options{SyncEvery: time.Second})
	stop := make(chan struct{})
	var syncs sync.WaitGroup
	syncs.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := r.Sync(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { close(stop); syncs.Wait() }()
	for i := range 3000 {
		at := t0.Add(time.Duration(i) * time.Second)
		if err := r.Put(ctx, record("a", at, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: at, Up: true}); err != nil {
			t.Fatal(err)
		}
		rec, err := r.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Metrics.GetObservedAt().AsTime(); got.Before(at) {
			t.Fatalf("put #%d: the copy went back to the record observed at %v, before the one just written (%v)", i, got, at)
		}
	}
}

func (f *flaky) Sweep(ctx context.Context, unseenFor time.Duration) ([]*store.Record, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Store.Sweep(ctx, unseenFor)
}

func TestSweepRemovesFromBothAndWaitsOutAnOutage(t *testing.T) {
	ctx := context.Background()
	clock := t0
	shared := &flaky{Store: memory.New(memory.Options{Now: func() time.Time { return clock }}, "shared")}
	r := replica.New(shared, memory.New(memory.Options{}, "copy"), replica.Options{Now: func() time.Time { return clock }})
	for _, id := range []string{"a", "b"} {
		if err := r.Put(ctx, record(id, t0, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: t0, Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	clock = clock.Add(time.Hour)
	shared.down.Store(true)
	if gone, err := r.Sweep(ctx, time.Minute); err != nil || len(gone) != 0 {
		t.Fatalf("Sweep while the shared store is down = %v, %v; want nothing and no error", gone, err)
	}
	if _, _, degraded := r.Degraded(); !degraded {
		t.Error("a failed Sweep did not mark the copy degraded")
	}
	if _, err := r.Get(ctx, "a"); err != nil {
		t.Fatalf("the copy lost a while the sweep could not run: %v", err)
	}
	shared.down.Store(false)
	gone, err := r.Sweep(ctx, time.Minute)
	if err != nil || len(gone) != 2 || gone[0].Node.GetId() != "a" || gone[1].Node.GetId() != "b" {
		t.Fatalf("Sweep = %v, %v; want a and b", gone, err)
	}
	for _, st := range []store.Store{shared.Store, r} {
		if _, err := st.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("swept node still readable: %v", err)
		}
	}
}

// TestPutNeverTakesTheCopyBackInTime: while a lease changes hands two
// leaders refresh for a moment; a sync brings the newer leader's record
// into the copy of the one stepping down, whose own older record must then
// be refused (as the shared store refuses it), not put in the copy, where
// readers would see the node's verdict go back in time.
func TestPutNeverTakesTheCopyBackInTime(t *testing.T) {
	ctx := context.Background()
	shared, r, _ := setup(t)
	newer, older := t0.Add(2*time.Second), t0.Add(time.Second)
	// The other leader's write reaches the shared store, then this copy.
	if err := shared.Put(ctx, record("a", newer, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: newer, Up: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"Put", func() error {
			return r.Put(ctx, record("a", older, llmdiagv1.Status_STATUS_CRIT), diagnose.Point{At: older, Up: true})
		}},
		{"PutRecord", func() error { return r.PutRecord(ctx, record("a", older, llmdiagv1.Status_STATUS_CRIT)) }},
	} {
		if err := tc.write(); !errors.Is(err, store.ErrOutOfOrder) {
			t.Errorf("%s of an older record: %v, want ErrOutOfOrder", tc.name, err)
		}
		rec, err := r.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Metrics.GetObservedAt().AsTime(); !got.Equal(newer) {
			t.Errorf("after %s of an older record the copy reads observed at %v, want the newer %v", tc.name, got, newer)
		}
	}
	// A record as new as the one held, or newer, is written.
	if err := r.Put(ctx, record("a", newer, llmdiagv1.Status_STATUS_WARN), diagnose.Point{At: newer, Up: true}); err != nil {
		t.Errorf("Put observed at the time held: %v", err)
	}
}
