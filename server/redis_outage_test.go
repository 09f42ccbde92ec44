package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/redisstore"
	"github.com/llmdiag/llmdiag/store/replica"
	"github.com/llmdiag/llmdiag/telemetry"
)

// flipSource is fakeSource whose glm-1 queues hard on every other call, so
// every refresh changes its status.
type flipSource struct {
	fakeSource
	calls atomic.Int64
}

func (f *flipSource) Refresh(ctx context.Context, window string) ([]source.Observation, error) {
	f.now = time.Now()
	obs, err := f.fakeSource.Refresh(ctx, window)
	if f.calls.Add(1)%2 == 0 {
		for _, o := range obs {
			if o.Node.ID == "glm-1" {
				q := 500.0
				o.Metrics.Queue = &q
			}
		}
	}
	return obs, err
}

// recording remembers, in order, every health event the leader published.
type recording struct {
	store.Store
	mu  sync.Mutex
	evs []*llmdiagv1.NodeHealth
}

func (r *recording) Publish(ctx context.Context, h *llmdiagv1.NodeHealth) (store.Event, error) {
	ev, err := r.Store.Publish(ctx, h)
	if err == nil {
		r.mu.Lock()
		r.evs = append(r.evs, h)
		r.mu.Unlock()
	}
	return ev, err
}

