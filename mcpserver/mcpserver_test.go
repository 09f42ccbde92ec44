package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/mcpserver"
	"github.com/llmdiag/llmdiag/readmask"
)

// fakeService answers from a fixed fleet; DiagnoseNode blocks on block
// when it is set.
type fakeService struct {
	nodes []*llmdiagv1.Node
	block chan struct{}
	// entered, when set, is sent to as a blocked DiagnoseNode starts.
	entered chan struct{}
	// lastCompare is the last ComparePercentiles request.
	lastCompare *llmdiagv1.ComparePercentilesRequest
}

func (f *fakeService) find(id string) (*llmdiagv1.Node, error) {
	for _, n := range f.nodes {
		if n.GetId() == id {
			return n, nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("node %q: not found", id))
}

func (f *fakeService) ListNodes(_ context.Context, r *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	// One node a page, to exercise paging.
	start := 0
	if r.Msg.GetPageToken() != "" {
		fmt.Sscan(r.Msg.GetPageToken(), &start)
	}
	resp := &llmdiagv1.ListNodesResponse{}
	for i := start; i < len(f.nodes); i++ {
		n := f.nodes[i]
		if r.Msg.GetModel() != "" && n.GetModel() != r.Msg.GetModel() || r.Msg.GetStatus() != 0 && n.GetStatus() != r.Msg.GetStatus() {
			continue
		}
		n, err := masked(n, r.Msg.GetReadMask())
		if err != nil {
			return nil, err
		}
		resp.Nodes = append(resp.Nodes, n)
		if i+1 < len(f.nodes) {
			resp.NextPageToken = fmt.Sprint(i + 1)
		}
		break
	}
	return connect.NewResponse(resp), nil
}

func (f *fakeService) GetNodeMetrics(_ context.Context, r *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error) {
	n, err := f.find(r.Msg.GetNode())
	if err != nil {
		return nil, err
	}
	q, kv := 3.0, 0.42
	m, err := masked(&llmdiagv1.NodeMetrics{Node: n.GetId(), Model: n.GetModel(), Window: "5m", Up: true,
		Queue: &q, KvPressure: &kv, Staleness: durationpb.New(2 * time.Second),
		Ttft: &llmdiagv1.Distribution{Count: 10, Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.5, Value: 0.2, LowerBound: 0.1, UpperBound: 0.25}, {Quantile: 0.99, Value: 8, LowerBound: 8, UpperBound: math.Inf(1)}}},
		E2E:  &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.5, Value: math.NaN(), LowerBound: math.NaN(), UpperBound: math.NaN()}}}}, r.Msg.GetReadMask())
	return connect.NewResponse(&llmdiagv1.GetNodeMetricsResponse{Metrics: m}), err
}

// masked is a copy of m trimmed to the read mask, as the service trims
// its answers: the tools' answers in these tests are what they show from
// what they ask for. A path the service would refuse is an error.
func masked[M proto.Message](m M, fm *fieldmaskpb.FieldMask) (M, error) {
	mask, err := readmask.Parse(m, fm.GetPaths())
	if err != nil {
		return m, connect.NewError(connect.CodeInvalidArgument, err)
	}
	m = proto.CloneOf(m)
	mask.Prune(m)
	return m, nil
}

func (f *fakeService) ComparePercentiles(_ context.Context, r *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error) {
	f.lastCompare = r.Msg
	return connect.NewResponse(&llmdiagv1.ComparePercentilesResponse{Metric: r.Msg.GetMetric(), Window: "5m", Quantiles: []float64{0.5},
		Rows: []*llmdiagv1.CompareRow{
			{Subject: "glm-4.6", Nodes: []string{"glm-0"}, Count: 9, Values: []*llmdiagv1.CompareValue{{Percentile: &llmdiagv1.Percentile{Quantile: 0.5, Value: 0.3, LowerBound: 0.25, UpperBound: 0.5}, Rank: 1, RatioToMedian: 1}}},
			{Subject: "empty", Note: "no observations", Values: []*llmdiagv1.CompareValue{{Percentile: &llmdiagv1.Percentile{Quantile: 0.5, Value: math.NaN()}}}},
		}}), nil
}

