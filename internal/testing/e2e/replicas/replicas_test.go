package replicas_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestServeReplicasWithRedis runs `llmdiag serve --redis` twice against one
// Redis: both serve the same nodes, one refreshes; the "redis" health
// service follows Redis down and up while the overall status stays; after
// Redis comes back a replica takes the lease again.
func TestServeReplicasWithRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two serve replicas on a real Redis")
	}
	srv := redistest.Start(t)
	var waiting atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n"+
			"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} %d\n", waiting.Load())
	}))
	defer target.Close()

	type replica struct {
		addr string
		log  *testkit.SyncBuffer
	}
	var reps []replica
	for _, id := range []string{"a", "b"} {
		addr := testkit.FreeAddr(t)
		r := replica{addr: addr, log: &testkit.SyncBuffer{}}
		reps = append(reps, r)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		args := []string{"serve", "--redis", srv.URL(), "--redis-prefix", "e2e:", "--lease-ttl", "1s", "--replica-id", id,
			"--listen", addr, "--interval", "200ms", "--target", "n0=" + target.URL + "/metrics,model=m,engine=vllm"}
		go func() {
			done <- cli.Run(ctx, args, cli.Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: r.log})
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve %s: %v\n%s", id, err, r.log)
				}
			case <-time.After(15 * time.Second):
				t.Errorf("serve %s did not stop", id)
			}
			if t.Failed() {
				t.Logf("serve %s log:\n%s", id, r.log)
			}
		})
	}
	nodes := func(addr string) (string, error) {
		var out testkit.SyncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := cli.Run(ctx, []string{"nodes", "--addr", "http://" + addr}, cli.Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: io.Discard})
		return out.String(), err
	}
	for _, r := range reps {
		var last string
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("last answer of %s: %s", r.addr, last)
			}
		})
		testkit.Wait{Every: 2 * time.Millisecond, For: 20 * time.Second}.Until(t, r.addr+" serving with n0", func() bool {
			out, err := nodes(r.addr)
			last = fmt.Sprintf("nodes: %v %q; health %s, redis %s", err, out, health(r.addr, ""), health(r.addr, "redis"))
			return err == nil && strings.Contains(out, "n0") && health(r.addr, "") == "SERVING" && health(r.addr, "redis") == "SERVING"
		})
	}
	leaders := func() (n int) {
		for _, r := range reps {
			if leaderGauge(r.addr) == "1" {
				n++
			}
		}
		return n
	}
	if n := leaders(); n != 1 {
		t.Fatalf("%d leaders", n)
	}

	// A subscriber on the follower sees the change the leader makes.
	follower := reps[0]
	if leaderGauge(follower.addr) == "1" {
		follower = reps[1]
	}
	c, err := client.New("http://" + follower.addr)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	stream, err := c.StreamHealth(sctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{Nodes: []string{"n0"}}))
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() && stream.Msg().GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED {
	}
	waiting.Store(500)
	changed := time.Now()
	var got *llmdiagv1.NodeHealth
	for stream.Receive() {
		if m := stream.Msg(); m.GetKind() == llmdiagv1.EventKind_EVENT_KIND_CHANGE && m.GetHealth().GetStatus() != llmdiagv1.Status_STATUS_OK {
			got = m.GetHealth()
			break
		}
	}
	if got == nil {
		t.Fatalf("the follower's subscriber saw no change after n0 queued 500: %v", stream.Err())
	}
	t.Logf("follower's subscriber saw n0 %v/%v %v after the queue rose (refresh 200ms)", got.GetStatus(), got.GetRootCause(), time.Since(changed).Round(time.Millisecond))
	stream.Close()
	scancel()
	waiting.Store(0)

	srv.Kill()
	killed := time.Now()
	testkit.Wait{Every: 2 * time.Millisecond, For: 2 * time.Second}.Until(t, "the leader steps down", func() bool { return leaders() == 0 })
	t.Logf("leader stepped down %v after Redis died (lease ttl 1s)", time.Since(killed).Round(time.Millisecond))
	for _, r := range reps {
		testkit.Wait{Every: 2 * time.Millisecond, For: 5 * time.Second}.Until(t, r.addr+" redis NOT_SERVING", func() bool { return health(r.addr, "redis") == "NOT_SERVING" })
		if got := health(r.addr, ""); got != "SERVING" {
			t.Errorf("%s overall status %s while Redis is down, want it unchanged (SERVING)", r.addr, got)
		}
	}
	// Reads keep being answered from each replica's copy.
	for _, r := range reps {
		out, err := nodes(r.addr)
		if err != nil || !strings.Contains(out, "n0") {
			t.Errorf("nodes on %s while Redis is down: %v %q; want n0 from the replica's copy", r.addr, err, out)
		}
	}

	srv.Restart() // empty: no persistence
	for _, r := range reps {
		testkit.Wait{Every: 2 * time.Millisecond, For: 5 * time.Second}.Until(t, r.addr+" redis SERVING again", func() bool { return health(r.addr, "redis") == "SERVING" })
	}
	back := testkit.Wait{Every: 2 * time.Millisecond, For: 5 * time.Second}.Until(t, "a leader again and n0 refreshed", func() bool {
		out, err := nodes(reps[1].addr)
		return leaders() == 1 && err == nil && strings.Contains(out, "n0")
	})
	t.Logf("after Redis came back: a leader and n0 in the store within %v", back.Round(time.Millisecond))
	for _, r := range reps {
		for _, line := range strings.Split(r.log.String(), "\n") {
			if strings.Contains(line, "leadership") || strings.Contains(line, "lease:") {
				t.Log(line)
			}
		}
	}
	all := reps[0].log.String() + reps[1].log.String()
	if strings.Count(all, "leadership: acquired") < 2 || !strings.Contains(all, "leadership: lost") {
		t.Errorf("leadership changes not logged:\n%s", all)
	}
}

// health is service's health status at addr ("SERVING"), or why there
// is none.
func health(addr, service string) string {
	st, err := testkit.HealthStatus(context.Background(), &http.Client{Timeout: 3 * time.Second}, "http://"+addr, service)
	if err != nil {
		return err.Error()
	}
	return st
}

func leaderGauge(addr string) string {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "llmdiag_lease_is_leader ") {
			return strings.TrimPrefix(line, "llmdiag_lease_is_leader ")
		}
	}
	return "missing"
}
