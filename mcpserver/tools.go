package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/compare"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/report"
)

// Bounds of a fleet listing.
const (
	// maxPages is the most ListNodes pages one tool call reads (1000 nodes
	// each: the service's maximum page).
	maxPages = 20
	// defaultLimit and maxLimit bound the nodes one answer lists.
	defaultLimit = 50
	maxLimit     = 1000
)

// ListNodesIn filters the fleet.
type ListNodesIn struct {
	Model  string            `json:"model,omitempty" jsonschema:"only nodes serving this model (exact name)"`
	Engine string            `json:"engine,omitempty" jsonschema:"only nodes running this engine: vllm, sglang, trtllm, triton, tgi or dynamo"`
	Status string            `json:"status,omitempty" jsonschema:"only nodes with this status: ok, warn, crit, unknown or down"`
	Labels map[string]string `json:"labels,omitempty" jsonschema:"only nodes carrying every one of these fleet-file labels (key: value)"`
	Limit  int               `json:"limit,omitempty" jsonschema:"most nodes to return (default 50, at most 1000)"`
}

// UnhealthyIn filters the nodes that are not OK.
type UnhealthyIn struct {
	Model  string            `json:"model,omitempty" jsonschema:"only nodes serving this model (exact name)"`
	Labels map[string]string `json:"labels,omitempty" jsonschema:"only nodes carrying every one of these fleet-file labels (key: value)"`
	Limit  int               `json:"limit,omitempty" jsonschema:"most nodes to return (default 50, at most 1000)"`
}

// DiagnoseIn names the node to diagnose.
type DiagnoseIn struct {
	Node     string `json:"node" jsonschema:"node id, as list_nodes names it"`
	Language string `json:"language,omitempty" jsonschema:"language of the summary and report: en (default) or zh"`
	Format   string `json:"format,omitempty" jsonschema:"report format: markdown (default) or text"`
	Window   string `json:"window,omitempty" jsonschema:"window the verdict is computed over: 1m, 5m, 1h, … or lifetime (default: the service's)"`
}

// MetricsIn names the node and window.
type MetricsIn struct {
	Node   string `json:"node" jsonschema:"node id, as list_nodes names it"`
	Window string `json:"window,omitempty" jsonschema:"1m, 5m, 1h, … or lifetime (default: the service's)"`
}

// CompareIn is a ComparePercentilesRequest.
type CompareIn struct {
	Metric    string    `json:"metric" jsonschema:"latency metric: ttft, e2e, itl (inter_token), tpot (time_per_output_token) or queue_time"`
	GroupBy   string    `json:"group_by,omitempty" jsonschema:"rows: node (default), model, engine or label"`
	Label     string    `json:"label,omitempty" jsonschema:"with group_by label: the fleet-file label whose values form the rows"`
	Nodes     []string  `json:"nodes,omitempty" jsonschema:"node ids to compare (default: every node)"`
	Quantiles []float64 `json:"quantiles,omitempty" jsonschema:"quantiles in (0,1) (default 0.5, 0.95, 0.99)"`
	Window    string    `json:"window,omitempty" jsonschema:"1m, 5m, 1h, … or lifetime (default: the service's)"`
	Baseline  string    `json:"baseline,omitempty" jsonschema:"also compare each subject with itself this long before, e.g. 1h (needs Prometheus history)"`
}

// ExplainIn names a cause.
type ExplainIn struct {
	Cause    string `json:"cause" jsonschema:"root cause as a diagnosis names it, in any usual spelling: CAUSE_DECODE_BOUND, DECODE_BOUND, decode-bound, decode bound"`
	Language string `json:"language,omitempty" jsonschema:"en (default) or zh"`
}

// enums are the allowed values of input properties, put into the inferred
// schemas so that agents see them.
var enums = map[string][]any{
	"engine":   {"vllm", "sglang", "trtllm", "triton", "tgi", "dynamo"},
	"status":   {"ok", "warn", "crit", "unknown", "down"},
	"language": {"en", "zh"},
	"format":   {"markdown", "text"},
	"metric":   {"ttft", "e2e", "itl", "inter_token", "tpot", "time_per_output_token", "queue_time"},
	"group_by": {"node", "model", "engine", "label"},
}