func (f *fakeService) DiagnoseNode(ctx context.Context, r *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error) {
	if f.block != nil {
		if f.entered != nil {
			f.entered <- struct{}{}
		}
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
		}
	}
	n, err := f.find(r.Msg.GetNode())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&llmdiagv1.DiagnoseNodeResponse{
		Diagnosis: &llmdiagv1.Diagnosis{Node: n.GetId(), Model: n.GetModel(), Window: "5m", Status: n.GetStatus(), RootCause: n.GetRootCause(),
			Summary: "slow decode", Evidence: []string{"121 tok/s ÷ 40 running ≈ 3 tok/s per request"}, Language: r.Msg.GetLanguage(),
			Findings:  []*llmdiagv1.Finding{{Indicator: llmdiagv1.Indicator_INDICATOR_DECODE_SPEED, Name: "Per-request decode speed", Value: "3 tok/s", Status: llmdiagv1.Status_STATUS_WARN}},
			LoadScore: n.GetLoadScore(), Staleness: durationpb.New(2 * time.Second)},
		Report: "## " + n.GetId() + " — " + r.Msg.GetFormat().String() + " " + r.Msg.GetLanguage().String() + "\n",
	}), nil
}

// fakeRunbooks has runbooks for two causes.
type fakeRunbooks struct{}

func (fakeRunbooks) Causes() []llmdiagv1.Cause {
	return []llmdiagv1.Cause{llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, llmdiagv1.Cause_CAUSE_DECODE_BOUND}
}

func (fakeRunbooks) Slug(c llmdiagv1.Cause) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(c.String(), "CAUSE_")), "_", "-")
}

func (r fakeRunbooks) Title(c llmdiagv1.Cause, l llmdiagv1.Language) string {
	return "Title " + r.Slug(c) + " " + l.String()
}

func (r fakeRunbooks) Markdown(c llmdiagv1.Cause, l llmdiagv1.Language) (string, bool) {
	if !slices.Contains(r.Causes(), c) {
		return "", false
	}
	return "# " + r.Title(c, l) + "\n\nbody\n", true
}

func node(id, model string, st llmdiagv1.Status, cause llmdiagv1.Cause, load float64, labels map[string]string) *llmdiagv1.Node {
	return &llmdiagv1.Node{Id: id, Model: model, Engine: llmdiagv1.Engine_ENGINE_VLLM, Status: st, RootCause: cause, LoadScore: load, Labels: labels}
}

func fleetNodes() []*llmdiagv1.Node {
	return []*llmdiagv1.Node{
		node("a-ok", "glm", llmdiagv1.Status_STATUS_OK, llmdiagv1.Cause_CAUSE_HEALTHY, 0.1, map[string]string{"team": "x"}),
		node("b-unknown", "glm", llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, 0, nil),
		node("c-warn-low", "deepseek", llmdiagv1.Status_STATUS_WARN, llmdiagv1.Cause_CAUSE_DECODE_BOUND, 0.2, map[string]string{"team": "x"}),
		node("d-down", "glm", llmdiagv1.Status_STATUS_DOWN, llmdiagv1.Cause_CAUSE_TARGET_DOWN, 0, nil),
		node("e-crit", "glm", llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, 1.3, nil),
		node("f-warn-high", "deepseek", llmdiagv1.Status_STATUS_WARN, llmdiagv1.Cause_CAUSE_OVERLOADED, 0.9, map[string]string{"team": "y"}),
	}
}

// connectClient serves s in memory and returns a client session.
func connectClient(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v", name, args, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return res, b.String()
}

func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return out
}

func TestToolsListed(t *testing.T) {
	cs := connectClient(t, mcpserver.New(&fakeService{}, mcpserver.Options{}))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s: description, input or output schema missing", tool.Name)
		}
	}
	slices.Sort(names)
	want := []string{"compare_percentiles", "diagnose_node", "explain_cause", "get_node_metrics", "list_nodes", "unhealthy_nodes"}
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	for _, tool := range res.Tools {
		if tool.Name != "diagnose_node" {
			continue
		}
		b, _ := json.Marshal(tool.InputSchema)
		for _, s := range []string{`"required":["node"]`, `"enum":["en","zh"]`, `"enum":["markdown","text"]`, "node id"} {
			if !strings.Contains(string(b), s) {
				t.Errorf("diagnose_node input schema lacks %s: %s", s, b)
			}
		}
	}
}

