package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/peterbourgon/ff/v3/ffcli"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/loadtest"
)

// benchFlags are bench's own flags.
type benchFlags struct {
	nodes       listFlag
	concurrency listFlag
	calls       *int
	rounds      *int
	warmup      *int
	connections *int
	duration    *time.Duration
	lang        *string
	format      *string
	// readMask and metricsMask: DiagnoseNode's and GetNodeMetrics' read
	// masks, measured beside the whole answers ("": not measured).
	readMask    *string
	metricsMask *string
}

// listFlag is a comma-separated list; the flag may be repeated.
type listFlag struct {
	vals []string
	set  bool
}

func (l *listFlag) String() string { return strings.Join(l.vals, ",") }

func (l *listFlag) Set(s string) error {
	if !l.set {
		l.vals, l.set = nil, true
	}
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			l.vals = append(l.vals, v)
		}
	}
	return nil
}

func benchCommand(env Env, cf *clientFlags) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag bench", flag.ContinueOnError)
	cf.bind(fs)
	b := benchFlags{concurrency: listFlag{vals: []string{"1", "8"}}}
	fs.Var(&b.nodes, "node", "node(s) to ask about, comma-separated or repeated; calls go round them (default: the first node the service lists)")
	fs.Var(&b.concurrency, "concurrency", "concurrencies to measure at, comma-separated")
	b.calls = fs.Int("calls", loadtest.DefaultCalls, "calls of each kind at each concurrency in each round")
	b.rounds = fs.Int("rounds", loadtest.DefaultRounds, "rounds; each figure is the median over them")
	b.warmup = fs.Int("warmup", loadtest.DefaultWarmup, "calls of each kind made first, at the highest concurrency, and not measured (0: none)")
	b.connections = fs.Int("connections", 2, "connections to the service; workers take turns on them")
	b.duration = fs.Duration("duration", loadtest.DefaultDuration, "the most the whole run may take: rounds not finished by then are left out")
	b.lang = fs.String("lang", "en", "DiagnoseNode's report language: en or zh")
	b.format = fs.String("format", "text", "DiagnoseNode's report format: text or markdown")
	b.readMask = fs.String("read-mask", "", "also measure DiagnoseNode with this read_mask (paths of Diagnosis, and report; comma-separated, e.g. routable,load_score,status,root_cause), in a row beside the whole answer")
	b.metricsMask = fs.String("metrics-read-mask", "", "also measure GetNodeMetrics with this read_mask (paths of NodeMetrics, comma-separated), in a row beside the whole answer")
	return &ffcli.Command{
		Name:       "bench",
		ShortUsage: "llmdiag bench [--node ID] [--concurrency 1,8] [--calls 2000] [--rounds 3] [--connections 2] [--lang en|zh] [--format text|markdown] [--read-mask PATHS] [--metrics-read-mask PATHS]",
		ShortHelp:  "load-test a running service: GetNodeMetrics and DiagnoseNode against its health check",
		LongHelp: strings.TrimSpace(`
Measure what a caller waits for on a running service, next to the floor of
the same server in the same run: grpc.health.v1 Health/Check (answered
from memory, no store read), GetNodeMetrics and DiagnoseNode (the default
window, --lang, --format) for --node, at each --concurrency. One table:
p50, p90, p99, calls a second, and p50 ÷ the health check's p50 at the
same concurrency, each the median over --rounds. With --read-mask (or
--metrics-read-mask), DiagnoseNode (GetNodeMetrics) is measured twice in
each round: the whole answer, and the answer trimmed to the mask (the
row DiagnoseNode/masked), as a router asking only for what it reads gets it.

It warms up first (--warmup calls of each kind), then makes rounds; a round
measures every kind at every concurrency, one after the other, so load
that drifts during the run falls on all alike. Each call has --timeout;
the whole run at most --duration (it stops by itself, showing the rounds
finished). gRPC (with grpc-go's client, as ghz and most routers call)
unless --protocol says otherwise; --connections HTTP/2 connections,
workers taking turns on them.

A served llmdiag limits each caller's unary calls (serve --rate-limit,
default 100 a second; health checks are not limited): bench a server
started with --rate-limit 0, or one that allows this caller more. Run it
from another machine than the server's to keep the two from sharing
cores:
  llmdiag bench --addr http://llmdiag.example:8080 --node deepseek-v4-0
  llmdiag bench --concurrency 1,8,64 --calls 5000 --lang zh --format markdown
  llmdiag bench --concurrency 8 --read-mask routable,load_score,status,root_cause`) + globalFlagsHelp + "bench …).",
		FlagSet: fs,
		Exec: withEnv(fs, env, func(ctx context.Context, args []string) error {
			args, err := interspersed(fs, args)
			if err != nil {
				return err
			}
			if err := noArgs(args); err != nil {
				return err
			}
			return runBench(ctx, env.Stdout, cf, b, chosen("protocol", fs, cf.root))
		}, cf.root),
	}
}