// inputSchema is In's inferred schema with the enums of its properties and
// the required ones named.
func inputSchema[In any](required ...string) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("schema of %T: %v", *new(In), err)) // a programming error, caught by every test
	}
	for name, p := range s.Properties {
		if e, ok := enums[name]; ok {
			p.Enum = e
		}
	}
	s.Required = required
	return s
}

func (t *tools) register(s *mcp.Server) {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	mcp.AddTool(s, &mcp.Tool{Name: "list_nodes", Title: "List the fleet", Annotations: ro, InputSchema: inputSchema[ListNodesIn](),
		Description: "List the inference nodes llmdiag watches, sorted by id, with each node's model, engine, status (OK, WARN, CRIT, UNKNOWN, DOWN), root cause, whether a router may send it traffic, load score (1 = at a saturation point) and data age. Filters are optional."},
		guard(t, t.listNodes))
	mcp.AddTool(s, &mcp.Tool{Name: "unhealthy_nodes", Title: "Unhealthy nodes, worst first", Annotations: ro, InputSchema: inputSchema[UnhealthyIn](),
		Description: "List the nodes that are not OK, worst first: CRIT (users hurt now), then DOWN (metrics endpoint not answering), then WARN, then UNKNOWN (no fresh data); within one status the highest load score first. Follow up with diagnose_node."},
		guard(t, t.unhealthyNodes))
	mcp.AddTool(s, &mcp.Tool{Name: "diagnose_node", Title: "Diagnose one node", Annotations: ro, InputSchema: inputSchema[DiagnoseIn]("node"),
		Description: "Diagnose one node: its status, root cause (e.g. KV_EXHAUSTED, OVERLOADED, PREFILL_BOUND, DECODE_BOUND, NODE_OUTLIER) with evidence, what was ruled out, recommendations, and one finding per indicator. The text is the rendered report; explain_cause gives the runbook of the root cause."},
		guard(t, t.diagnoseNode))
	mcp.AddTool(s, &mcp.Tool{Name: "get_node_metrics", Title: "One node's indicators", Annotations: ro, InputSchema: inputSchema[MetricsIn]("node"),
		Description: "Every indicator of one node over a window: TTFT, E2E, inter-token, time-per-output-token and queue-time percentiles (each with the histogram bucket it lies in), queue, running, KV-cache pressure, token rates, preemptions. Absent values are not exposed by the engine: unknown, not zero."},
		guard(t, t.getNodeMetrics))
	mcp.AddTool(s, &mcp.Tool{Name: "compare_percentiles", Title: "Compare latency percentiles", Annotations: ro, InputSchema: inputSchema[CompareIn]("metric"),
		Description: "Compare one latency metric at chosen percentiles across nodes, or across models, engines or the values of a fleet-file label (histograms summed by bucket). Each value carries its bucket, its rank (1 = fastest) and its ratio to the median subject; outlier marks a subject at least twice the median at the highest percentile."},
		guard(t, t.comparePercentiles))
	mcp.AddTool(s, &mcp.Tool{Name: "explain_cause", Title: "Runbook of a root cause", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)}, InputSchema: inputSchema[ExplainIn]("cause"),
		Description: "The runbook of a root cause: what it means, how to confirm it, what to do. Also readable as the resource llmdiag://runbooks/<slug> (Chinese: llmdiag://runbooks/zh/<slug>)."},
		guard(t, t.explainCause))
}

// guard bounds a tool call: an in-flight slot and a deadline.
func guard[In, Out any](t *tools, h func(context.Context, In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		release, err := t.acquire()
		if err != nil {
			var zero Out
			return nil, zero, err
		}
		defer release()
		ctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
		defer cancel()
		return h(ctx, in)
	}
}

// text is a result whose text content is md.
func text(md string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: md}}}
}

// argError is a bad argument, named.
func argError(field, format string, args ...any) error {
	return fmt.Errorf("argument %s: %s", field, fmt.Sprintf(format, args...))
}

