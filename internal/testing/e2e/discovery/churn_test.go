package discovery_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// writeTargets writes the file_sd file of nodes (each target labelled with
// its node id, model and engine), whole: to a temporary file renamed over
// the old one.
func writeTargets(t *testing.T, path string, nodes []fleet.Node) {
	t.Helper()
	var b strings.Builder
	for _, n := range nodes {
		addr := strings.TrimSuffix(strings.TrimPrefix(n.URL, "http://"), "/metrics")
		fmt.Fprintf(&b, "- targets: [%q]\n  labels: {node: %q, model: %q, engine: %q, pool: churn}\n", addr, n.ID, n.Model, n.Engine)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestServeFollowsFileSD: serve --discovery over a file_sd file beside the
// seed fleet: ListNodes follows the file as targets are added and removed,
// and each removal comes as a removed event on StreamHealth.
func TestServeFollowsFileSD(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serve with file_sd beside a simulated fleet, rewriting the file")
	}
	_, fleetPath := simtest.Seed(t)
	f, err := fleet.Load(fleetPath)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(f.Nodes, func(a, b fleet.Node) int { return strings.Compare(a.ID, b.ID) })
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.yaml")
	writeTargets(t, targets, f.Nodes[:2])
	sd := filepath.Join(dir, "discovery.yaml")
	if err := os.WriteFile(sd, []byte("scrape_configs:\n  - job_name: churn\n    file_sd_configs:\n      - files: [targets.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", addr, "--discovery", sd, "--discovery-debounce", "200ms", "--interval", "1s", "--scrape-timeout", "800ms", "--log-level", "warn")

	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listed := func() []string {
		resp, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
		if err != nil {
			return nil
		}
		var ids []string
		for _, n := range resp.Msg.GetNodes() {
			ids = append(ids, n.GetId())
		}
		return ids
	}
	ids := func(nodes []fleet.Node) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, n.ID)
		}
		return out
	}
	var last string
	follows := func(want []fleet.Node) func() bool {
		return func() bool {
			got := listed()
			last = fmt.Sprint(got)
			return slices.Equal(got, ids(want))
		}
	}
	clitest.WaitFor(t, "ListNodes to list the file's first two nodes", 30*time.Second, follows(f.Nodes[:2]), &last)

	// Follow the health stream from here on.
	var (
		mu      sync.Mutex
		removed []string
	)
	stream, err := c.StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for stream.Receive() {
			if h := stream.Msg().GetHealth(); h.GetRemoved() {
				mu.Lock()
				removed = append(removed, h.GetNode())
				mu.Unlock()
			}
		}
	}()

	// Add the other nodes, then remove the first two.
	writeTargets(t, targets, f.Nodes)
	clitest.WaitFor(t, "ListNodes to list every node", 30*time.Second, follows(f.Nodes), &last)
	writeTargets(t, targets, f.Nodes[2:])
	clitest.WaitFor(t, "ListNodes to drop the first two", 30*time.Second, follows(f.Nodes[2:]), &last)
	clitest.WaitFor(t, "their removed events", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		last = fmt.Sprint(removed)
		return slices.Equal(removed, ids(f.Nodes[:2]))
	}, &last)

	// A file that does not parse keeps the last targets.
	if err := os.WriteFile(targets, []byte("- targets: [unterminated\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metrics := "http://" + addr + "/metrics"
	clitest.WaitFor(t, "the failure counted", 30*time.Second, func() bool {
		last = scrapeLine(metrics, `llmdiag_discovery_failing{job="churn"}`)
		return last == "1"
	}, &last)
	if got := listed(); !slices.Equal(got, ids(f.Nodes[2:])) {
		t.Errorf("after a bad file ListNodes = %v, want the last targets %v", got, ids(f.Nodes[2:]))
	}
}

// scrapeLine is the value of the series named exactly series on the
// /metrics page at url, "" when absent.
func scrapeLine(url, series string) string {
	body, err := get(url)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
