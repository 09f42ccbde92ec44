package clients_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// BenchmarkMCPDiagnose measures what an agent pays for diagnose_node over
// streamable HTTP at /mcp against what a Connect client pays for the
// DiagnoseNode RPC it wraps, on one serve in one run: the seed scenario as
// `make run` serves it, with --auth-tokens on (a reader token for both) and
// --rate-limit out of the way.
// Calls alternate in rounds of 50, one at a time, so load drift hits both
// alike. It reports mcp-p50-µs, rpc-p50-µs and x-rpc (their ratio).
//
//	go test ./internal/testing/e2e/clients -run '^$' -bench MCPDiagnose -benchtime 1000x -count 5
func BenchmarkMCPDiagnose(b *testing.B) {
	dir := b.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: agent, role: reader, token: "+clitest.ReaderToken+"}\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	fleetPath := filepath.Join(dir, "fleet.yaml")
	clitest.Sim(b, "seed", fleetPath)
	addr := testkit.FreeAddr(b)
	// The RPCs are not to meet --rate-limit: the benchmark calls flat out.
	clitest.Background(b, nil, "serve", "--fleet", fleetPath, "--listen", addr, "--auth-tokens", tokens, "--rate-limit", "1e6", "--rate-burst", "1000000", "--log-level", "warn")
	base := "http://" + addr
	clitest.WaitFor(b, "serve", 30*time.Second, func() bool { return clitest.AuthPost(b, base+"/grpc.health.v1.Health/Check", "") == http.StatusOK })

	ctx := context.Background()
	hc := &http.Client{Transport: testkit.Bearer{Token: clitest.ReaderToken, Next: http.DefaultTransport}, Timeout: 10 * time.Second}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	cl, err := client.New(base, client.WithBearerToken(clitest.ReaderToken))
	if err != nil {
		b.Fatal(err)
	}
	node := "deepseek-v4-0"
	viaMCP := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "diagnose_node", Arguments: map[string]any{"node": node}})
		if err == nil && res.IsError {
			b.Fatalf("diagnose_node: %v", res.Content)
		}
		return err
	}
	viaRPC := func() error {
		_, err := cl.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node, Format: llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN}))
		return err
	}
	clitest.WaitFor(b, "a verdict on "+node, 30*time.Second, func() bool { return viaRPC() == nil })
	for range 20 { // warm both paths
		if err := viaMCP(); err != nil {
			b.Fatal(err)
		}
		if err := viaRPC(); err != nil {
			b.Fatal(err)
		}
	}
	var mcpLat, rpcLat []time.Duration
	timed := func(f func() error, into *[]time.Duration) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	const round = 50
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		b.StartTimer()
		for range n {
			timed(viaMCP, &mcpLat)
		}
		b.StopTimer()
		for range n {
			timed(viaRPC, &rpcLat)
		}
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[(len(d)-1)/2].Nanoseconds()) / 1e3
	}
	m, r := p50(mcpLat), p50(rpcLat)
	b.ReportMetric(m, "mcp-p50-µs")
	b.ReportMetric(r, "rpc-p50-µs")
	b.ReportMetric(m/r, "x-rpc")
}
