package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestWatchReconnectsAndResyncs: the service goes away (the view goes
// stale and fails open), comes back on the same address with another store
// (the resume token names a feed it does not hold), and the view resyncs to
// the new state; every protocol.
func TestWatchReconnectsAndResyncs(t *testing.T) {
	for _, p := range []client.Protocol{client.ProtocolConnect, client.ProtocolGRPC, client.ProtocolGRPCWeb} {
		t.Run(string(p), func(t *testing.T) {
			f := startFleet()
			ok := llmdiagv1.Status_STATUS_OK
			f.set("a", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.2)
			f.set("b", llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_OVERLOADED, false, 3)
			c, err := client.New(f.URL, client.WithProtocol(p))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			retries := make(chan time.Duration, 100)
			view := c.Watch(ctx, client.Selector{Heartbeat: time.Second},
				client.WithStaleAfter(500*time.Millisecond),
				client.WithBackoff(20*time.Millisecond, 200*time.Millisecond),
				client.WithRetryHook(func(_ error, d time.Duration) {
					select {
					case retries <- d:
					default:
					}
				}))
			select {
			case <-view.Synced():
			case <-time.After(10 * time.Second):
				t.Fatal("no SYNCED")
			}
			if view.Routable("b") || !view.Routable("a") {
				t.Fatal("first state wrong")
			}
			f.set("a", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.5)
			waitFor(func() bool { s, _ := view.Score("a"); return s == 0.5 })
			if s, _ := view.Score("a"); s != 0.5 {
				t.Fatalf("change not applied: score %v", s)
			}

			addr := strings.TrimPrefix(f.URL, "http://")
			f.stop()
			waitFor(func() bool { st, _ := view.Stale(); return st })
			st := view.Status()
			if !st.Stale || st.Connected || st.LastError == nil {
				t.Fatalf("after the service stopped: %+v", st)
			}
			if !view.Routable("b") {
				t.Fatal("stale view is not fail-open")
			}
			if d := <-retries; d >= 200*time.Millisecond {
				t.Fatalf("backoff %v beyond its bound", d)
			}

			f2 := startFleetAt(addr)
			defer f2.stop()
			f2.set("b", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.1)
			f2.set("c", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.4)
			waitFor(func() bool { _, known := view.Node("c"); return known })
			if _, known := view.Node("a"); known {
				t.Fatal("resync kept a node the new service does not have")
			}
			if p, _ := view.Pick([]string{"a", "b", "c"}); p != "b" {
				t.Fatalf("Pick after resync = %q, want b", p)
			}
			if st := view.Status(); st.Stale || !st.Connected || st.Reconnects == 0 {
				t.Fatalf("after reconnecting: %+v", st)
			}
		})
	}
}

// TestWatchStopsOnRefusal: a selector the service refuses ends the watch
// with the service's error instead of retrying forever.
func TestWatchStopsOnRefusal(t *testing.T) {
	f := startFleet()
	defer f.stop()
	c, _ := client.New(f.URL)
	view := c.Watch(context.Background(), client.Selector{Nodes: []string{"bad id!"}})
	select {
	case <-view.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("watch still running")
	}
	if err := view.Err(); err == nil || !strings.Contains(err.Error(), "invalid_argument") {
		t.Fatalf("Err() = %v", err)
	}
}
