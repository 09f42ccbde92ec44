package routertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// waitedUntil waits for ok, polling every 10ms so the latency measured
// from it is fine-grained, and returns when it first held.
func waitedUntil(t *testing.T, what string, d time.Duration, ok func() bool) time.Time {
	t.Helper()
	testkit.Wait{For: d, Every: 10 * time.Millisecond}.Until(t, what, ok)
	return time.Now()
}

const (
	hot  = "glm-4.6-0" // driven into overload and back
	peer = "glm-4.6-1"
)

// TestRouterSteersAroundOverload: the overloaded scenario's two GLM nodes,
// glm-4.6-0 first lightly loaded (the router prefers it), then offered
// twice what its 48 batch slots serve, then nothing. The router must stop
// picking it within 2 refresh intervals + 1 s of its queue passing the
// saturation point (a scrape, a refresh, the health event, the stream),
// and pick it again once it has drained.
func TestRouterSteersAroundOverload(t *testing.T) {
	const interval = 500 * time.Millisecond
	steer(t, []string{"--interval", interval.String()}, 2*interval+time.Second, time.Second)
}

// TestRouterSteersAroundOverloadFastLane is TestRouterSteersAroundOverload
// with the refresh at its default 5 s and the fast lane reading every
// 250 ms (serve --fast-interval): the router must stop picking the node
// within 1 s of its queue passing saturation, and stay away over a whole
// refresh (the refresh does not undo what the fast reads held).
func TestRouterSteersAroundOverloadFastLane(t *testing.T) {
	steer(t, []string{"--fast-interval", "250ms"}, time.Second, 6*time.Second)
}

// steer runs the router against serve with args: the router must stop
// picking the overloaded node within bound, and not pick it again for
// away.
func steer(t *testing.T, args []string, bound, away time.Duration) {
	if testing.Short() {
		t.Skip("-short: a router end to end, about 20 s")
	}
	cfg := simtest.Scenario(t, "overloaded", 1)
	cfg.Nodes[0].Workload.Rate = 1 // start light; SetRate overloads it later
	// 5× real time: the queue builds and drains in seconds of wall time.
	cfg.Speed, cfg.Warmup = 5, 2*time.Minute
	fl, fleetPath := simtest.Start(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	addr := testkit.FreeAddr(t)
	var serveOut, serveErr testkit.SyncBuffer
	wg.Go(func() {
		env := cli.Env{Getenv: func(string) string { return "" }, Stdout: &serveOut, Stderr: &serveErr}
		if err := cli.Run(ctx, append([]string{"serve", "--fleet", fleetPath, "--listen", addr, "--log-level", "warn"}, args...), env); err != nil {
			t.Errorf("serve: %v\n%s", err, serveErr.String())
		}
	})

	c, err := client.New("http://"+addr, client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		t.Fatal(err)
	}
	view := c.Watch(ctx, client.Selector{Model: "glm-4.6", Heartbeat: 5 * time.Second}) // serve refuses heartbeats under 5 s
	cands := []string{hot, peer}
	// picks asks the router n times and counts how often it chose hot.
	picks := func(n int) int {
		k := 0
		for range n {
			if p, _ := view.Pick(cands); p == hot {
				k++
			}
		}
		return k
	}
	score := func(id string) float64 { s, _ := view.Score(id); return s }
	logState := func(when string) {
		st, _ := fl.Stats(hot)
		t.Logf("%s: sim %s queue=%d running=%d kv=%.2f; view %s=%.2f %s=%.2f; %+v", when, hot, st.Waiting, st.Running, st.KVUsage,
			hot, score(hot), peer, score(peer), view.Status())
	}

	testkit.Eventually(t, 60*time.Second, "the router to prefer the lightly loaded "+hot, func() bool { return picks(50) == 50 })
	logState("before")

	// Overload: 12 req/s against ~6 it can serve.
	if err := fl.SetRate(hot, 12); err != nil {
		t.Fatal(err)
	}
	overloaded := waitedUntil(t, hot+"'s queue to pass saturation (5)", 30*time.Second, func() bool {
		st, _ := fl.Stats(hot)
		return st.Waiting > 5
	})
	stopped := waitedUntil(t, "the router to stop picking "+hot, 30*time.Second, func() bool { return picks(50) == 0 })
	logState("overloaded")
	t.Logf("router stopped picking %s %v after its queue passed saturation (bound %v)", hot, stopped.Sub(overloaded).Round(time.Millisecond), bound)
	if d := stopped.Sub(overloaded); d > bound {
		t.Errorf("router kept picking %s for %v after it became overloaded, want ≤ %v", hot, d, bound)
	}
	// The router may first stop picking it on the load score alone, before
	// the saturation holds mark it unroutable: a queue that dips as a batch
	// of requests finishes then lowers its score again, as it should. Once
	// it is marked saturated, the router stays away while it is overloaded.
	saturated := waitedUntil(t, hot+" to be marked saturated (unroutable)", 30*time.Second, func() bool { return !view.Routable(hot) })
	logState("saturated")
	t.Logf("%s marked saturated %v after its queue passed saturation", hot, saturated.Sub(overloaded).Round(time.Millisecond))
	for range int(away / (100 * time.Millisecond)) {
		time.Sleep(100 * time.Millisecond)
		if k := picks(50); k != 0 {
			logState("relapse")
			t.Fatalf("router picked %s %d/50 times while it was overloaded", hot, k)
		}
	}

	// Recovery: no more traffic; the queue drains, then KV.
	if err := fl.SetRate(hot, 0); err != nil {
		t.Fatal(err)
	}
	drained := waitedUntil(t, hot+"'s queue to drain", 60*time.Second, func() bool {
		st, _ := fl.Stats(hot)
		return st.Waiting == 0
	})
	back := waitedUntil(t, "the router to pick "+hot+" again", 90*time.Second, func() bool { return picks(50) > 0 })
	logState("recovered")
	t.Logf("router picked %s again %v after its queue drained", hot, back.Sub(drained).Round(time.Millisecond))
	if st := view.Status(); st.Stale || !st.Connected {
		t.Errorf("view status at the end: %+v", st)
	}
}