// callError words an error of the service for an agent: what failed, and
// for a missing node which one.
func callError(what, node string, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: llmdiag did not answer in time: %w", what, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	msg := ce.Message()
	switch ce.Code() {
	case connect.CodeNotFound:
		if node != "" {
			return fmt.Errorf("unknown node %q: llmdiag does not watch it (list_nodes names the nodes it does)", node)
		}
		return fmt.Errorf("%s: not found: %s", what, msg)
	case connect.CodeInvalidArgument:
		return fmt.Errorf("%s: invalid argument: %s", what, msg)
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return fmt.Errorf("%s: llmdiag refused the call (%s): check the token or certificate `llmdiag mcp` is given: %s", what, ce.Code(), msg)
	case connect.CodeResourceExhausted:
		return fmt.Errorf("%s: refused by a limit of llmdiag: %s", what, msg)
	case connect.CodeDeadlineExceeded, connect.CodeCanceled:
		return fmt.Errorf("%s: llmdiag did not answer in time: %s", what, msg)
	case connect.CodeUnavailable:
		return fmt.Errorf("%s: llmdiag is unavailable: %s", what, msg)
	case connect.CodeUnimplemented:
		return fmt.Errorf("%s: not available from this llmdiag: %s", what, msg)
	}
	return fmt.Errorf("%s: %s: %s", what, ce.Code(), msg)
}

// parseStatus reads ok, warn, crit, unknown or down ("" is any).
func parseStatus(s string) (llmdiagv1.Status, error) {
	if s == "" {
		return llmdiagv1.Status_STATUS_UNSPECIFIED, nil
	}
	v, ok := llmdiagv1.Status_value["STATUS_"+strings.ToUpper(strings.TrimSpace(s))]
	if !ok || v == 0 {
		return 0, argError("status", "%q: want ok, warn, crit, unknown or down", s)
	}
	return llmdiagv1.Status(v), nil
}

// parseLanguage reads en or zh ("" is en).
func parseLanguage(s string) (llmdiagv1.Language, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "en":
		return llmdiagv1.Language_LANGUAGE_EN, nil
	case "zh":
		return llmdiagv1.Language_LANGUAGE_ZH, nil
	}
	return 0, argError("language", "%q: want en or zh", s)
}

// checkWindow rejects a window the service would not read ("" is its
// default).
func checkWindow(w string) error {
	if w == "" {
		return nil
	}
	if _, _, err := metrics.ParseWindow(w); err != nil {
		return argError("window", "%q: want 1m, 5m, 1h, … or lifetime", w)
	}
	return nil
}

// limitOf is the limit asked for, defaulted and capped.
func limitOf(n int) (int, error) {
	switch {
	case n < 0:
		return 0, argError("limit", "%d: want a positive number", n)
	case n == 0:
		return defaultLimit, nil
	}
	return min(n, maxLimit), nil
}

// allNodes reads every page of the fleet that matches req, at most
// maxPages.
func (t *tools) allNodes(ctx context.Context, req *llmdiagv1.ListNodesRequest) ([]*llmdiagv1.Node, string, error) {
	var nodes []*llmdiagv1.Node
	var degraded string
	for range maxPages {
		resp, err := t.svc.ListNodes(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, "", callError("list nodes", "", err)
		}
		nodes = append(nodes, resp.Msg.GetNodes()...)
		if d := resp.Msg.GetDegraded(); d != nil {
			degraded = d.GetReason()
		}
		if resp.Msg.GetNextPageToken() == "" {
			return nodes, degraded, nil
		}
		req.PageToken = resp.Msg.GetNextPageToken()
	}
	return nil, "", fmt.Errorf("list nodes: the fleet is larger than %d pages of %d nodes, the most one tool call reads; filter by model, engine or status", maxPages, 1000)
}