func TestTools(t *testing.T) {
	svc := &fakeService{nodes: fleetNodes()}
	cs := connectClient(t, mcpserver.New(svc, mcpserver.Options{Runbooks: fakeRunbooks{}}))
	for _, c := range []struct {
		name    string
		tool    string
		args    map[string]any
		isError bool
		want    []string // in the text, in order
		check   func(t *testing.T, res *mcp.CallToolResult)
	}{
		{name: "list all", tool: "list_nodes", want: []string{"| a-ok |", "| b-unknown |", "| f-warn-high |", "6 nodes."},
			check: func(t *testing.T, res *mcp.CallToolResult) {
				out := structured[mcpserver.NodesOut](t, res)
				if out.Total != 6 || len(out.Nodes) != 6 || out.Nodes[4].Status != "CRIT" || out.Nodes[4].RootCause != "KV_EXHAUSTED" || out.Nodes[4].Engine != "vllm" {
					t.Errorf("structured %+v", out)
				}
			}},
		{name: "list by model and label", tool: "list_nodes", args: map[string]any{"model": "deepseek", "labels": map[string]string{"team": "x"}}, want: []string{"| c-warn-low |", "1 nodes."}},
		{name: "list limited", tool: "list_nodes", args: map[string]any{"limit": 2}, want: []string{"| b-unknown |", "2 of 6 nodes shown"}},
		{name: "list by status", tool: "list_nodes", args: map[string]any{"status": "warn"}, want: []string{"| c-warn-low |", "| f-warn-high |", "2 nodes."}},
		{name: "list bad status", tool: "list_nodes", args: map[string]any{"status": "bad"}, isError: true, want: []string{"status"}},
		{name: "list bad engine", tool: "list_nodes", args: map[string]any{"engine": "ollama"}, isError: true, want: []string{"engine"}},
		{name: "unhealthy worst first", tool: "unhealthy_nodes", want: []string{"| e-crit |", "| d-down |", "| f-warn-high |", "| c-warn-low |", "| b-unknown |", "5 nodes."}},
		{name: "unhealthy of a label", tool: "unhealthy_nodes", args: map[string]any{"labels": map[string]string{"team": "y"}}, want: []string{"| f-warn-high |", "1 nodes."}},
		{name: "diagnose", tool: "diagnose_node", args: map[string]any{"node": "c-warn-low", "language": "zh", "format": "text"},
			want: []string{"## c-warn-low — REPORT_FORMAT_TEXT LANGUAGE_ZH", "Runbook: llmdiag://runbooks/zh/decode-bound"},
			check: func(t *testing.T, res *mcp.CallToolResult) {
				out := structured[mcpserver.DiagnosisOut](t, res)
				if out.RootCause != "DECODE_BOUND" || out.Status != "WARN" || out.Language != "zh" || len(out.Findings) != 1 || out.Findings[0].Indicator != "DECODE_SPEED" || out.StalenessSeconds != 2 {
					t.Errorf("structured %+v", out)
				}
			}},
		{name: "diagnose defaults", tool: "diagnose_node", args: map[string]any{"node": "e-crit"}, want: []string{"REPORT_FORMAT_MARKDOWN LANGUAGE_EN", "llmdiag://runbooks/kv-exhausted"}},
		{name: "diagnose unknown node", tool: "diagnose_node", args: map[string]any{"node": "nope"}, isError: true, want: []string{`unknown node "nope"`}},
		{name: "diagnose no node", tool: "diagnose_node", args: map[string]any{"node": " "}, isError: true, want: []string{"argument node"}},
		{name: "diagnose missing node", tool: "diagnose_node", args: map[string]any{}, isError: true, want: []string{"node"}},
		{name: "diagnose bad language", tool: "diagnose_node", args: map[string]any{"node": "e-crit", "language": "fr"}, isError: true, want: []string{"language"}},
		{name: "diagnose bad format", tool: "diagnose_node", args: map[string]any{"node": "e-crit", "format": "html"}, isError: true, want: []string{"format"}},
		{name: "diagnose bad window", tool: "diagnose_node", args: map[string]any{"node": "e-crit", "window": "forever"}, isError: true, want: []string{"argument window"}},
		{name: "metrics", tool: "get_node_metrics", args: map[string]any{"node": "a-ok"}, want: []string{"### a-ok", "| ttft | 10 | - | P50 200.0 ms (100.0 ms–250.0 ms), P99 8.00 s (8.00 s–+Inf) |", "| e2e | 0 | - | P50 - |", "| queue | 3 |", "| running | unknown |", "| KV pressure | 42.0% |"},
			check: func(t *testing.T, res *mcp.CallToolResult) {
				out := structured[mcpserver.MetricsOut](t, res)
				p99 := out.Latencies["ttft"].Percentiles[1]
				if p99.UpperBound != nil || *p99.Value != 8 || out.Gauges["kv_pressure"] != 0.42 {
					t.Errorf("structured %+v", out)
				}
				if _, ok := out.Gauges["running"]; ok {
					t.Error("unknown gauge present")
				}
			}},
		{name: "metrics unknown node", tool: "get_node_metrics", args: map[string]any{"node": "zzz"}, isError: true, want: []string{`unknown node "zzz"`}},
		{name: "compare", tool: "compare_percentiles", args: map[string]any{"metric": "itl", "group_by": "model", "quantiles": []float64{0.5}}, want: []string{"### inter_token over 5m", "| glm-4.6 | 9 | 300.0 ms (250.0 ms–500.0 ms) #1 1.00× |", "| empty | 0 | - |", "note: empty: no observations"},
			check: func(t *testing.T, res *mcp.CallToolResult) {
				if g := svc.lastCompare.GetGroupBy(); g != llmdiagv1.GroupBy_GROUP_BY_MODEL {
					t.Errorf("group by %v", g)
				}
				out := structured[mcpserver.CompareOut](t, res)
				if len(out.Rows) != 2 || out.Rows[1].Values[0].Value != nil {
					t.Errorf("structured %+v", out)
				}
			}},
		{name: "compare by label", tool: "compare_percentiles", args: map[string]any{"metric": "ttft", "group_by": "label", "label": "team", "baseline": "1h"},
			check: func(t *testing.T, _ *mcp.CallToolResult) {
				r := svc.lastCompare
				if r.GetLabel() != "team" || r.GetBaselineOffset().AsDuration() != time.Hour {
					t.Errorf("request %v", r)
				}
			}},
		{name: "compare bad metric", tool: "compare_percentiles", args: map[string]any{"metric": "latency"}, isError: true, want: []string{"metric"}},
		{name: "compare label without key", tool: "compare_percentiles", args: map[string]any{"metric": "ttft", "group_by": "label"}, isError: true, want: []string{"argument label"}},
		{name: "compare bad quantile", tool: "compare_percentiles", args: map[string]any{"metric": "ttft", "quantiles": []float64{1.5}}, isError: true, want: []string{"argument quantiles"}},
		{name: "compare bad baseline", tool: "compare_percentiles", args: map[string]any{"metric": "ttft", "baseline": "-1h"}, isError: true, want: []string{"argument baseline"}},
		{name: "explain enum name", tool: "explain_cause", args: map[string]any{"cause": "CAUSE_DECODE_BOUND"}, want: []string{"# Title decode-bound LANGUAGE_EN"},
			check: func(t *testing.T, res *mcp.CallToolResult) {
				out := structured[mcpserver.ExplainOut](t, res)
				if out.Cause != "DECODE_BOUND" || out.URI != "llmdiag://runbooks/decode-bound" {
					t.Errorf("structured %+v", out)
				}
			}},
		{name: "explain spelled out, zh", tool: "explain_cause", args: map[string]any{"cause": "Decode bound", "language": "zh"}, want: []string{"# Title decode-bound LANGUAGE_ZH"}},
		{name: "explain slug", tool: "explain_cause", args: map[string]any{"cause": "kv-exhausted"}, want: []string{"# Title kv-exhausted"}},
		{name: "explain unknown", tool: "explain_cause", args: map[string]any{"cause": "gremlins"}, isError: true, want: []string{"argument cause", "decode-bound, kv-exhausted"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, text := call(t, cs, c.tool, c.args)
			if res.IsError != c.isError {
				t.Fatalf("IsError %v, want %v: %s", res.IsError, c.isError, text)
			}
			at := 0
			for _, w := range c.want {
				i := strings.Index(text[at:], w)
				if i < 0 {
					t.Fatalf("text lacks %q (in order):\n%s", w, text)
				}
				at += i + len(w)
			}
			if c.check != nil {
				c.check(t, res)
			}
		})
	}
}

