package clients_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestMain lets the test binary run as llmdiag (clitest.Main): a real
// `llmdiag mcp` process without a build.
func TestMain(m *testing.M) { clitest.Main(m) }

// mcpSession connects the SDK's client over t, closed at cleanup.
func mcpSession(ctx context.Context, t *testing.T, tr mcp.Transport) (*mcp.ClientSession, error) {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "llmdiag-test", Version: "v0"}, nil).Connect(ctx, tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

var mcpTools = []string{"compare_percentiles", "diagnose_node", "explain_cause", "get_node_metrics", "list_nodes", "unhealthy_nodes"}

// checkTools lists the tools of cs.
func checkTools(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Errorf("tools %v, want %v", names, mcpTools)
	}
}

// waitDecodeBound calls diagnose_node on the seed's DeepSeek node until it
// answers decode-bound, and checks the answer.
func waitDecodeBound(t *testing.T, cs *mcp.ClientSession, d time.Duration) {
	t.Helper()
	var last string
	var res *mcp.CallToolResult
	clitest.WaitFor(t, "diagnose_node deepseek-v4-0 to answer DECODE_BOUND", d, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "diagnose_node", Arguments: map[string]any{"node": "deepseek-v4-0"}})
		if err != nil {
			last = err.Error()
			return false
		}
		res = r
		b, _ := json.Marshal(r.StructuredContent)
		last = string(b)
		var out struct {
			RootCause string `json:"root_cause"`
		}
		return !r.IsError && json.Unmarshal(b, &out) == nil && out.RootCause == "DECODE_BOUND"
	}, &last)
	text := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"## deepseek-v4-0", "Decode-bound", "tok/s"} {
		if !strings.Contains(text, want) {
			t.Errorf("diagnose_node text lacks %q:\n%s", want, text)
		}
	}
}

// TestMCPEndToEnd is the MCP server on the seed scenario as `make run`
// serves it, with authentication on: over streamable HTTP at /mcp of
// serve's port, and over stdio from a `llmdiag mcp` process asking serve
// over Connect. Both list the tools and get the DeepSeek node's
// decode-bound diagnosis; /mcp refuses a caller without credentials.
func TestMCPEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: MCP on the simulated seed fleet, waits for a decode-bound verdict")
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: agent, role: reader, token: "+clitest.ReaderToken+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fleetPath := filepath.Join(dir, "fleet.yaml")
	clitest.Sim(t, "seed", fleetPath)
	addr := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--fleet", fleetPath, "--listen", addr, "--interval", "500ms", "--auth-tokens", tokens, "--log-level", "warn")
	base := "http://" + addr
	clitest.WaitFor(t, "serve", 30*time.Second, func() bool { return clitest.AuthPost(t, base+"/grpc.health.v1.Health/Check", "") == http.StatusOK })
	endpoint := base + "/mcp"

	t.Run("http", func(t *testing.T) {
		// Refused without credentials, or with a token the file does not list.
		for _, token := range []string{"", "x-0123456789abcdefghij"} {
			if got := clitest.AuthPost(t, endpoint, token); got != http.StatusUnauthorized {
				t.Errorf("POST /mcp with token %q: HTTP %d, want 401", token, got)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := mcpSession(ctx, t, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
			t.Errorf("connect without a token: %v, want Unauthorized", err)
		}
		cs, err := mcpSession(ctx, t, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: testkit.Bearer{Token: clitest.ReaderToken, Next: http.DefaultTransport}, Timeout: 10 * time.Second}})
		if err != nil {
			t.Fatalf("connect with a reader token: %v", err)
		}
		checkTools(ctx, t, cs)
		waitDecodeBound(t, cs, 60*time.Second)
		res, err := cs.ListResources(ctx, nil)
		if err != nil || !slices.ContainsFunc(res.Resources, func(r *mcp.Resource) bool { return r.URI == "llmdiag://thresholds" }) {
			t.Errorf("resources: %v, %v", res, err)
		}
		// The runbooks built in (runbook/), as resources and explain_cause.
		rb, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "llmdiag://runbooks/zh/decode-bound"})
		if err != nil || len(rb.Contents) != 1 || !strings.Contains(rb.Contents[0].Text, "CAUSE_DECODE_BOUND") || rb.Contents[0].MIMEType != "text/markdown" {
			t.Errorf("runbook resource: %v, %v", rb, err)
		}
		ex, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "explain_cause", Arguments: map[string]any{"cause": "decode bound"}})
		if err != nil || ex.IsError || !strings.HasPrefix(ex.Content[0].(*mcp.TextContent).Text, "# Decode-bound") {
			t.Errorf("explain_cause: %v, %+v", err, ex)
		}
	})

	t.Run("stdio", func(t *testing.T) {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		var stderr testkit.SyncBuffer
		cmd := exec.Command(exe, "mcp", "--addr", base, "--log-level", "debug")
		cmd.Env = append(os.Environ(), clitest.AsLLMDiag+"=1", "LLMDIAG_TOKEN="+clitest.ReaderToken)
		cmd.Stderr = &stderr
		cmd.WaitDelay = 5 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := mcpSession(ctx, t, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second})
		if err != nil {
			t.Fatalf("start llmdiag mcp: %v\n%s", err, stderr.String())
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("llmdiag mcp (pid %d) stderr:\n%s", cmd.Process.Pid, stderr.String())
			}
		})
		checkTools(ctx, t, cs)
		waitDecodeBound(t, cs, 60*time.Second)
		// An unknown node is a tool error that names it.
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "diagnose_node", Arguments: map[string]any{"node": "no-such-node"}})
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `unknown node "no-such-node"`) {
			t.Errorf("diagnose_node no-such-node: %v, %+v", err, res)
		}
		// Closing the session closes its stdin: the process ends by itself.
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
			t.Errorf("llmdiag mcp did not exit cleanly: %v", cmd.ProcessState)
		}
		if !strings.Contains(stderr.String(), "llmdiag mcp serving on stdio") {
			t.Errorf("stderr lacks the start line:\n%s", stderr.String())
		}
	})
}
