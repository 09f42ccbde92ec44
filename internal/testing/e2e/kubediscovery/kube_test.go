package kubediscovery_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// awayFor is the API server's absence. How fast discovery follows is a
// figure of BenchmarkDiscoveryFollowsChurn, not a bound of this test: on a
// busy machine it is the machine's pace, not discovery's, that a wall-clock
// bound measures.
const awayFor = 30 * time.Second

// TestServeDiscoversKubernetes: serve --discovery with role inferencepool
// and role pod over 60 pods in two namespaces (two InferencePools, one of
// two rank ports, and pods selected by label) lists the 80 nodes with
// their model, engine and pool, and compares the pools; follows churn with
// a removed event per node gone and no verdict lost for the nodes that
// stayed; and while the API server is away for 30 s keeps refreshing every
// node, warns that discovery fails, and finds a pod created once it is
// back. The times each step took are logged; BenchmarkDiscoveryFollowsChurn
// measures them.
func TestServeDiscoversKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real etcd and kube-apiserver, 60 pods in front of simulated engines, and serve --discovery for a minute and more")
	}
	w := newWorld(t)
	w.createPools()
	created := time.Now()
	for i := range 20 {
		w.addPod("inference", fmt.Sprintf("qwen-%d", i), poolA)
		w.addPod("batch", fmt.Sprintf("llama-%d", i), poolB)
		ns := "inference"
		if i%2 == 1 {
			ns = "batch"
		}
		w.addPod(ns, fmt.Sprintf("chat-%d", i), labeled)
	}
	t.Logf("60 pods created and marked Ready in %v", time.Since(created).Round(time.Millisecond))
	want := w.want()
	if len(want) != 80 {
		t.Fatalf("%d nodes wanted, want 80", len(want))
	}

	sd := writeDiscovery(t, w.c.Kubeconfig)
	addr := testkit.FreeAddr(t)
	start := time.Now()
	stderr := clitest.Background(t, nil, "serve", "--listen", addr, "--discovery", sd, "--log-level", "warn")
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// 1. Every node listed, as the default rules make it.
	var last string
	clitest.WaitFor(t, "ListNodes to list the 80 nodes", 60*time.Second, func() bool {
		last = mismatch(listNodes(ctx, c), want)
		return last == ""
	}, &last)
	t.Logf("measured: the 80 nodes listed %v after serve started", time.Since(start).Round(time.Millisecond))
	clitest.WaitFor(t, "every node to have a verdict", 60*time.Second, func() bool {
		last = unknown(listNodes(ctx, c))
		return last == ""
	}, &last)
	t.Logf("measured: every node with a verdict %v after serve started", time.Since(start).Round(time.Millisecond))
	clitest.WaitFor(t, "ComparePercentiles by label pool to show pool-a (20 nodes) and pool-b (40)", 60*time.Second, func() bool {
		resp, err := c.ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{
			Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, GroupBy: llmdiagv1.GroupBy_GROUP_BY_LABEL, Label: "pool",
		}))
		if err != nil {
			last = err.Error()
			return false
		}
		got := map[string]int{}
		for _, r := range resp.Msg.GetRows() {
			got[r.GetSubject()] = len(r.GetNodes())
		}
		last = fmt.Sprint(got)
		return got["pool-a"] == 20 && got["pool-b"] == 40
	}, &last)
	t.Logf("compare by label pool: %s", last)
	if t.Failed() {
		return
	}

	// 2. Churn: 10 pods go, 10 others come.
	events := followHealth(t, ctx, c)
	stayed := map[string]bool{}
	var gone []string
	before := w.want()
	churn := time.Now()
	for i := range 4 {
		gone = append(gone, w.deletePod("inference", fmt.Sprintf("qwen-%d", i)).ids()...)
	}
	for i := range 3 {
		gone = append(gone, w.deletePod("batch", fmt.Sprintf("llama-%d", i)).ids()...)
		ns := "inference"
		if i%2 == 1 {
			ns = "batch"
		}
		gone = append(gone, w.deletePod(ns, fmt.Sprintf("chat-%d", i)).ids()...)
	}
	for i := range 4 {
		w.addPod("inference", fmt.Sprintf("qwen-new-%d", i), poolA)
	}
	for i := range 3 {
		w.addPod("batch", fmt.Sprintf("llama-new-%d", i), poolB)
		w.addPod("inference", fmt.Sprintf("chat-new-%d", i), labeled)
	}
	changed := time.Now()
	t.Logf("10 pods deleted and 10 created in %v", changed.Sub(churn).Round(time.Millisecond))
	want = w.want()
	for id := range before {
		if _, ok := want[id]; ok {
			stayed[id] = true
		}
	}
	if len(gone) != 13 || len(stayed) != 67 || len(want) != 80 {
		t.Fatalf("%d nodes gone, %d stayed, %d now; want 13, 67, 80", len(gone), len(stayed), len(want))
	}
	clitest.WaitFor(t, "ListNodes to follow the churn", 60*time.Second, func() bool {
		last = mismatch(listNodes(ctx, c), want)
		return last == ""
	}, &last)
	listedAt := time.Now()
	clitest.WaitFor(t, "a removed event for each node gone", 60*time.Second, func() bool {
		removed := events.removed()
		last = fmt.Sprint(removed)
		for _, id := range gone {
			if !removed[id] {
				return false
			}
		}
		return true
	}, &last)
	removedAt := time.Now()
	t.Logf("measured: after the last pod change, ListNodes followed in %v, the removed events all came in %v",
		listedAt.Sub(changed).Round(time.Millisecond), removedAt.Sub(changed).Round(time.Millisecond))
	// No verdict lost: each node that stayed is refreshed after the churn,
	// none removed or UNKNOWN meanwhile.
	clitest.WaitFor(t, "every node that stayed to be refreshed after the churn", 30*time.Second, func() bool {
		last = notSeenSince(listNodes(ctx, c), stayed, changed)
		return last == ""
	}, &last)
	if bad := events.lost(stayed); len(bad) > 0 {
		t.Errorf("nodes that stayed were removed or went UNKNOWN during the churn: %v", head(bad))
	}
	if t.Failed() {
		return
	}

	// 3. The API server away for 30 s.
	metrics := "http://" + addr + "/metrics"
	drained := w.c.StopAPIServer(t)
	stopped := time.Now()
	t.Logf("kube-apiserver gone %v after SIGTERM (it serves its open watches meanwhile)", drained.Round(time.Millisecond))
	var warned, failing time.Duration
	polls := 0
	for time.Since(stopped) < awayFor {
		polls++
		nodes := listNodes(ctx, c)
		if m := mismatch(nodes, want); m != "" {
			t.Fatalf("%v after the API server stopped: %s", time.Since(stopped).Round(time.Millisecond), m)
		}
		if u := unknown(nodes); u != "" {
			t.Fatalf("%v after the API server stopped: %s", time.Since(stopped).Round(time.Millisecond), u)
		}
		if warned == 0 && strings.Contains(stderr.String(), "discovery failing") {
			warned = time.Since(stopped)
		}
		if failing == 0 && series(metrics, `llmdiag_discovery_failing{job="pools"}`) == "1" && series(metrics, `llmdiag_discovery_failing{job="pods"}`) == "1" {
			failing = time.Since(stopped)
		}
		time.Sleep(500 * time.Millisecond) // the pace of the checks, not a wait for something to happen
	}
	t.Logf("measured: API server away %v, %d checks of the 80 nodes, none dropped or UNKNOWN; warning after %v, both jobs failing after %v",
		time.Since(stopped).Round(time.Millisecond), polls, warned.Round(time.Millisecond), failing.Round(time.Millisecond))
	if warned == 0 || failing == 0 {
		t.Errorf("no warning of the failing discovery while the API server was away (log warning after %v, llmdiag_discovery_failing after %v); stderr:\n%s", warned, failing, stderr)
	}
	all := map[string]bool{}
	for id := range want {
		all[id] = true
	}
	if m := notSeenSince(listNodes(ctx, c), all, stopped.Add(awayFor-10*time.Second)); m != "" {
		t.Errorf("not refreshed during the API server's absence: %s", m)
	}
	back := w.c.StartAPIServer(t)
	restarted := time.Now()
	t.Logf("kube-apiserver ready again in %v", back.Round(time.Millisecond))
	// Discovery finds the API server back by itself (it asks every
	// second for the pools, every --discovery-debounce for the pods) and
	// lists anew: the jobs recover before this test makes a request.
	clitest.WaitFor(t, "llmdiag_discovery_failing back to 0", 30*time.Second, func() bool {
		last = series(metrics, `llmdiag_discovery_failing{job="pools"}`) + " " + series(metrics, `llmdiag_discovery_failing{job="pods"}`)
		return last == "0 0"
	}, &last)
	t.Logf("measured: discovery recovered %v after the API server was back", time.Since(restarted).Round(time.Millisecond))
	if !strings.Contains(stderr.String(), "discovery failing") || !strings.Contains(stderr.String(), "did not answer") {
		t.Errorf("the warning does not name the API server that did not answer:\n%s", stderr)
	}
	// A pod of each job, found by watches begun anew, not waiting for
	// client-go's backoff (up to a minute).
	late := []*pod{w.addPod("inference", "qwen-late", poolA), w.addPod("batch", "chat-late", labeled)}
	created = time.Now()
	want = w.want()
	found := map[string]time.Duration{}
	clitest.WaitFor(t, "the pods created after the API server came back to be listed", 30*time.Second, func() bool {
		nodes := listNodes(ctx, c)
		for _, p := range late {
			if _, ok := nodes[p.ids()[0]]; ok && found[p.ids()[0]] == 0 {
				found[p.ids()[0]] = time.Since(created)
			}
		}
		last = mismatch(nodes, want)
		return last == ""
	}, &last)
	for _, p := range late {
		t.Logf("measured: %s listed %v after it was created", p.ids()[0], found[p.ids()[0]].Round(time.Millisecond))
	}
	t.Logf("serve's warnings:\n%s", stderr)
}