func TestExplainWithoutRunbooks(t *testing.T) {
	cs := connectClient(t, mcpserver.New(&fakeService{}, mcpserver.Options{}))
	res, text := call(t, cs, "explain_cause", map[string]any{"cause": "decode-bound"})
	if !res.IsError || !strings.Contains(text, "no runbooks") {
		t.Errorf("IsError %v: %s", res.IsError, text)
	}
	rs, err := cs.ListResources(context.Background(), nil)
	if err == nil && len(rs.Resources) > 0 {
		t.Errorf("resources without runbooks or thresholds: %v", rs.Resources)
	}
}

func TestResources(t *testing.T) {
	th := diagnose.DefaultThresholds()
	cs := connectClient(t, mcpserver.New(&fakeService{}, mcpserver.Options{Runbooks: fakeRunbooks{}, Thresholds: &th}))
	ctx := context.Background()
	rs, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rs.Resources {
		got[r.URI] = r.MIMEType
	}
	want := map[string]string{
		"llmdiag://runbooks/kv-exhausted": "text/markdown", "llmdiag://runbooks/zh/kv-exhausted": "text/markdown",
		"llmdiag://runbooks/decode-bound": "text/markdown", "llmdiag://runbooks/zh/decode-bound": "text/markdown",
		"llmdiag://thresholds": "application/yaml",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resources %v, want %v", got, want)
	}
	for uri, want := range map[string]string{
		"llmdiag://runbooks/zh/decode-bound": "# Title decode-bound LANGUAGE_ZH",
		"llmdiag://thresholds":               "kv_warn: 0.9",
	} {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		if len(r.Contents) != 1 || !strings.Contains(r.Contents[0].Text, want) {
			t.Errorf("%s: %v, want it to contain %q", uri, r.Contents, want)
		}
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "llmdiag://runbooks/gremlins"}); err == nil {
		t.Error("an unknown runbook was read")
	}
}