// hasLabels reports whether n carries every label of want.
func hasLabels(n *llmdiagv1.Node, want map[string]string) bool {
	for k, v := range want {
		if got, ok := n.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (t *tools) listNodes(ctx context.Context, in ListNodesIn) (*mcp.CallToolResult, NodesOut, error) {
	limit, err := limitOf(in.Limit)
	if err != nil {
		return nil, NodesOut{}, err
	}
	req := &llmdiagv1.ListNodesRequest{Model: in.Model, ReadMask: nodesMask()}
	if req.Status, err = parseStatus(in.Status); err != nil {
		return nil, NodesOut{}, err
	}
	if req.Engine, err = fleet.ParseEngine(in.Engine); err != nil {
		return nil, NodesOut{}, argError("engine", "%v", err)
	}
	nodes, degraded, err := t.allNodes(ctx, req)
	if err != nil {
		return nil, NodesOut{}, err
	}
	nodes = slices.DeleteFunc(nodes, func(n *llmdiagv1.Node) bool { return !hasLabels(n, in.Labels) })
	out := nodesOut(nodes, limit, degraded)
	return text(renderNodes("Nodes", out)), out, nil
}

func (t *tools) unhealthyNodes(ctx context.Context, in UnhealthyIn) (*mcp.CallToolResult, NodesOut, error) {
	limit, err := limitOf(in.Limit)
	if err != nil {
		return nil, NodesOut{}, err
	}
	nodes, degraded, err := t.allNodes(ctx, &llmdiagv1.ListNodesRequest{Model: in.Model, ReadMask: nodesMask()})
	if err != nil {
		return nil, NodesOut{}, err
	}
	nodes = slices.DeleteFunc(report.Unhealthy(nodes), func(n *llmdiagv1.Node) bool { return !hasLabels(n, in.Labels) })
	out := nodesOut(nodes, limit, degraded)
	title := "Unhealthy nodes, worst first"
	if out.Total == 0 {
		title = "No unhealthy nodes: every node matched is OK"
	}
	return text(renderNodes(title, out)), out, nil
}

func (t *tools) diagnoseNode(ctx context.Context, in DiagnoseIn) (*mcp.CallToolResult, DiagnosisOut, error) {
	node := strings.TrimSpace(in.Node)
	if node == "" {
		return nil, DiagnosisOut{}, argError("node", "required: a node id, as list_nodes names it")
	}
	lang, err := parseLanguage(in.Language)
	if err != nil {
		return nil, DiagnosisOut{}, err
	}
	format := llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN
	switch strings.ToLower(strings.TrimSpace(in.Format)) {
	case "", "markdown", "md":
	case "text":
		format = llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT
	default:
		return nil, DiagnosisOut{}, argError("format", "%q: want markdown or text", in.Format)
	}
	if err := checkWindow(in.Window); err != nil {
		return nil, DiagnosisOut{}, err
	}
	// No read mask: the tool shows the whole diagnosis and its report
	// (all but the observation time and role), and the whole answer is the
	// one the service already keeps prepared.
	resp, err := t.svc.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node, Window: in.Window, Language: lang, Format: format}))
	if err != nil {
		return nil, DiagnosisOut{}, callError("diagnose "+node, node, err)
	}
	out := diagnosisOut(resp.Msg, t.runbookURI(resp.Msg.GetDiagnosis().GetRootCause(), lang))
	return text(renderDiagnosis(out, resp.Msg.GetReport())), out, nil
}

func (t *tools) getNodeMetrics(ctx context.Context, in MetricsIn) (*mcp.CallToolResult, MetricsOut, error) {
	node := strings.TrimSpace(in.Node)
	if node == "" {
		return nil, MetricsOut{}, argError("node", "required: a node id, as list_nodes names it")
	}
	if err := checkWindow(in.Window); err != nil {
		return nil, MetricsOut{}, err
	}
	resp, err := t.svc.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: node, Window: in.Window, ReadMask: metricsMask()}))
	if err != nil {
		return nil, MetricsOut{}, callError("metrics of "+node, node, err)
	}
	out := metricsOut(resp.Msg)
	return text(renderMetrics(out)), out, nil
}

