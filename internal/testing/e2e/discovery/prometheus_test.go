package discovery_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestDiscoveryDecidesPrometheusNodes: serve --prometheus --discovery reads
// the seed fleet from a real Prometheus that scrapes all of it, and keeps
// as nodes only those the discovery file lists, with the file's labels;
// a node the file adds is listed, one it drops is removed.
func TestDiscoveryDecidesPrometheusNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serve reading a real Prometheus, its nodes from a file_sd file")
	}
	_, fleetPath := simtest.Seed(t)
	f, err := fleet.Load(fleetPath)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(f.Nodes, func(a, b fleet.Node) int { return strings.Compare(a.ID, b.ID) })
	var targets []string
	labels := map[string]map[string]string{}
	for _, n := range f.Nodes {
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u.Host)
		labels[u.Host] = map[string]string{"node": n.ID}
	}
	prom := promtest.Start(t, promtest.Options{Targets: targets, TargetLabels: labels, ScrapeInterval: time.Second})
	// Prometheus has every node before serve starts: the nodes serve
	// lists are the file's, not those Prometheus happens to have yet.
	var last string
	clitest.WaitFor(t, "Prometheus to scrape every node", time.Minute, func() bool {
		v, err := prom.QueryVector(t.Context(), `count(up == 1)`, time.Now())
		last = fmt.Sprint(v, err)
		return err == nil && len(v) == 1 && int(v[0].Value) == len(f.Nodes)
	}, &last)

	dir := t.TempDir()
	file := filepath.Join(dir, "targets.yaml")
	sd := filepath.Join(dir, "discovery.yaml")
	if err := os.WriteFile(sd, []byte("scrape_configs:\n  - job_name: churn\n    file_sd_configs:\n      - files: [targets.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeTargets(t, file, f.Nodes[:2])
	addr := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", addr, "--prometheus", prom.URL(), "--node-label", "node",
		"--discovery", sd, "--discovery-debounce", "200ms", "--interval", "1s", "--log-level", "warn")
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	follows := func(want []fleet.Node) func() bool {
		return func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			resp, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
			if err != nil {
				last = err.Error()
				return false
			}
			var got, ids []string
			for _, n := range resp.Msg.GetNodes() {
				got = append(got, n.GetId())
				if n.GetLabels()["pool"] != "churn" || n.GetStatus() == llmdiagv1.Status_STATUS_UNSPECIFIED {
					last = fmt.Sprintf("%s: labels %v, status %v", n.GetId(), n.GetLabels(), n.GetStatus())
					return false
				}
			}
			for _, n := range want {
				ids = append(ids, n.ID)
			}
			last = fmt.Sprint(got)
			return slices.Equal(got, ids)
		}
	}
	clitest.WaitFor(t, "the file's two nodes, of the fleet Prometheus scrapes", 60*time.Second, follows(f.Nodes[:2]), &last)
	// And still only those after refreshes that read Prometheus's five.
	seen := time.Now()
	clitest.WaitFor(t, "three more refreshes", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		m, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: f.Nodes[0].ID}))
		if err != nil {
			last = err.Error()
			return false
		}
		at := m.Msg.GetMetrics().GetObservedAt().AsTime()
		last = fmt.Sprint("observed at ", at)
		return at.After(seen.Add(3 * time.Second))
	}, &last)
	if !follows(f.Nodes[:2])() {
		t.Fatalf("after more refreshes ListNodes = %s, want the file's two", last)
	}
	writeTargets(t, file, f.Nodes[1:3])
	clitest.WaitFor(t, "the file's next two nodes", 30*time.Second, follows(f.Nodes[1:3]), &last)
}