// TestBounds: calls beyond MaxInFlight are refused saying so, and a call
// that outlives CallTimeout ends with a tool error.
func TestBounds(t *testing.T) {
	svc := &fakeService{nodes: fleetNodes(), block: make(chan struct{}), entered: make(chan struct{}, 1)}
	cs := connectClient(t, mcpserver.New(svc, mcpserver.Options{MaxInFlight: 1, CallTimeout: time.Minute}))
	first := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "diagnose_node", Arguments: map[string]any{"node": "e-crit"}})
		if err != nil {
			first <- err.Error()
			return
		}
		first <- res.Content[0].(*mcp.TextContent).Text
	}()
	<-svc.entered // the first call holds the only slot
	if res, text := call(t, cs, "list_nodes", nil); !res.IsError || !strings.Contains(text, "1 tool calls in flight, at most 1") {
		t.Errorf("second call: IsError %v, %s", res.IsError, text)
	}
	close(svc.block)
	if text := <-first; !strings.Contains(text, "## e-crit") {
		t.Errorf("first call: %s", text)
	}
	if res, text := call(t, cs, "list_nodes", nil); res.IsError {
		t.Errorf("after the slot is free: %s", text)
	}

	slow := &fakeService{nodes: fleetNodes(), block: make(chan struct{})}
	cs = connectClient(t, mcpserver.New(slow, mcpserver.Options{CallTimeout: 50 * time.Millisecond}))
	if res, text := call(t, cs, "diagnose_node", map[string]any{"node": "e-crit"}); !res.IsError || !strings.Contains(text, "did not answer in time") {
		t.Errorf("past the deadline: IsError %v, %s", res.IsError, text)
	}
}

// TestCallErrors: the service's Connect codes become words.
func TestCallErrors(t *testing.T) {
	for code, want := range map[connect.Code]string{
		connect.CodeUnauthenticated:   "refused the call",
		connect.CodeResourceExhausted: "refused by a limit",
		connect.CodeUnavailable:       "unavailable",
		connect.CodeInvalidArgument:   "invalid argument",
	} {
		cs := connectClient(t, mcpserver.New(failing{connect.NewError(code, errors.New("detail"))}, mcpserver.Options{}))
		res, text := call(t, cs, "list_nodes", nil)
		if !res.IsError || !strings.Contains(text, want) || !strings.Contains(text, "detail") {
			t.Errorf("%v: IsError %v, %q; want it to say %q", code, res.IsError, text, want)
		}
	}
}

type failing struct{ err error }

func (f failing) ListNodes(context.Context, *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	return nil, f.err
}

func (f failing) GetNodeMetrics(context.Context, *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error) {
	return nil, f.err
}

func (f failing) ComparePercentiles(context.Context, *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error) {
	return nil, f.err
}

func (f failing) DiagnoseNode(context.Context, *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error) {
	return nil, f.err
}