// chosen reports whether the flag name was given on one of the flag sets
// (or by its environment variable, which sets it on the first).
func chosen(name string, sets ...*flag.FlagSet) bool {
	given := false
	for _, fs := range sets {
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	}
	return given
}

// config checks bench's flags into a loadtest configuration.
func (b benchFlags) config(timeout time.Duration) (loadtest.Config, llmdiagv1.Language, llmdiagv1.ReportFormat, error) {
	cfg := loadtest.Config{Calls: *b.calls, Rounds: *b.rounds, Warmup: *b.warmup, Timeout: timeout, Duration: *b.duration}
	bad := func(format string, a ...any) (loadtest.Config, llmdiagv1.Language, llmdiagv1.ReportFormat, error) {
		return loadtest.Config{}, 0, 0, usageError{fmt.Errorf(format, a...)}
	}
	for _, s := range b.concurrency.vals {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return bad("--concurrency %q: want positive whole numbers, comma-separated (1,8)", b.concurrency.String())
		}
		cfg.Concurrency = append(cfg.Concurrency, n)
	}
	switch {
	case len(cfg.Concurrency) == 0:
		return bad("--concurrency: want at least one")
	case *b.calls < 1:
		return bad("--calls %d: want at least 1", *b.calls)
	case *b.rounds < 1:
		return bad("--rounds %d: want at least 1", *b.rounds)
	case *b.warmup < 0:
		return bad("--warmup %d: want 0 or more", *b.warmup)
	case *b.connections < 1:
		return bad("--connections %d: want at least 1", *b.connections)
	case *b.duration <= 0:
		return bad("--duration %v: want more than 0", *b.duration)
	case timeout <= 0:
		return bad("--timeout %v: want more than 0", timeout)
	}
	if *b.warmup == 0 {
		cfg.Warmup = -1
	}
	lang, err := parseLang(*b.lang)
	if err != nil {
		return loadtest.Config{}, 0, 0, err
	}
	var format llmdiagv1.ReportFormat
	switch *b.format {
	case "text":
		format = llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT
	case "markdown":
		format = llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN
	default:
		return bad("--format %q: want text or markdown", *b.format)
	}
	return cfg, lang, format, nil
}

