package mcpserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Service is the part of DiagnosisService the tools call. The in-process
// handler (llmdiagv1connect.DiagnosisServiceHandler) and the Connect client
// (client.Client, llmdiagv1connect.DiagnosisServiceClient) both satisfy it.
type Service interface {
	ListNodes(context.Context, *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error)
	GetNodeMetrics(context.Context, *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error)
	ComparePercentiles(context.Context, *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error)
	DiagnoseNode(context.Context, *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error)
}

// Runbooks are the runbooks of the root causes: which causes have one, each
// one's slug (its name in URLs and URIs, e.g. "decode-bound"), its title and
// its Markdown in a language. RunbookFuncs adapts a package of functions.
type Runbooks interface {
	Causes() []llmdiagv1.Cause
	Slug(llmdiagv1.Cause) string
	Title(llmdiagv1.Cause, llmdiagv1.Language) string
	Markdown(llmdiagv1.Cause, llmdiagv1.Language) (string, bool)
}

// RunbookFuncs is Runbooks made of functions, for a package that offers
// them as functions (runbook.Causes, runbook.Slug, runbook.Title,
// runbook.Markdown).
type RunbookFuncs struct {
	AllCauses     func() []llmdiagv1.Cause
	CauseSlug     func(llmdiagv1.Cause) string
	CauseTitle    func(llmdiagv1.Cause, llmdiagv1.Language) string
	CauseMarkdown func(llmdiagv1.Cause, llmdiagv1.Language) (string, bool)
}

// Causes implements Runbooks.
func (f RunbookFuncs) Causes() []llmdiagv1.Cause { return f.AllCauses() }

// Slug implements Runbooks.
func (f RunbookFuncs) Slug(c llmdiagv1.Cause) string { return f.CauseSlug(c) }

// Title implements Runbooks.
func (f RunbookFuncs) Title(c llmdiagv1.Cause, l llmdiagv1.Language) string {
	return f.CauseTitle(c, l)
}

// Markdown implements Runbooks.
func (f RunbookFuncs) Markdown(c llmdiagv1.Cause, l llmdiagv1.Language) (string, bool) {
	return f.CauseMarkdown(c, l)
}

// Defaults of Options.
const (
	DefaultCallTimeout = 15 * time.Second
	DefaultMaxInFlight = 16
	// MaxRequestBodyBytes bounds one HTTP request to /mcp: tool arguments
	// are a few hundred bytes.
	MaxRequestBodyBytes = 1 << 20
)

// Options configure the server. Zero values take the defaults.
type Options struct {
	// Runbooks back explain_cause and the runbook resources; nil: neither
	// has any (explain_cause then says so).
	Runbooks Runbooks
	// Thresholds, when set, is served as llmdiag://thresholds: the
	// thresholds in force. nil: no such resource (a remote `llmdiag mcp`
	// does not know the service's).
	Thresholds *diagnose.Thresholds
	// Version is the server's version in the MCP handshake.
	Version string
	// CallTimeout is the deadline of one tool call (default
	// DefaultCallTimeout).
	CallTimeout time.Duration
	// MaxInFlight is the most tool calls served at once; one more is
	// refused (default DefaultMaxInFlight).
	MaxInFlight int
	// Log receives the SDK's warnings and errors (default: discarded); its
	// info lines (one per session, so one per HTTP request) are dropped.
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	o.Log = warnings(o.Log)
	if o.Version == "" {
		o.Version = "dev"
	}
	return o
}

// tools is what the tool handlers share.
type tools struct {
	svc  Service
	opts Options
	sem  chan struct{}
}

// New returns the MCP server: the tools over svc and the resources of
// opts. It is safe to serve over several transports at once.
func New(svc Service, opts Options) *mcp.Server {
	opts = opts.withDefaults()
	s := mcp.NewServer(&mcp.Implementation{Name: "llmdiag", Title: "llmdiag: LLM inference fleet diagnosis", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       opts.Log,
		// No logging capability: the server sends no log notifications.
		Capabilities: &mcp.ServerCapabilities{},
	})
	t := &tools{svc: svc, opts: opts, sem: make(chan struct{}, opts.MaxInFlight)}
	t.register(s)
	addResources(s, opts)
	return s
}

const instructions = `llmdiag diagnoses the nodes of an LLM inference fleet (vLLM, SGLang, …) from their Prometheus metrics.
Start with unhealthy_nodes (worst first) or list_nodes, then diagnose_node for the verdict on one node
(root cause, evidence, recommendations), get_node_metrics for its raw indicators, compare_percentiles to
compare latency across nodes, models or engines, and explain_cause (or the llmdiag://runbooks/ resources)
for what a root cause means and what to do.`

// HTTPHandler serves s over streamable HTTP, stateless (every POST is a
// whole exchange: no session to keep, bound or expire; GET and DELETE
// answer 405) and answering application/json rather than an SSE stream (the
// tools send no notifications mid-call, and a plain answer is cheaper and
// meets no write deadline half-way), with request bodies capped at
// MaxRequestBodyBytes, the SDK's DNS-rebinding protection on and
// cross-origin browser requests refused. A tool call's deadline is
// Options.CallTimeout, and an abandoned request cancels its call. Mount it
// at auth.MCPPath, behind the port's authentication.
func HTTPHandler(s *mcp.Server, log *slog.Logger) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		JSONResponse:                 true,
		Logger:                       warnings(log),
		MaxRequestBodyBytes:          MaxRequestBodyBytes,
		PropagateRequestCancellation: true,
	})
	return http.NewCrossOriginProtection().Handler(h)
}

// acquire takes one of the in-flight slots, or refuses saying which limit.
func (t *tools) acquire() (func(), error) {
	select {
	case t.sem <- struct{}{}:
		return func() { <-t.sem }, nil
	default:
		return nil, fmt.Errorf("busy: %d tool calls in flight, at most %d; try again shortly", len(t.sem), cap(t.sem))
	}
}

// warnings is log at warn level and above; nil logs nothing.
func warnings(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(minLevel{log.Handler(), slog.LevelWarn})
}

// minLevel is a handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