// unknown names the nodes listed UNKNOWN or DOWN, "" when none is (or
// nothing is listed: that is mismatch's to say).
func unknown(nodes map[string]*llmdiagv1.Node) string {
	if nodes == nil {
		return "ListNodes did not answer"
	}
	var bad []string
	for id, n := range nodes {
		if s := n.GetStatus(); s == llmdiagv1.Status_STATUS_UNKNOWN || s == llmdiagv1.Status_STATUS_DOWN || s == llmdiagv1.Status_STATUS_UNSPECIFIED {
			bad = append(bad, id+" "+s.String())
		}
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return fmt.Sprintf("%d nodes without a verdict: %v", len(bad), head(bad))
}

// notSeenSince names the nodes of ids not read since t.
func notSeenSince(nodes map[string]*llmdiagv1.Node, ids map[string]bool, t time.Time) string {
	var bad []string
	for id := range ids {
		n, ok := nodes[id]
		if !ok {
			bad = append(bad, id+" not listed")
		} else if n.GetLastSeen().AsTime().Before(t) {
			bad = append(bad, fmt.Sprintf("%s last seen %v before", id, t.Sub(n.GetLastSeen().AsTime()).Round(time.Millisecond)))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return fmt.Sprintf("%d nodes: %v", len(bad), head(bad))
}

// health is what StreamHealth said, from the start of a phase.
type health struct {
	mu     sync.Mutex
	events []*llmdiagv1.NodeHealth
}

// followHealth follows StreamHealth until ctx ends, from its initial
// state (which is not kept).
func followHealth(t *testing.T, ctx context.Context, c *client.Client) *health {
	h := &health{}
	stream, err := c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan struct{})
	go func() {
		defer stream.Close()
		once := sync.OnceFunc(func() { close(synced) })
		defer once()
		for stream.Receive() {
			m := stream.Msg()
			switch m.GetKind() {
			case llmdiagv1.EventKind_EVENT_KIND_SYNCED:
				once()
			case llmdiagv1.EventKind_EVENT_KIND_CHANGE:
				h.mu.Lock()
				h.events = append(h.events, m.GetHealth())
				h.mu.Unlock()
			}
		}
	}()
	select {
	case <-synced:
	case <-time.After(30 * time.Second):
		t.Fatal("StreamHealth sent no SYNCED within 30s")
	}
	return h
}

// removed is every node a removed event was sent for.
func (h *health) removed() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	for _, e := range h.events {
		if e.GetRemoved() {
			out[e.GetNode()] = true
		}
	}
	return out
}

// lost names the nodes of ids removed, or sent UNKNOWN or DOWN.
func (h *health) lost(ids map[string]bool) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if !ids[e.GetNode()] {
			continue
		}
		if e.GetRemoved() || e.GetStatus() == llmdiagv1.Status_STATUS_UNKNOWN || e.GetStatus() == llmdiagv1.Status_STATUS_DOWN {
			out = append(out, fmt.Sprintf("%s %s removed=%v", e.GetNode(), e.GetStatus(), e.GetRemoved()))
		}
	}
	return out
}

// series is the value of the series named exactly name on the /metrics
// page at url, "" when absent.
func series(url, name string) string {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
