package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmdiag/llmdiag/mcpserver"
)

// fuzzTools are the tools FuzzToolArguments calls; the fuzzer's first
// input picks one (modulo their number).
var fuzzTools = []string{"list_nodes", "unhealthy_nodes", "diagnose_node", "get_node_metrics", "compare_percentiles", "explain_cause"}

// FuzzToolArguments calls each tool with arbitrary JSON arguments over an
// in-memory MCP session against the fake service. Arguments the input
// schema refuses are a JSON-RPC invalid-params error; every other call
// returns a result: a tool error with text saying what was wrong, or text
// and structured content. Never a panic, and the session keeps working.
func FuzzToolArguments(f *testing.F) {
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(&fakeService{nodes: fleetNodes()}, mcpserver.Options{Runbooks: fakeRunbooks{}}).Connect(ctx, st, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { cs.Close() })
	seeds := map[int][]string{
		0: {`{}`, `{"model":"glm","status":"warn","label":{"team":"x"}}`, `{"status":"nope"}`, `{"limit":-1}`, `{"limit":1e9}`},
		1: {`{}`, `{"limit":2}`, `{"limit":"2"}`},
		2: {`{"node":"e-crit"}`, `{"node":"e-crit","language":"zh","format":"text"}`, `{"node":"ghost"}`, `{"node":""}`, `{"node":"e-crit","window":"five"}`, `{"node":"e-crit","language":"fr"}`, `{}`},
		3: {`{"node":"a-ok"}`, `{"node":"a-ok","window":"lifetime"}`, `{"node":"a-ok","window":"-1m"}`, `{"node":1}`},
		4: {`{"metric":"ttft"}`, `{"metric":"e2e","by":"model","quantiles":[0.5,0.99]}`, `{"metric":"ttft","quantiles":[1.5]}`, `{"metric":"nope"}`, `{"metric":"ttft","by":"label","label":"team"}`},
		5: {`{"cause":"KV_EXHAUSTED"}`, `{"cause":"kv-exhausted","language":"zh"}`, `{"cause":"HEALTHY"}`, `{"cause":""}`, `{"cause":"nope"}`},
	}
	for i, args := range seeds {
		for _, a := range args {
			f.Add(uint8(i), []byte(a))
		}
	}
	f.Add(uint8(0), []byte(`null`))
	f.Add(uint8(2), []byte(`[1,2]`))
	f.Add(uint8(4), []byte(`{"metric":"ttft","quantiles":"x"}`))
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		if !json.Valid(args) {
			return // the client cannot send it
		}
		tool := fuzzTools[int(which)%len(fuzzTools)]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Message == "" {
				t.Fatalf("%s(%s): %v, want a JSON-RPC error or a result", tool, args, err)
			}
			return
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if text.Len() == 0 {
			t.Fatalf("%s(%s): a result without text (error %v)", tool, args, res.IsError)
		}
		if !res.IsError && res.StructuredContent == nil {
			t.Fatalf("%s(%s): a result without structured content: %s", tool, args, text.String())
		}
	})
}