// TestRedisOutageUnderLoad stops a real redis-server while a bounded load
// runs against a replica and the leader keeps refreshing, then starts it
// again: no unary call fails, answers say when they come from the copy, and
// a subscriber sees every status change the leader made, in order, with no
// gap and no repeat, from the state it was first sent on.
//
// Every phase waits for what it needs (changes published with Redis up,
// during the outage, after recovery) rather than for a guessed time, so a
// busy machine only makes it slower.
func TestRedisOutageUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a Redis outage, about 10 s")
	}
	rs := redistest.StartWith(t, redistest.Options{Persist: true})
	rdb, err := redisstore.NewClient(rs.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	tm, err := telemetry.New(reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = time.Minute
	rep := replica.New(redisstore.New(rdb, redisstore.Options{}), memory.New(memory.Options{}, "copy"), replica.Options{SyncEvery: 200 * time.Millisecond})
	leader := &recording{Store: rep}
	src := &flipSource{fakeSource: fakeSource{nodes: []fleet.Node{{ID: "glm-0", Model: "glm-4.6"}, {ID: "glm-1", Model: "glm-4.6"}}}}
	loop := refresh.New(src, leader, tm, log, time.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th, Interval: 200 * time.Millisecond})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rep.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	bg.Go(func() { rep.Run(ctx) })
	leaderCtx, stopLeader := context.WithCancel(ctx)
	leaderDone := make(chan struct{})
	go func() { defer close(leaderDone); loop.Run(leaderCtx) }()
	defer func() { stopLeader(); <-leaderDone }()

	srv := servertest.Start(t, servertest.Options{Store: rep, Source: src, Registry: reg, Log: log,
		Config: server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: time.Minute, Thresholds: th, MinHeartbeat: time.Second}})
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	// The subscriber records the state it is first sent and the changes
	// that follow.
	var seenMu sync.Mutex
	initial := map[string]*llmdiagv1.NodeHealth{}
	var seen []*llmdiagv1.NodeHealth
	streamCtx, closeStream := context.WithCancel(ctx)
	defer closeStream()
	stream, err := c.StreamHealth(streamCtx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for stream.Receive() {
			m := stream.Msg()
			seenMu.Lock()
			switch m.GetKind() {
			case llmdiagv1.EventKind_EVENT_KIND_INITIAL:
				initial[m.GetHealth().GetNode()] = m.GetHealth()
			case llmdiagv1.EventKind_EVENT_KIND_SYNCED:
				close(synced)
			case llmdiagv1.EventKind_EVENT_KIND_CHANGE:
				seen = append(seen, m.GetHealth())
			}
			seenMu.Unlock()
		}
	})
	select {
	case <-synced:
	case <-time.After(time.Minute):
		t.Fatal("no SYNCED within a minute")
	}
	changes := func() int {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return len(leader.evs)
	}
	degraded := func() bool { _, _, bad := rep.Degraded(); return bad }

	// A bounded load: four callers until the outage is over.
	var calls, failures, fromCopy atomic.Int64
	stop := make(chan struct{})
	var load sync.WaitGroup
	for g := range 4 {
		load.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var d *llmdiagv1.Degraded
				var err error
				switch (g + i) % 3 {
				case 0:
					var r *connect.Response[llmdiagv1.GetNodeMetricsResponse]
					r, err = c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-1"}))
					d = r.Msg.GetDegraded()
				case 1:
					var r *connect.Response[llmdiagv1.DiagnoseNodeResponse]
					r, err = c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: "glm-0"}))
					d = r.Msg.GetDegraded()
				default:
					var r *connect.Response[llmdiagv1.ListNodesResponse]
					r, err = c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
					d = r.Msg.GetDegraded()
				}
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					t.Logf("call failed: %v", err)
				} else if d != nil {
					fromCopy.Add(1)
				}
				time.Sleep(5 * time.Millisecond) // pacing, not a wait
			}
		})
	}

	n := changes()
	testkit.Eventually(t, time.Minute, "3 status changes with Redis up", func() bool { return changes() >= n+3 })
	rs.Stop()
	n = changes()
	outage := testkit.Eventually(t, time.Minute, "the replica to see the outage and the leader to publish 5 changes during it", func() bool {
		return degraded() && changes() >= n+5
	})
	during := changes() - n
	rs.Restart()
	testkit.Eventually(t, time.Minute, "the replica to recover after Redis restarted", func() bool { return !degraded() })
	n = changes()
	testkit.Eventually(t, time.Minute, "3 status changes after recovery", func() bool { return changes() >= n+3 })
	close(stop)
	load.Wait()

	// The leader stops; every change it published must reach the
	// subscriber.
	stopLeader()
	<-leaderDone
	leader.mu.Lock()
	published := append([]*llmdiagv1.NodeHealth(nil), leader.evs...)
	leader.mu.Unlock()
	same := func(a, b *llmdiagv1.NodeHealth) bool {
		return a.GetNode() == b.GetNode() && a.GetStatus() == b.GetStatus() && a.GetObservedAt().AsTime().Equal(b.GetObservedAt().AsTime())
	}
	last := published[len(published)-1]
	testkit.Eventually(t, time.Minute, "the subscriber to see the leader's last change", func() bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		return slices.ContainsFunc(seen, func(h *llmdiagv1.NodeHealth) bool { return same(h, last) })
	})
	closeStream()
	reader.Wait()

	t.Logf("%d calls, %d answered from the copy, %d failed; the leader published %d changes, %d during the outage (in %v); the subscriber saw %d",
		calls.Load(), fromCopy.Load(), failures.Load(), len(published), during, outage.Round(time.Millisecond), len(seen))
	if failures.Load() != 0 {
		t.Errorf("%d of %d unary calls failed during the outage; want 0", failures.Load(), calls.Load())
	}
	if fromCopy.Load() == 0 {
		t.Error("no answer said it came from the copy during the outage")
	}
	// Per node: the state the subscriber was first sent is the one the
	// leader last published at or before that state's observation (a
	// refresh that changed nothing published nothing), and the changes it
	// saw are exactly the leader's after it.
	for _, node := range []string{"glm-0", "glm-1"} {
		var pub, got []*llmdiagv1.NodeHealth
		for _, h := range published {
			if h.GetNode() == node {
				pub = append(pub, h)
			}
		}
		for _, h := range seen {
			if h.GetNode() == node {
				got = append(got, h)
			}
		}
		// The leader publishes a node only when it changed from the state
		// its copy holds: the same state twice in a row means its copy
		// went back in time and a change was never announced.
		for i := 1; i < len(pub); i++ {
			if pub[i].GetStatus() == pub[i-1].GetStatus() && pub[i].GetRootCause() == pub[i-1].GetRootCause() && pub[i].GetRoutable() == pub[i-1].GetRoutable() && pub[i].GetLoadScore() == pub[i-1].GetLoadScore() {
				t.Errorf("%s: the leader published the same state twice in a row (#%d and #%d): %s", node, i-1, i, describe(pub))
			}
		}
		first := initial[node]
		if first == nil {
			t.Errorf("%s: no initial state", node)
			continue
		}
		k := -1
		for i, h := range pub {
			if !h.GetObservedAt().AsTime().After(first.GetObservedAt().AsTime()) {
				k = i
			}
		}
		if k < 0 || pub[k].GetStatus() != first.GetStatus() || pub[k].GetRootCause() != first.GetRootCause() {
			t.Errorf("%s: the initial state %s is not the one the leader last published before it (published: %s)", node, describe([]*llmdiagv1.NodeHealth{first}), describe(pub))
			continue
		}
		want := pub[k+1:]
		if len(got) != len(want) || !slices.EqualFunc(got, want, same) {
			t.Errorf("%s: after the initial state %s (the leader's #%d of %d) the subscriber saw %d changes, want the leader's %d:\n saw  %s\n want %s",
				node, describe([]*llmdiagv1.NodeHealth{first}), k, len(pub), len(got), len(want), describe(got), describe(want))
		}
	}
}

// describe lists health events as status@time, for a failure message.
func describe(hs []*llmdiagv1.NodeHealth) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s@%s ", strings.TrimPrefix(h.GetStatus().String(), "STATUS_"), h.GetObservedAt().AsTime().Format("15:04:05.000"))
	}
	return b.String()
}
