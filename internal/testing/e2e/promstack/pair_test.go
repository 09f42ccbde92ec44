package promstack_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sim"
)

// The tests that hold a direct scrape and a real Prometheus to the same
// answers share their set-up: healthy simulated vLLM nodes, and two
// serves, one scraping them (and their DCGM exporters) directly, one
// reading Prometheus.

// vllmNodes serves one healthy simulated vLLM node per id: the schemas
// scenario's light vLLM node at 4 requests/s, whose first minute reads
// HEALTHY sooner than at its own 1 request/s.
func vllmNodes(t *testing.T, ids ...string) *sim.Fleet {
	t.Helper()
	cfg := simtest.Scenario(t, "schemas", 1)
	base := cfg.Nodes[0]
	if base.Engine != sim.VLLM {
		t.Fatalf("the schemas scenario's first node is %s, want vLLM", base.Engine)
	}
	cfg.Nodes = nil
	for _, id := range ids {
		n := base
		n.ID = id
		n.Workload.Rate = 4
		cfg.Nodes = append(cfg.Nodes, n)
	}
	cfg.Warmup, cfg.Speed = 5*time.Minute, 1
	f, _ := simtest.Start(t, cfg)
	return f
}

// servePair starts two serves refreshing every second over a 1-minute
// window with args added: "direct" with the fleet file direct (urls and
// dcgm), "prometheus" reading promURL (nodes named by a node target
// label, GPUs joined by join) with fromProm (no urls). It returns a
// client of each by those names.
func servePair(t *testing.T, direct, fromProm *fleet.File, promURL, join string, args ...string) map[string]*client.Client {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, f *fleet.File) string {
		data, err := f.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	common := append([]string{"--interval", "1s", "--window", "1m", "--log-level", "warn"}, args...)
	directAddr, promAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	clitest.Background(t, nil, append([]string{"serve", "--listen", directAddr, "--fleet", write("direct.yaml", direct)}, common...)...)
	clitest.Background(t, nil, append([]string{"serve", "--listen", promAddr, "--prometheus", promURL, "--node-label", "node",
		"--fleet", write("profiles.yaml", fromProm), "--prometheus-dcgm-join", join}, common...)...)
	clients := map[string]*client.Client{}
	for path, addr := range map[string]string{"direct": directAddr, "prometheus": promAddr} {
		c, err := client.New("http://" + addr)
		if err != nil {
			t.Fatal(err)
		}
		clients[path] = c
	}
	return clients
}

// dcgmAnswer is what a serve answers of one node.
type dcgmAnswer struct {
	m *llmdiagv1.NodeMetrics
	d *llmdiagv1.Diagnosis
}

// ask reads node's metrics and diagnosis from c.
func ask(ctx context.Context, c *client.Client, node string) (dcgmAnswer, error) {
	m, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: node}))
	if err != nil {
		return dcgmAnswer{}, err
	}
	d, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node}))
	if err != nil {
		return dcgmAnswer{}, err
	}
	return dcgmAnswer{m.Msg.GetMetrics(), d.Msg.GetDiagnosis()}, nil
}
