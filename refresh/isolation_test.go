package refresh_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// fleetSource reports nodes a, b and c on every refresh (b down, with its
// error) after failing the first `fails` refreshes as a whole.
type fleetSource struct {
	mu    sync.Mutex
	fails int
	calls int
}

func (f *fleetSource) refreshes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fleetSource) Window(context.Context, string, string, time.Duration) (*llmdiagv1.NodeMetrics, error) {
	return nil, source.ErrUnknownNode
}

func (f *fleetSource) Refresh(context.Context, string) ([]source.Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fails {
		return nil, errors.New("source unreachable")
	}
	var obs []source.Observation
	for _, id := range []string{"a", "b", "c"} {
		m := &llmdiagv1.NodeMetrics{
			Node: id, Model: "m", Window: "5m", Up: true, ObservedAt: timestamppb.New(time.Now()),
			Queue: sample.F(0), Running: sample.F(10), QueueRunningRatio: sample.F(0), KvPressure: sample.F(0.3),
		}
		if id == "b" {
			m.Up, m.Errors = false, []string{"scrape http://b/metrics: HTTP 500 Internal Server Error"}
		}
		obs = append(obs, source.Observation{Node: fleet.Node{ID: id}, Metrics: m})
	}
	return obs, nil
}

// faultyStore fails writes (Put or Publish) of some nodes with err.
type faultyStore struct {
	store.Store
	putFails, publishFails map[string]bool
	err                    error
	mu                     sync.Mutex
	puts                   int
}

func (s *faultyStore) Put(ctx context.Context, rec *store.Record, p diagnose.Point) error {
	s.mu.Lock()
	s.puts++
	s.mu.Unlock()
	if s.putFails[rec.Node.GetId()] {
		return fmt.Errorf("put %s: %w", rec.Node.GetId(), s.err)
	}
	return s.Store.Put(ctx, rec, p)
}

func (s *faultyStore) Publish(ctx context.Context, h *llmdiagv1.NodeHealth) (store.Event, error) {
	if s.publishFails[h.GetNode()] {
		return store.Event{}, fmt.Errorf("publish %s: %w", h.GetNode(), s.err)
	}
	return s.Store.Publish(ctx, h)
}

// TestOnceStoresEveryNodeItCan: one node's failed write and another's
// failed publish do not stop the third; the refresh says which failed and
// counts as failed.
func TestOnceStoresEveryNodeItCan(t *testing.T) {
	st := &faultyStore{
		Store:    memory.New(memory.Options{}, "t"),
		putFails: map[string]bool{"a": true}, publishFails: map[string]bool{"b": true},
		err: errors.New("disk full"),
	}
	rec := &nopRecorder{}
	loop := refresh.New(&fleetSource{}, st, rec, discardLog(), time.Now, refresh.Config{Thresholds: diagnose.DefaultThresholds()})
	err := loop.Once(context.Background())
	if err == nil || !strings.Contains(err.Error(), "2 of 3 nodes not stored") || !strings.Contains(err.Error(), "put a: disk full") || !strings.Contains(err.Error(), "publish b: disk full") {
		t.Fatalf("refresh error %v; want 2 of 3 nodes, naming a's put and b's publish", err)
	}
	if rec.refreshes != 1 || rec.errors != 1 {
		t.Fatalf("recorder: %d refreshes, %d errors; want 1 and 1", rec.refreshes, rec.errors)
	}
	ctx := context.Background()
	if _, err := st.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a: %v, want not stored", err)
	}
	for _, id := range []string{"b", "c"} { // b's record is written before its event
		if r, err := st.Get(ctx, id); err != nil || r.Node.GetId() != id {
			t.Fatalf("%s beside a failing node: %v, %v", id, r, err)
		}
	}
}

// TestOnceStopsWhenFenced: a store that fences this writer refuses every
// write alike; the refresh stops at the first.
func TestOnceStopsWhenFenced(t *testing.T) {
	st := &faultyStore{
		Store:    memory.New(memory.Options{}, "t"),
		putFails: map[string]bool{"a": true, "b": true, "c": true},
		err:      store.ErrFenced,
	}
	loop := refresh.New(&fleetSource{}, st, &nopRecorder{}, discardLog(), time.Now, refresh.Config{Thresholds: diagnose.DefaultThresholds()})
	err := loop.Once(context.Background())
	if !errors.Is(err, store.ErrFenced) || !strings.Contains(err.Error(), "3 of 3 nodes not stored") || st.puts != 1 {
		t.Fatalf("fenced refresh: %v after %d writes; want ErrFenced, 3 of 3, after 1", err, st.puts)
	}
}

// TestReadyAfterFirstCompletedRefresh: health follows the first refresh
// whose source answered, though a target in it is down and a node could
// not be written; a refresh whose source failed does not count.
func TestReadyAfterFirstCompletedRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &faultyStore{Store: memory.New(memory.Options{}, "t"), putFails: map[string]bool{"c": true}, err: errors.New("disk full")}
		src := &fleetSource{fails: 1}
		loop := refresh.New(src, st, &nopRecorder{}, discardLog(), time.Now, refresh.Config{Interval: time.Second, Thresholds: diagnose.DefaultThresholds()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); loop.Run(ctx) }()
		ready := func() bool {
			select {
			case <-loop.Ready():
				return true
			default:
				return false
			}
		}
		synctest.Wait()
		if n := src.refreshes(); n != 1 || ready() {
			t.Fatalf("after a failed first refresh (%d calls): ready %v", n, ready())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := src.refreshes(); n != 2 || !ready() {
			t.Fatalf("after the second refresh (%d calls), with b down and c unwritable: ready %v", n, ready())
		}
		r, err := st.Get(ctx, "b")
		if err != nil || r.Node.GetStatus() != llmdiagv1.Status_STATUS_DOWN || r.Diagnosis.GetRootCause() != llmdiagv1.Cause_CAUSE_TARGET_DOWN ||
			!strings.Contains(strings.Join(r.Diagnosis.GetEvidence(), " "), "HTTP 500") {
			t.Fatalf("b: %v, %v; want TARGET_DOWN with its HTTP 500 in the evidence", r, err)
		}
		cancel()
		<-done
	})
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
