package client_test

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// fleet runs the real service on a loopback port over an in-memory store
// that the example scripts: set stores a node's verdict and publishes the
// health event a refresh would.
type fleet struct {
	URL  string
	st   *memory.Store
	stop func()
}

func startFleet() *fleet { return startFleetAt("127.0.0.1:0") }

func startFleetAt(addr string) *fleet {
	st := memory.New(memory.Options{}, "example")
	srv, err := servertest.Run(servertest.Options{Store: st, Addr: addr, Grace: time.Second, Config: server.Config{MinHeartbeat: time.Second}})
	if err != nil {
		panic(err)
	}
	return &fleet{URL: srv.URL, st: st, stop: func() { _ = srv.Stop() }}
}

func (f *fleet) set(id string, status llmdiagv1.Status, cause llmdiagv1.Cause, routable bool, score float64) {
	now := time.Now()
	n := &llmdiagv1.Node{Id: id, Model: "glm-4.6", Status: status, RootCause: cause, Routable: routable, LoadScore: score, LastSeen: timestamppb.New(now)}
	m := &llmdiagv1.NodeMetrics{Node: id, Model: "glm-4.6", ObservedAt: timestamppb.New(now), Up: true}
	ctx := context.Background()
	if err := f.st.Put(ctx, &store.Record{Node: n, Metrics: m}, diagnose.Point{At: now, Up: true}); err != nil {
		panic(err)
	}
	if _, err := f.st.Publish(ctx, refresh.Health(n, m.GetObservedAt())); err != nil {
		panic(err)
	}
}

// waitFor polls a condition an example waits on (an Example has no
// testing.TB for testkit.Eventually; the output check fails it instead).
func waitFor(ok func() bool) {
	for deadline := time.Now().Add(10 * time.Second); !ok() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// A router keeps a live view of the glm-4.6 nodes and asks it, on every
// request, whether a node may take traffic. The view follows the service's
// health stream: when glm-4.6-1 recovers, the view knows within
// milliseconds.
func ExampleClient_Watch() {
	f := startFleet()
	defer f.stop()
	ok, crit := llmdiagv1.Status_STATUS_OK, llmdiagv1.Status_STATUS_CRIT
	f.set("glm-4.6-0", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.3)
	f.set("glm-4.6-1", crit, llmdiagv1.Cause_CAUSE_OVERLOADED, false, 2.4)

	c, err := client.New(f.URL, client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	view := c.Watch(ctx, client.Selector{Model: "glm-4.6", Heartbeat: 5 * time.Second})
	<-view.Synced()
	for _, n := range view.Nodes() {
		fmt.Printf("%s routable=%v score=%.1f %s\n", n.Node, view.Routable(n.Node), n.LoadScore, n.RootCause)
	}

	f.set("glm-4.6-1", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.4)
	waitFor(func() bool { return view.Routable("glm-4.6-1") })
	score, _ := view.Score("glm-4.6-1")
	fmt.Printf("glm-4.6-1 routable=%v score=%.1f\n", view.Routable("glm-4.6-1"), score)
	stale, _ := view.Stale()
	fmt.Println("stale:", stale)
	// Output:
	// glm-4.6-0 routable=true score=0.3 CAUSE_HEALTHY
	// glm-4.6-1 routable=false score=2.4 CAUSE_OVERLOADED
	// glm-4.6-1 routable=true score=0.4
	// stale: false
}

// Pick sends each request to the least loaded routable candidate; nodes
// whose scores are within 0.05 of each other share the traffic at random.
// A node llmdiag does not know is used only when no known candidate is
// routable (fail-open); with llmdiag unreachable or silent for three
// heartbeats, every candidate is (WithFailPolicy chooses otherwise).
func ExampleView_Pick() {
	f := startFleet()
	defer f.stop()
	ok := llmdiagv1.Status_STATUS_OK
	f.set("glm-4.6-0", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.30)
	f.set("glm-4.6-1", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.32)
	f.set("glm-4.6-2", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.70)
	f.set("glm-4.6-3", llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, false, 1.2)

	c, _ := client.New(f.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	view := c.Watch(ctx, client.Selector{Model: "glm-4.6"})
	<-view.Synced()

	candidates := []string{"glm-4.6-0", "glm-4.6-1", "glm-4.6-2", "glm-4.6-3"}
	picked := map[string]int{}
	for range 1000 {
		node, _ := view.Pick(candidates)
		picked[node]++
	}
	fmt.Println("glm-4.6-0 and glm-4.6-1 share the traffic:", picked["glm-4.6-0"] > 300 && picked["glm-4.6-1"] > 300)
	fmt.Println("glm-4.6-2 (0.70) and glm-4.6-3 (unroutable) get none:", picked["glm-4.6-2"]+picked["glm-4.6-3"] == 0)

	node, found := view.Pick([]string{"glm-4.6-3", "glm-4.6-9"})
	fmt.Println("unknown node as last resort:", node, found)
	_, found = view.Pick([]string{"glm-4.6-3"})
	fmt.Println("only unroutable candidates:", found)
	// Output:
	// glm-4.6-0 and glm-4.6-1 share the traffic: true
	// glm-4.6-2 (0.70) and glm-4.6-3 (unroutable) get none: true
	// unknown node as last resort: glm-4.6-9 true
	// only unroutable candidates: false
}