func (t *tools) comparePercentiles(ctx context.Context, in CompareIn) (*mcp.CallToolResult, CompareOut, error) {
	req := &llmdiagv1.ComparePercentilesRequest{Nodes: in.Nodes, Quantiles: in.Quantiles, Window: in.Window}
	var ok bool
	if req.Metric, ok = compare.MetricByName(in.Metric); !ok {
		return nil, CompareOut{}, argError("metric", "%q: want %s", in.Metric, compare.MetricNamesHint)
	}
	switch strings.ToLower(strings.TrimSpace(in.GroupBy)) {
	case "", "node":
		req.GroupBy = llmdiagv1.GroupBy_GROUP_BY_NODE
	case "model":
		req.GroupBy = llmdiagv1.GroupBy_GROUP_BY_MODEL
	case "engine":
		req.GroupBy = llmdiagv1.GroupBy_GROUP_BY_ENGINE
	case "label":
		if !fleet.ValidLabelName(in.Label) {
			return nil, CompareOut{}, argError("label", "%q: with group_by label, want a fleet-file label name (letters, digits and _)", in.Label)
		}
		req.GroupBy, req.Label = llmdiagv1.GroupBy_GROUP_BY_LABEL, in.Label
	default:
		return nil, CompareOut{}, argError("group_by", "%q: want node, model, engine or label", in.GroupBy)
	}
	if in.Label != "" && req.GroupBy != llmdiagv1.GroupBy_GROUP_BY_LABEL {
		return nil, CompareOut{}, argError("label", "given without group_by label")
	}
	for _, q := range in.Quantiles {
		if !(q > 0 && q < 1) {
			return nil, CompareOut{}, argError("quantiles", "%v: each must lie in (0, 1)", q)
		}
	}
	if err := checkWindow(in.Window); err != nil {
		return nil, CompareOut{}, err
	}
	if in.Baseline != "" {
		d, err := time.ParseDuration(in.Baseline)
		if err != nil || d <= 0 {
			return nil, CompareOut{}, argError("baseline", "%q: want a positive duration such as 1h", in.Baseline)
		}
		req.BaselineOffset = durationpb.New(d)
	}
	resp, err := t.svc.ComparePercentiles(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, CompareOut{}, callError("compare percentiles", "", err)
	}
	out := compareOut(resp.Msg)
	return text(renderCompare(out)), out, nil
}

func (t *tools) explainCause(_ context.Context, in ExplainIn) (*mcp.CallToolResult, ExplainOut, error) {
	lang, err := parseLanguage(in.Language)
	if err != nil {
		return nil, ExplainOut{}, err
	}
	rb := t.opts.Runbooks
	if rb == nil {
		return nil, ExplainOut{}, errors.New("explain_cause: this llmdiag has no runbooks")
	}
	c, ok := causeByName(rb, in.Cause)
	if !ok {
		return nil, ExplainOut{}, argError("cause", "%q: not a root cause with a runbook; want one of %s", in.Cause, strings.Join(slugs(rb), ", "))
	}
	md, _ := rb.Markdown(c, lang)
	out := ExplainOut{Cause: strings.TrimPrefix(c.String(), "CAUSE_"), Slug: rb.Slug(c), Title: rb.Title(c, lang), Language: langWord(lang), URI: runbookURI(rb.Slug(c), lang), Markdown: md}
	return text(md), out, nil
}

// squash keeps the letters and digits of s, in lower case: every usual
// spelling of a cause squashes to the same word.
func squash(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// causeByName is the cause with a runbook that name spells: its enum name
// with or without CAUSE_, or its slug, in any case and separators.
func causeByName(rb Runbooks, name string) (llmdiagv1.Cause, bool) {
	want := strings.TrimPrefix(squash(name), "cause")
	if want == "" {
		return 0, false
	}
	for _, c := range rb.Causes() {
		if want == squash(rb.Slug(c)) || want == squash(strings.TrimPrefix(c.String(), "CAUSE_")) {
			return c, true
		}
	}
	return 0, false
}

// slugs are the slugs of rb's causes, sorted.
func slugs(rb Runbooks) []string {
	set := map[string]bool{}
	for _, c := range rb.Causes() {
		set[rb.Slug(c)] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// runbookURI is the runbook resource of c in lang, "" when there is none.
func (t *tools) runbookURI(c llmdiagv1.Cause, lang llmdiagv1.Language) string {
	rb := t.opts.Runbooks
	if rb == nil || !slices.Contains(rb.Causes(), c) {
		return ""
	}
	return runbookURI(rb.Slug(c), lang)
}