func runBench(ctx context.Context, w io.Writer, cf *clientFlags, b benchFlags, protocolChosen bool) error {
	cfg, lang, format, err := b.config(cf.timeout)
	if err != nil {
		return err
	}
	if !protocolChosen {
		cf.protocol = string(client.ProtocolGRPC)
	}
	// One caller per connection. Over grpc, grpc-go's client (benchgrpc.go);
	// otherwise llmdiag's, each with its own HTTP transport.
	callers := make([]benchCaller, *b.connections)
	for i := range callers {
		if cf.protocol == string(client.ProtocolGRPC) {
			cc, err := dialGRPC(cf)
			if err != nil {
				return err
			}
			defer cc.Close()
			callers[i] = grpcCaller{hc: healthpb.NewHealthClient(cc), svc: llmdiagv1.NewDiagnosisServiceClient(cc)}
			continue
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		callers[i] = connectCaller{c}
	}
	// Each connection up, one call at a time, before any load: calls
	// started at once on a new client may each dial a connection of their
	// own.
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, cf.timeout)
		defer cancel()
		return f(ctx)
	}
	for _, c := range callers {
		if err := call(c.health); err != nil {
			return fmt.Errorf("health check of %s: %w", cf.addr, err)
		}
	}
	nodes := b.nodes.vals
	if len(nodes) == 0 {
		cl, err := cf.client()
		if err != nil {
			return err
		}
		var first string
		err = call(func(ctx context.Context) error {
			resp, err := cl.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{PageSize: 1}))
			if err != nil {
				return err
			}
			if len(resp.Msg.GetNodes()) == 0 {
				return errors.New("the service lists no node yet (its first refresh may not be done); name one with --node")
			}
			first = resp.Msg.GetNodes()[0].GetId()
			return nil
		})
		if err != nil {
			return fmt.Errorf("choosing a node: %w", err)
		}
		nodes = []string{first}
	}
	diagnoseMask, metricsMask := maskOf(*b.readMask), maskOf(*b.metricsMask)
	for _, n := range nodes {
		err := call(func(ctx context.Context) error {
			return callers[0].metrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: n})
		})
		if connect.CodeOf(err) == connect.CodeNotFound {
			return fmt.Errorf("--node %q: the service does not know this node (llmdiag nodes lists those it does): %w", n, err)
		}
		if err != nil {
			return fmt.Errorf("--node %q: %w", n, rateHint(err))
		}
	}
	// The masks as the service reads them, before any load.
	if diagnoseMask != nil {
		err := call(func(ctx context.Context) error {
			return callers[0].diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: nodes[0], ReadMask: diagnoseMask})
		})
		if err != nil {
			return maskErr("--read-mask", err)
		}
	}
	if metricsMask != nil {
		err := call(func(ctx context.Context) error {
			return callers[0].metrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: nodes[0], ReadMask: metricsMask})
		})
		if err != nil {
			return maskErr("--metrics-read-mask", err)
		}
	}

	on := func(w int) benchCaller { return callers[w%len(callers)] }
	node := func(i int) string { return nodes[i%len(nodes)] }
	calls := []loadtest.Call{
		{Name: "Health/Check", Do: func(ctx context.Context, w, _ int) error { return on(w).health(ctx) }},
		{Name: "GetNodeMetrics", Do: func(ctx context.Context, w, i int) error {
			return on(w).metrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node(i)})
		}},
	}
	if metricsMask != nil {
		calls = append(calls, loadtest.Call{Name: "GetNodeMetrics/masked", Do: func(ctx context.Context, w, i int) error {
			return on(w).metrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node(i), ReadMask: metricsMask})
		}})
	}
	calls = append(calls, loadtest.Call{Name: "DiagnoseNode", Do: func(ctx context.Context, w, i int) error {
		return on(w).diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node(i), Language: lang, Format: format})
	}})
	if diagnoseMask != nil {
		calls = append(calls, loadtest.Call{Name: "DiagnoseNode/masked", Do: func(ctx context.Context, w, i int) error {
			return on(w).diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node(i), Language: lang, Format: format, ReadMask: diagnoseMask})
		}})
	}
	fmt.Fprintf(w, "llmdiag bench: %s over %s, %d connection(s); node %s, DiagnoseNode in %s, %s; %d calls a row per round, %d round(s), after %d warm-up calls of each\n",
		cf.addr, cf.protocol, len(callers), strings.Join(nodes, ","), *b.lang, *b.format, cfg.Calls, cfg.Rounds, max(cfg.Warmup, 0))
	if metricsMask != nil {
		fmt.Fprintf(w, "GetNodeMetrics/masked: read_mask %s\n", strings.Join(metricsMask.GetPaths(), ","))
	}
	if diagnoseMask != nil {
		fmt.Fprintf(w, "DiagnoseNode/masked: read_mask %s\n", strings.Join(diagnoseMask.GetPaths(), ","))
	}
	res, err := loadtest.Run(ctx, cfg, calls)
	if err != nil {
		return rateHint(err)
	}
	printBench(w, res)
	if res.Rounds < cfg.Rounds {
		fmt.Fprintf(w, "stopped by --duration %v after %d of %d rounds\n", cfg.Duration, res.Rounds, cfg.Rounds)
	}
	return nil
}

// maskOf reads a comma-separated read mask; nil when there is none.
func maskOf(s string) *fieldmaskpb.FieldMask {
	var l listFlag
	l.Set(s)
	if len(l.vals) == 0 {
		return nil
	}
	return &fieldmaskpb.FieldMask{Paths: l.vals}
}

// maskErr says which flag's mask the service refused.
func maskErr(flag string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument {
		msg := ce.Message()
		if s, ok := status.FromError(ce.Unwrap()); ok { // over grpc-go
			msg = s.Message()
		}
		return usageError{fmt.Errorf("%s: %s", flag, msg)}
	}
	return rateHint(err)
}

// checkServing is one health check: an error unless the server is SERVING.
func checkServing(ctx context.Context, c *client.Client) error {
	st, err := c.Health(ctx, "")
	if err != nil {
		return err
	}
	if st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health check: %v", st)
	}
	return nil
}

// rateHint adds to a refusal by the service's rate limit how to bench
// anyway.
func rateHint(err error) error {
	if connect.CodeOf(err) == connect.CodeResourceExhausted {
		return fmt.Errorf("%w\nThe service limits this caller's calls: bench a server started with a higher --rate-limit (0: none), or run fewer --calls", err)
	}
	return err
}

// printBench writes the result as one table.
func printBench(w io.Writer, res loadtest.Result) {
	// Figures align right; the names, padded to one width, left.
	width := len("CALL")
	for _, r := range res.Rows {
		width = max(width, len(r.Call))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tCONC\tP50\tP90\tP99\tCALLS/S\tP50 ÷ HEALTH\t\n", width, "CALL")
	for _, r := range res.Rows {
		fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s\t%s\t%.0f\t%.2f×\t\n", width, r.Call, r.Concurrency, millis(r.P50), millis(r.P90), millis(r.P99), r.PerSecond, r.Ratio)
	}
	tw.Flush()
	fmt.Fprintf(w, "medians over %d round(s); %s in all\n", res.Rounds, res.Elapsed.Round(time.Millisecond))
}

// millis writes d in milliseconds with three significant digits.
func millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 1:
		return fmt.Sprintf("%.3f ms", ms)
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}
