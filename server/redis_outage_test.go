package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
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
	"github.com/llmdiag/llmdiag/internal/redistest"
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
// a subscriber sees every status change the leader made, in order.
func TestRedisOutageUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 10 s")
	}
	rs := redistest.StartWith(t, redistest.Options{Persist: true})
	rdb, err := redisstore.NewClient(rs.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
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
	loop := refresh.New(src, leader, tm, log, time.Now, refresh.Config{Window: "5m", Thresholds: th, Interval: 200 * time.Millisecond})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rep.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); rep.Run(ctx) }()
	go func() { defer bg.Done(); loop.Run(ctx) }()

	ready := make(chan struct{})
	close(ready)
	svc := server.NewService(rep, src, log, time.Now, server.Config{DefaultWindow: "5m", StaleAfter: time.Minute, Thresholds: th}, ctx.Done())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- server.Serve(ctx, ln, server.Handler(svc, server.NewHealth(ready), reg), log, 5*time.Second)
	}()
	c, err := client.New("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	// The subscriber records the changes it sees.
	var seenMu sync.Mutex
	var seen []*llmdiagv1.NodeHealth
	stream, err := c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{HeartbeatInterval: durationpb.New(time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan struct{})
	bg.Add(1)
	go func() {
		defer bg.Done()
		for stream.Receive() {
			m := stream.Msg()
			switch m.GetKind() {
			case llmdiagv1.EventKind_EVENT_KIND_SYNCED:
				close(synced)
			case llmdiagv1.EventKind_EVENT_KIND_CHANGE:
				seenMu.Lock()
				seen = append(seen, m.GetHealth())
				seenMu.Unlock()
			}
		}
	}()
	<-synced
	leader.mu.Lock()
	before := len(leader.evs) // published before the subscriber's position
	leader.mu.Unlock()

	// A bounded load: four callers until the outage is over.
	var calls, failures, degraded atomic.Int64
	stop := make(chan struct{})
	var load sync.WaitGroup
	for g := range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
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
					degraded.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}

	time.Sleep(time.Second)
	rs.Stop()
	time.Sleep(2 * time.Second) // the leader refreshes ~10 times meanwhile
	rs.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, bad := rep.Degraded(); !bad {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not recover within 10 s of Redis restarting")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	load.Wait()
	// Every change published up to now must reach the subscriber, in order,
	// with no gap and no repeat. The subscriber's feed position at SYNCED
	// may be a change or so before the count taken then, so its changes are
	// the leader's from some k <= before on.
	leader.mu.Lock()
	published := append([]*llmdiagv1.NodeHealth(nil), leader.evs...)
	leader.mu.Unlock()
	same := func(a, b *llmdiagv1.NodeHealth) bool {
		return a.GetNode() == b.GetNode() && a.GetStatus() == b.GetStatus() && a.GetObservedAt().AsTime().Equal(b.GetObservedAt().AsTime())
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		seenMu.Lock()
		done := len(seen) > 0 && same(seen[len(seen)-1], published[len(published)-1])
		seenMu.Unlock()
		if done {
			break
		}
	}
	cancel()
	bg.Wait()
	<-served

	t.Logf("%d calls, %d answered from the copy, %d failed", calls.Load(), degraded.Load(), failures.Load())
	if failures.Load() != 0 {
		t.Errorf("%d of %d unary calls failed during the outage; want 0", failures.Load(), calls.Load())
	}
	if degraded.Load() == 0 {
		t.Error("no answer said it came from the copy during the outage")
	}
	seenMu.Lock()
	defer seenMu.Unlock()
	if len(published)-before < 10 {
		t.Fatalf("only %d status changes were published; the test needs the leader to keep changing glm-1", len(published)-before)
	}
	if len(seen) == 0 {
		t.Fatal("the subscriber saw no change")
	}
	k := slices.IndexFunc(published, func(h *llmdiagv1.NodeHealth) bool { return same(h, seen[0]) })
	t.Logf("leader published %d changes; the subscriber saw %d, from the leader's #%d on (synced after #%d)", len(published), len(seen), k, before)
	switch {
	case k < 0 || k > before:
		t.Errorf("the subscriber's first change %v is not one the leader published at or before it synced", seen[0])
	case len(seen) != len(published)-k:
		t.Errorf("subscriber saw %d changes, want the leader's %d from #%d on", len(seen), len(published)-k, k)
	default:
		for i, h := range seen {
			if !same(h, published[k+i]) {
				t.Errorf("change %d: saw %s %v, published %s %v", i, h.GetNode(), h.GetStatus(), published[k+i].GetNode(), published[k+i].GetStatus())
				break
			}
		}
	}
}
