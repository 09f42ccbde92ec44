package promstack_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestServeFromPrometheus is the production set-up in miniature: the seed
// fleet scraped by a real Prometheus, llmdiag reading Prometheus (nodes named
// by a `node` target label, profiles from a fleet file without urls), and
// the CLI asking it.
func TestServeFromPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serve reading a real Prometheus")
	}
	dir := t.TempDir()
	simFleet := filepath.Join(dir, "sim.yaml")
	f := clitest.Sim(t, "seed", simFleet)
	var targets []string
	labels := map[string]map[string]string{}
	for i, n := range f.Nodes {
		u, _ := url.Parse(n.URL)
		targets = append(targets, u.Host)
		labels[u.Host] = map[string]string{"node": n.ID}
		f.Nodes[i].URL = "" // profiles only: everything is read from Prometheus
	}
	prom := promtest.Start(t, promtest.Options{Targets: targets, TargetLabels: labels, ScrapeInterval: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := prom.WaitForScrapes(ctx, 3); err != nil {
		t.Fatal(err)
	}
	profiles := filepath.Join(dir, "profiles.yaml")
	data, _ := f.Marshal()
	if err := os.WriteFile(profiles, data, 0o644); err != nil {
		t.Fatal(err)
	}

	addr := testkit.FreeAddr(t)
	vars := map[string]string{"LLMDIAG_ADDR": "http://" + addr}
	clitest.Background(t, vars, "serve", "--listen", addr, "--prometheus", prom.URL(), "--node-label", "node", "--fleet", profiles, "--interval", "1s", "--window", "1m", "--log-level", "warn")

	var diag string
	resp := &llmdiagv1.DiagnoseNodeResponse{}
	clitest.WaitFor(t, "deepseek-v4-0 diagnosed decode-bound from Prometheus", 90*time.Second, func() bool {
		o, _, err := clitest.Run(t, vars, "diagnose", "deepseek-v4-0", "--format", "json")
		diag = o
		return err == nil && protojson.Unmarshal([]byte(o), resp) == nil &&
			resp.GetDiagnosis().GetRootCause() == llmdiagv1.Cause_CAUSE_DECODE_BOUND
	}, &diag)
	// The fleet file's profile reached the explanation.
	if !strings.Contains(resp.GetDiagnosis().GetSummary(), "DP 8") {
		t.Errorf("summary lacks the data-parallel profile: %s", resp.GetDiagnosis().GetSummary())
	}
	out, _, err := clitest.Run(t, vars, "nodes")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"deepseek-v4-1", "glm-4.6-0", "glm-4.6-1", "kimi-k2.6-0"} {
		if !strings.Contains(out, id) {
			t.Errorf("nodes from Prometheus lacks %s:\n%s", id, out)
		}
	}
	// An offset reads the past from Prometheus (once Prometheus has a past:
	// its first scrapes of each target are staggered over a few seconds).
	clitest.WaitFor(t, "a window 5 s in the past", 30*time.Second, func() bool {
		o, _, err := clitest.Run(t, vars, "metrics", "glm-4.6-0", "--window", "30s", "--offset", "5s")
		out = o
		return err == nil && strings.Contains(o, "window=30s")
	}, &out)
}
