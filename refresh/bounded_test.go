package refresh_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fanout"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store/memory"
)

// churn presents perRefresh new node ids on every refresh, as pods
// replaced faster than anything forgets them; with extra invalid ids.
type churn struct {
	perRefresh, invalid int
	refresh             int
	stopped             bool // presents nothing
}

func (c *churn) Window(context.Context, string, string, time.Duration) (*llmdiagv1.NodeMetrics, error) {
	return nil, source.ErrUnknownNode
}

func (c *churn) Refresh(context.Context, string) ([]source.Observation, error) {
	if c.stopped {
		return nil, nil
	}
	now := time.Now()
	obs := make([]source.Observation, 0, c.perRefresh+c.invalid)
	for i := range c.perRefresh {
		id := fmt.Sprintf("10.%d.%d.%d:8000", c.refresh/250, c.refresh%250, i)
		model := fmt.Sprintf("model-%d", i%50)
		obs = append(obs, source.Observation{Node: fleet.Node{ID: id}, Metrics: &llmdiagv1.NodeMetrics{
			Node: id, Model: model, Window: "5m", Up: true, ObservedAt: timestamppb.New(now),
			Queue: sample.F(0), Running: sample.F(10), KvPressure: sample.F(0.3),
			GenerationTokensPerSecond: sample.F(500),
		}})
	}
	for i := range c.invalid {
		id := fmt.Sprintf("pod with spaces %d/%d", c.refresh, i)
		obs = append(obs, source.Observation{Node: fleet.Node{ID: id}, Metrics: &llmdiagv1.NodeMetrics{Node: id, Up: true, ObservedAt: timestamppb.New(now)}})
	}
	c.refresh++
	return obs, nil
}

// sets records what the loop reported of the node set.
type sets struct {
	mu                        sync.Mutex
	refused, invalid, removed int
	maxKept                   int
}

func (s *sets) ObserveRefresh(time.Duration, error)      {}
func (s *sets) SetNodeStatuses(map[llmdiagv1.Status]int) {}
func (s *sets) ObserveNodeSet(ns refresh.NodeSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused += ns.Refused
	s.invalid += ns.Invalid
	s.removed += len(ns.Removed)
	s.maxKept = max(s.maxKept, ns.Kept)
}

// follower is a stream subscriber keeping the nodes it was told of, as
// client.View does: a node joins with its first state and leaves with its
// removal.
type follower struct {
	mu    sync.Mutex
	nodes map[string]bool
	peak  int
}

func (f *follower) run(ctx context.Context, sub *fanout.Sub) {
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return
		}
		if m.Kind != fanout.Change {
			continue
		}
		f.mu.Lock()
		if m.Health.GetRemoved() {
			delete(f.nodes, m.Health.GetNode())
		} else {
			f.nodes[m.Health.GetNode()] = true
		}
		f.peak = max(f.peak, len(f.nodes))
		f.mu.Unlock()
	}
}

func (f *follower) size() (now, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.nodes), f.peak
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestChurnIsBounded is the acceptance test of bounded state: a source
// presenting 1,000 new node ids every refresh for 100 refreshes, through the
// real loop, memory store and fanout hub, with a stream subscriber, leaves
// every one of them holding at most what --max-nodes and --retention allow,
// and the heap does not grow with the refreshes. Time is synctest's: the
// 100 refreshes 5 s apart pass at once.
func TestChurnIsBounded(t *testing.T) {
	const (
		interval   = 5 * time.Second
		perRefresh = 1000
	)
	for _, tc := range []struct {
		name      string
		retention time.Duration
		maxNodes  int
		bound     int // nodes kept at most
		capBinds  bool
		refreshes int
	}{
		// Six refreshes' worth of nodes are within the retention, and the
		// one that just arrived before the sweep of the oldest.
		{"retention binds", 30 * time.Second, 10000, perRefresh * (30/5 + 1), false, 100},
		// The cap binds from the third refresh, and a minute's retention
		// frees room every twelve: 40 refreshes see three such cycles (at a
		// third of the time under -race).
		{"max-nodes binds", time.Minute, 2500, 2500, true, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				st := memory.New(memory.Options{}, "churn")
				hub := fanout.New(st, fanout.Options{})
				go hub.Run(ctx)
				sub, _, _, err := hub.Sync(ctx, fanout.SubOptions{Heartbeat: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				f := &follower{nodes: map[string]bool{}}
				go f.run(ctx, sub)

				src := &churn{perRefresh: perRefresh, invalid: 3}
				rec := &sets{}
				log := slog.New(slog.NewTextHandler(io.Discard, nil))
				loop := refresh.New(src, st, rec, log, time.Now, refresh.Config{
					Interval: interval, Retention: tc.retention, MaxNodes: tc.maxNodes, Thresholds: diagnose.DefaultThresholds(),
				})
				var warm uint64
				refreshes := tc.refreshes
				for r := range refreshes {
					if err := loop.Once(ctx); err != nil {
						t.Fatalf("refresh %d: %v", r, err)
					}
					synctest.Wait() // the hub and the subscriber have caught up
					stored, hubbed := st.Len(), hub.Nodes()
					followed, _ := f.size()
					if stored > tc.bound || hubbed > tc.bound || followed > tc.bound {
						t.Fatalf("refresh %d: store %d, hub %d, subscriber %d nodes; bound %d", r, stored, hubbed, followed, tc.bound)
					}
					if r == 20 {
						warm = heap()
					}
					time.Sleep(interval)
				}
				final := heap()
				stored, hubbed := st.Len(), hub.Nodes()
				_, peak := f.size()
				t.Logf("after %d refreshes of %d new nodes: store %d, hub %d nodes, subscriber peak %d; heap %.1f MiB at refresh 20, %.1f MiB at %d; refused %d, removed %d, invalid ids %d",
					refreshes, perRefresh, stored, hubbed, peak, mib(warm), mib(final), refreshes, rec.refused, rec.removed, rec.invalid)
				// Unbounded, the 80,000 nodes added since refresh 20 would
				// take well over 100 MiB; bounded, the heap stays where the
				// steady state put it.
				if final > warm+16<<20 {
					t.Errorf("heap grew from %.1f MiB to %.1f MiB over %d refreshes", mib(warm), mib(final), refreshes-20)
				}
				if rec.maxKept > tc.bound {
					t.Errorf("the loop kept up to %d nodes; bound %d", rec.maxKept, tc.bound)
				}
				if rec.invalid != 3*refreshes {
					t.Errorf("%d invalid ids counted, want %d", rec.invalid, 3*refreshes)
				}
				if tc.capBinds != (rec.refused > 0) {
					t.Errorf("refused %d new nodes; the cap binds: %v", rec.refused, tc.capBinds)
				}
				// Every node admitted was removed or is still kept.
				if admitted := perRefresh*refreshes - rec.refused; rec.removed+stored != admitted {
					t.Errorf("%d removed + %d kept != %d admitted", rec.removed, stored, admitted)
				}
				// The source stops presenting anything: after the retention
				// everything is gone, from every holder.
				src.stopped = true
				time.Sleep(tc.retention)
				if err := loop.Once(ctx); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				followed, _ := f.size()
				if n, h := st.Len(), hub.Nodes(); n != 0 || h != 0 || followed != 0 {
					t.Errorf("after the retention with no node presented: store %d, hub %d, subscriber %d nodes; want 0", n, h, followed)
				}
				cancel()
				synctest.Wait()
			})
		})
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
