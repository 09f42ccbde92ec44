package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/peterbourgon/ff/v3/ffcli"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/compare"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/human"
	"github.com/llmdiag/llmdiag/metrics"
)

// clientFlags are the flags every client command shares. They are global:
// defined on the root command too, bound to the same values, so that they
// may come before the command name (llmdiag --addr URL diagnose NODE) or
// after it.
type clientFlags struct {
	addr, protocol, token string
	ca, cert, key         string // TLS files (cli/tls.go)
	timeout               time.Duration
	// root is the root command's flag set: a flag given there counts as
	// given on the command line, ahead of the environment.
	root *flag.FlagSet
}

// bind defines the client flags on fs, bound to c's values.
func (c *clientFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "http://127.0.0.1:8080", "llmdiag service URL (LLMDIAG_ADDR)")
	fs.StringVar(&c.protocol, "protocol", "connect", "wire protocol: connect, connect-json, grpc or grpc-web")
	fs.StringVar(&c.token, "token", "", "bearer token to send (LLMDIAG_TOKEN)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "deadline of one call (watch: of connecting)")
	fs.StringVar(&c.ca, "ca", "", "with an https:// --addr: verify the service against the CAs in this file (PEM) instead of the system's (LLMDIAG_CA)")
	fs.StringVar(&c.cert, "cert", "", "with an https:// --addr: client certificate to present (PEM, mTLS), with --key (LLMDIAG_CERT)")
	fs.StringVar(&c.key, "key", "", "private key of --cert (PEM) (LLMDIAG_KEY)")
}

// isClientFlag reports whether name is one of the client flags.
func isClientFlag(name string) bool {
	switch name {
	case "addr", "protocol", "token", "timeout", "ca", "cert", "key":
		return true
	}
	return false
}

func (c *clientFlags) client() (*client.Client, error) {
	p, err := client.ParseProtocol(c.protocol)
	if err != nil {
		return nil, usageError{fmt.Errorf("--protocol: %w", err)}
	}
	opts := []client.Option{client.WithProtocol(p)}
	if c.token != "" {
		opts = append(opts, client.WithBearerToken(c.token))
	}
	tlsOpts, err := c.tlsOptions()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(c.addr, append(opts, tlsOpts...)...)
	if err != nil {
		return nil, usageError{fmt.Errorf("--addr: %w", err)}
	}
	return cl, nil
}

// globalFlagsHelp ends every client command's help.
const globalFlagsHelp = `

The client flags --addr, --protocol, --token, --timeout, --ca, --cert and
--key may also come before the command name (llmdiag --addr URL ` // + the command's name

// clientCmd is one client command: its help, the positional argument and
// output formats it takes, and the call it makes. clientCommand gives
// every one the same start: the client flags, the environment, parsing
// flags after arguments, dialing, the deadline, the argument, --format,
// and printing the answer.
type clientCmd struct {
	name, usage, short, long string
	// arg names the one positional argument the command takes (NODE);
	// "": it takes none.
	arg string
	// formats are the values of --format, the default first; JSON prints
	// the answer's message. None: the command has no --format.
	formats []string
	// running: the command runs until interrupted (watch, mcp), with no
	// deadline of --timeout on the whole of it.
	running bool
	// setup defines the command's own flags on fs and returns its call.
	setup func(fs *flag.FlagSet) clientCall
}

// clientIn is what a client call is given: the positional argument and
// the --format chosen.
type clientIn struct {
	arg, format string
}

// clientOut is a call's answer: msg, printed as JSON with --format json,
// and text, which prints it otherwise. A call that printed its output
// itself returns neither.
type clientOut struct {
	msg  proto.Message
	text func(io.Writer) error
}

// clientCall makes a client command's call.
type clientCall func(ctx context.Context, cl *client.Client, in clientIn) (clientOut, error)

// clientCommand is the command cmd describes, with the client flags bound
// to cf.
func clientCommand(env Env, cf *clientFlags, cmd clientCmd) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag "+cmd.name, flag.ContinueOnError)
	cf.bind(fs)
	var format func() (string, error)
	if len(cmd.formats) > 0 {
		format = formatFlag(fs, cmd.formats[0], cmd.formats...)
	}
	call := cmd.setup(fs)
	return &ffcli.Command{
		Name:       cmd.name,
		ShortUsage: cmd.usage,
		ShortHelp:  cmd.short,
		LongHelp:   strings.TrimSpace(cmd.long) + globalFlagsHelp + cmd.name + " …).",
		FlagSet:    fs,
		Exec: withEnv(fs, env, func(ctx context.Context, args []string) error {
			args, err := interspersed(fs, args)
			if err != nil {
				return err
			}
			cl, err := cf.client()
			if err != nil {
				return err
			}
			if !cmd.running {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, cf.timeout)
				defer cancel()
			}
			var in clientIn
			if format != nil {
				if in.format, err = format(); err != nil {
					return err
				}
			}
			if cmd.arg == "" {
				err = noArgs(args)
			} else {
				in.arg, err = oneArg(args, cmd.arg)
			}
			if err != nil {
				return err
			}
			out, err := call(ctx, cl, in)
			switch {
			case err != nil:
				return err
			case in.format == "json" && out.msg != nil:
				return printJSON(env.Stdout, out.msg)
			case out.text != nil:
				return out.text(env.Stdout)
			}
			return nil
		}, cf.root),
	}
}

func oneArg(args []string, what string) (string, error) {
	if len(args) != 1 {
		return "", usageError{fmt.Errorf("want exactly one %s, got %d arguments", what, len(args))}
	}
	return args[0], nil
}

func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// parseLang reads a --lang value: en or zh.
func parseLang(s string) (llmdiagv1.Language, error) {
	switch s {
	case "en":
		return llmdiagv1.Language_LANGUAGE_EN, nil
	case "zh":
		return llmdiagv1.Language_LANGUAGE_ZH, nil
	}
	return 0, usageError{fmt.Errorf("--lang %q: want en or zh", s)}
}

// fieldsFlag defines --fields, the request's read_mask: the paths of what
// to print with --format json, relative to resource (the service refuses
// an unknown one). The returned function reads it for the format chosen.
func fieldsFlag(fs *flag.FlagSet, resource, example string) func(format string) (*fieldmaskpb.FieldMask, error) {
	var l listFlag
	fs.Var(&l, "fields", "with --format json, only these fields of each "+resource+" (read_mask paths, comma-separated, e.g. "+example+"); default every field")
	return func(format string) (*fieldmaskpb.FieldMask, error) {
		if len(l.vals) == 0 {
			return nil, nil
		}
		if format != "json" {
			return nil, usageError{fmt.Errorf("--fields %s: only with --format json (the other formats print fixed columns)", l.String())}
		}
		return &fieldmaskpb.FieldMask{Paths: l.vals}, nil
	}
}

func formatFlag(fs *flag.FlagSet, def string, allowed ...string) func() (string, error) {
	f := fs.String("format", def, "output format: "+strings.Join(allowed, ", "))
	return func() (string, error) {
		for _, a := range allowed {
			if *f == a {
				return a, nil
			}
		}
		return "", usageError{fmt.Errorf("--format %q: want %s", *f, strings.Join(allowed, ", "))}
	}
}

func nodesCommand(env Env, cf *clientFlags) *ffcli.Command {
	return clientCommand(env, cf, clientCmd{name: "nodes", formats: []string{"text", "json"},
		usage: "llmdiag nodes [--model NAME] [--status ok|warn|crit|unknown|down] [--format text|json] [--fields PATHS]", short: "list the fleet with each node's health", long: `
List every node llmdiag watches: model, engine, status, root cause, whether a
router may send it traffic, load score and the age of its data. The service
answers in pages of up to 1000 nodes; this reads them all.`,
		setup: func(fs *flag.FlagSet) clientCall {
			model := fs.String("model", "", "only nodes serving this model")
			status := fs.String("status", "", "only nodes with this status: ok, warn, crit, unknown or down")
			fields := fieldsFlag(fs, "Node", "id,status,routable")
			return func(ctx context.Context, cl *client.Client, in clientIn) (clientOut, error) {
				mask, err := fields(in.format)
				if err != nil {
					return clientOut{}, err
				}
				req := &llmdiagv1.ListNodesRequest{Model: *model, ReadMask: mask}
				if *status != "" {
					v, ok := llmdiagv1.Status_value["STATUS_"+strings.ToUpper(*status)]
					if !ok || v == 0 {
						return clientOut{}, usageError{fmt.Errorf("--status %q: want ok, warn, crit, unknown or down", *status)}
					}
					req.Status = llmdiagv1.Status(v)
				}
				all, err := cl.AllNodes(ctx, req)
				return clientOut{all, func(w io.Writer) error { return printNodes(w, all.GetNodes()) }}, err
			}
		}})
}

func printNodes(w io.Writer, nodes []*llmdiagv1.Node) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tMODEL\tENGINE\tSTATUS\tROOT CAUSE\tROUTABLE\tSCORE\tAGE")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%.2f\t%s\n", n.GetId(), n.GetModel(), fleet.EngineName(n.GetEngine()),
			enumWord(n.GetStatus().String(), "STATUS_"), enumWord(n.GetRootCause().String(), "CAUSE_"),
			n.GetRoutable(), n.GetLoadScore(), dur(n.GetStaleness()))
	}
	return tw.Flush()
}

func metricsCommand(env Env, cf *clientFlags) *ffcli.Command {
	return clientCommand(env, cf, clientCmd{name: "metrics", arg: "NODE", formats: []string{"text", "json"},
		usage: "llmdiag metrics NODE [--window 5m|1h|lifetime] [--format text|json] [--fields PATHS]", short: "show every indicator of one node", long: `
Show one node's indicators over a window: TTFT, E2E, inter-token, time per
output token and queue time percentiles (each with the bucket it lies in),
queue, running, queue/running, KV pressure, token rates and preemptions.
Absent values are ones the engine does not expose: unknown, not zero.`,
		setup: func(fs *flag.FlagSet) clientCall {
			window := fs.String("window", "", "window: 1m, 5m, 1h, … or lifetime (default: the service's)")
			offset := fs.Duration("offset", 0, "read the window ending this long ago (for example 1h)")
			fields := fieldsFlag(fs, "NodeMetrics", "queue,kv_pressure,ttft.percentiles")
			return func(ctx context.Context, cl *client.Client, in clientIn) (clientOut, error) {
				mask, err := fields(in.format)
				if err != nil {
					return clientOut{}, err
				}
				req := &llmdiagv1.GetNodeMetricsRequest{Node: in.arg, Window: *window, ReadMask: mask}
				if *offset != 0 {
					req.Offset = durationpb.New(*offset)
				}
				resp, err := cl.GetNodeMetrics(ctx, connect.NewRequest(req))
				if err != nil {
					return clientOut{}, err
				}
				return clientOut{resp.Msg, func(w io.Writer) error { return printMetrics(w, resp.Msg.GetMetrics()) }}, nil
			}
		}})
}

func printMetrics(w io.Writer, m *llmdiagv1.NodeMetrics) error {
	window := m.GetWindow()
	if c := m.GetCovered(); c != nil {
		window += " (" + dur(c) + " of data)"
	}
	fmt.Fprintf(w, "%s  model=%s engine=%s window=%s up=%v age=%s stale=%v\n\n", m.GetNode(), m.GetModel(),
		fleet.EngineName(m.GetEngine()), window, m.GetUp(), dur(m.GetStaleness()), m.GetStale())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LATENCY\tCOUNT\tMEAN\tPERCENTILES (bucket)")
	for _, d := range []struct {
		name string
		d    *llmdiagv1.Distribution
	}{{"ttft", m.GetTtft()}, {"e2e", m.GetE2E()}, {"inter_token", m.GetInterToken()}, {"time_per_output_token", m.GetTimePerOutputToken()}, {"queue_time", m.GetQueueTime()}} {
		if d.d == nil {
			fmt.Fprintf(tw, "%s\t-\t-\tunknown (not exposed)\n", d.name)
			continue
		}
		var ps []string
		for _, p := range d.d.GetPercentiles() {
			ps = append(ps, percentile(p))
		}
		mean := "-"
		if d.d.Mean != nil {
			mean = human.Seconds(d.d.GetMean())
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\n", d.name, d.d.GetCount(), mean, strings.Join(ps, "  "))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDICATOR\tVALUE")
	// Where the per-request decode speed comes from, when not generation ÷
	// running: the same reading `llmdiag diagnose` names in its evidence.
	decodeUnit := " tok/s"
	if _, from := metrics.PerRequestDecode(m); from == metrics.DecodeTPOT || from == metrics.DecodeITL {
		decodeUnit += " (1 ÷ P50 " + from.String() + ")"
	}
	for _, g := range []struct {
		name string
		v    *float64
		unit string
	}{
		{"queue", m.Queue, ""}, {"running", m.Running, ""}, {"queue/running", m.QueueRunningRatio, ""},
		{"kv pressure", m.KvPressure, "%"}, {"kv capacity", m.KvCapacityTokens, " tokens"},
		{"prompt rate", m.PromptTokensPerSecond, " tok/s"}, {"generation rate", m.GenerationTokensPerSecond, " tok/s"},
		{"decode per request", m.DecodeTokensPerSecondPerRequest, decodeUnit}, {"preemptions", m.PreemptionsPerSecond, " /s"},
		{"requests", m.RequestsPerSecond, " /s"},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", g.name, gauge(g.v, g.unit))
	}
	tw.Flush()
	for _, e := range m.GetErrors() {
		fmt.Fprintln(w, "error:", e)
	}
	return nil
}

func historyCommand(env Env, cf *clientFlags) *ffcli.Command {
	return clientCommand(env, cf, clientCmd{name: "history", arg: "NODE", formats: []string{"text", "json"},
		usage: "llmdiag history NODE [--limit N] [--format text|json]", short: "show one node's history: a row per refresh", long: `
Show one node's history as the service keeps it (serve --history): a row per
refresh, oldest first, with queue, running, KV pressure, the window's mean
and P99 E2E, generation rate and the status given then. "-" is a figure the
refresh could not read (or, for window figures, a window not yet covered):
unknown, not zero.`,
		setup: func(fs *flag.FlagSet) clientCall {
			limit := fs.Int("limit", 20, "the newest refreshes to show (0: every one kept)")
			return func(ctx context.Context, cl *client.Client, in clientIn) (clientOut, error) {
				if *limit < 0 || *limit > math.MaxInt32 {
					return clientOut{}, usageError{fmt.Errorf("--limit %d: want 0 or more", *limit)}
				}
				resp, err := cl.GetNodeHistory(ctx, connect.NewRequest(&llmdiagv1.GetNodeHistoryRequest{Node: in.arg, Limit: int32(*limit)}))
				if err != nil {
					return clientOut{}, err
				}
				return clientOut{resp.Msg, func(w io.Writer) error { return printHistory(w, resp.Msg.GetPoints()) }}, nil
			}
		}})
}

func printHistory(w io.Writer, points []*llmdiagv1.HistoryPoint) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tUP\tSTATUS\tQUEUE\tRUNNING\tKV\tE2E MEAN\tE2E P99\tGEN TOK/S")
	fig := func(v *float64, f func(float64) string) string {
		if v == nil {
			return "-"
		}
		return f(*v)
	}
	num := func(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) }
	for _, p := range points {
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.GetAt().AsTime().Local().Format("15:04:05.000"), p.GetUp(),
			enumWord(p.GetStatus().String(), "STATUS_"), fig(p.Queue, num), fig(p.Running, num), fig(p.KvPressure, pct),
			fig(p.E2EMeanSeconds, human.Seconds), fig(p.E2EP99Seconds, human.Seconds), fig(p.GenerationTokensPerSecond, num))
	}
	return tw.Flush()
}

func diagnoseCommand(env Env, cf *clientFlags) *ffcli.Command {
	return clientCommand(env, cf, clientCmd{name: "diagnose", arg: "NODE", formats: []string{"text", "markdown", "json"},
		usage: "llmdiag diagnose NODE [--lang en|zh] [--format text|markdown|json] [--window W] [--fields PATHS]", short: "diagnose one node: findings, root cause, recommendations", long: `
Diagnose one node: one finding per indicator (value, status, conclusion),
then the root cause with its evidence, what was ruled out and what to do.
--format markdown suits chat tools, text suits terminals, json gives the
whole Diagnosis message. The rules, with a worked example, are in
docs/verdict-rules.md of the llmdiag repository.`,
		setup: func(fs *flag.FlagSet) clientCall {
			lang := fs.String("lang", "en", "report language: en or zh")
			window := fs.String("window", "", "window: 1m, 5m, 1h, … or lifetime (default: the service's)")
			fields := fieldsFlag(fs, "Diagnosis", "routable,load_score,status,root_cause; report for the report")
			return func(ctx context.Context, cl *client.Client, in clientIn) (clientOut, error) {
				l, err := parseLang(*lang)
				if err != nil {
					return clientOut{}, err
				}
				mask, err := fields(in.format)
				if err != nil {
					return clientOut{}, err
				}
				req := &llmdiagv1.DiagnoseNodeRequest{Node: in.arg, Window: *window, Format: llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT, Language: l, ReadMask: mask}
				if in.format == "markdown" {
					req.Format = llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN
				}
				resp, err := cl.DiagnoseNode(ctx, connect.NewRequest(req))
				if err != nil {
					return clientOut{}, err
				}
				return clientOut{resp.Msg, func(w io.Writer) error {
					_, err := fmt.Fprintln(w, strings.TrimRight(resp.Msg.GetReport(), "\n"))
					return err
				}}, nil
			}
		}})
}

func compareCommand(env Env, cf *clientFlags) *ffcli.Command {
	return clientCommand(env, cf, clientCmd{name: "compare", formats: []string{"text", "json"},
		usage: "llmdiag compare --metric ttft|e2e|itl|tpot|queue_time [--by node|model|engine|label=KEY] [--nodes a,b] [--quantiles 0.5,0.95,0.99] [--baseline 1h]", short: "compare a latency metric across nodes, models, engines or labels", long: `
Compare one latency metric at chosen percentiles across nodes, or across
models, engines or the values of a fleet-file label (their nodes' histograms
summed by bucket). Each value comes with the bucket it lies in; rank 1 is the
fastest, and values in the same bucket share a rank; ×median is the ratio to
the median subject, marked ≈ when the median lies in the value's bucket (the
histograms cannot tell the two apart); tail is the highest percentile over
the lowest; OUTLIER flags a subject at least twice the median at the highest
percentile. With --baseline every subject gets a second row, the window
ending that much earlier, and ×BASELINE is now / then at the highest
percentile.`,
		setup: func(fs *flag.FlagSet) clientCall {
			metric := fs.String("metric", "ttft", "ttft, e2e, itl (inter_token), tpot (time_per_output_token) or queue_time")
			by := fs.String("by", "node", "rows: node, model, engine or label=KEY (a fleet-file label)")
			nodes := fs.String("nodes", "", "comma-separated node ids (default: all)")
			quantiles := fs.String("quantiles", "0.5,0.95,0.99", "comma-separated quantiles in (0,1)")
			window := fs.String("window", "", "window: 1m, 5m, 1h, … or lifetime (default: the service's)")
			offset := fs.Duration("offset", 0, "compare the window ending this long ago (for example 1h)")
			baseline := fs.Duration("baseline", 0, "also compare each subject with itself this long before (for example 1h, up to 168h)")
			return func(ctx context.Context, cl *client.Client, _ clientIn) (clientOut, error) {
				req, err := compareRequest(*metric, *by, *nodes, *quantiles, *window, *offset, *baseline)
				if err != nil {
					return clientOut{}, err
				}
				resp, err := cl.ComparePercentiles(ctx, connect.NewRequest(req))
				if err != nil {
					return clientOut{}, err
				}
				return clientOut{resp.Msg, func(w io.Writer) error { return printCompare(w, resp.Msg) }}, nil
			}
		}})
}

// compareRequest is the request compare's flags ask for.
func compareRequest(metric, by, nodes, quantiles, window string, offset, baseline time.Duration) (*llmdiagv1.ComparePercentilesRequest, error) {
	req := &llmdiagv1.ComparePercentilesRequest{Window: window}
	if offset != 0 {
		req.Offset = durationpb.New(offset)
	}
	switch {
	case baseline < 0:
		return nil, usageError{fmt.Errorf("--baseline %v: want a positive duration", baseline)}
	case baseline > 0:
		req.BaselineOffset = durationpb.New(baseline)
	}
	var ok bool
	if req.Metric, ok = compare.MetricByName(metric); !ok {
		return nil, usageError{fmt.Errorf("--metric %q: want %s", metric, compare.MetricNamesHint)}
	}
	var err error
	if req.GroupBy, req.Label, err = parseBy(by); err != nil {
		return nil, err
	}
	if nodes != "" {
		req.Nodes = strings.Split(nodes, ",")
	}
	for _, q := range strings.Split(quantiles, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(q), 64)
		if err != nil {
			return nil, usageError{fmt.Errorf("--quantiles: %w", err)}
		}
		req.Quantiles = append(req.Quantiles, v)
	}
	return req, nil
}

// parseBy reads --by: node, model, engine or label=KEY.
func parseBy(by string) (llmdiagv1.GroupBy, string, error) {
	switch by {
	case "node":
		return llmdiagv1.GroupBy_GROUP_BY_NODE, "", nil
	case "model":
		return llmdiagv1.GroupBy_GROUP_BY_MODEL, "", nil
	case "engine":
		return llmdiagv1.GroupBy_GROUP_BY_ENGINE, "", nil
	}
	if key, ok := strings.CutPrefix(by, "label="); ok {
		if !fleet.ValidLabelName(key) {
			return 0, "", usageError{fmt.Errorf("--by %q: want label=KEY with KEY a label name (letters, digits and _)", by)}
		}
		return llmdiagv1.GroupBy_GROUP_BY_LABEL, key, nil
	}
	return 0, "", usageError{fmt.Errorf("--by %q: want node, model, engine or label=KEY", by)}
}

// withinMark follows a value whose difference from its reference (the
// median subject, or for a baseline row the subject now) is within bucket
// resolution.
const withinMark = "≈"

// printCompare writes the comparison as an aligned table: one row per
// subject (and, with a baseline, one more per subject for then), every cell
// non-empty and free of double spaces, so columns split on runs of two or
// more spaces; notes follow the table.
func printCompare(w io.Writer, r *llmdiagv1.ComparePercentilesResponse) error {
	fmt.Fprintf(w, "%s over %s (age %s)\n\n", enumWord(r.GetMetric().String(), "LATENCY_METRIC_"), r.GetWindow(), dur(r.GetStaleness()))
	hasBaseline := false
	for _, row := range r.GetRows() {
		if row.GetOffset().AsDuration() > 0 {
			hasBaseline = true
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"SUBJECT"}
	if hasBaseline {
		head = append(head, "WHEN")
	}
	head = append(head, "COUNT")
	for _, q := range r.GetQuantiles() {
		head = append(head, fmt.Sprintf("P%s (bucket) rank ×median", strconv.FormatFloat(q*100, 'f', -1, 64)))
	}
	head = append(head, "TAIL", "OUTLIER")
	if hasBaseline {
		head = append(head, "×BASELINE")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	var notes []string
	within := false
	for _, row := range r.GetRows() {
		then := row.GetOffset().AsDuration() > 0
		cells := []string{row.GetSubject()}
		if hasBaseline {
			when := "now"
			if then {
				when = row.GetOffset().AsDuration().String() + " before"
			}
			cells = append(cells, when)
		}
		cells = append(cells, fmt.Sprintf("%.0f", row.GetCount()))
		for _, v := range row.GetValues() {
			p := v.GetPercentile()
			if math.IsNaN(p.GetValue()) {
				cells = append(cells, "-")
				continue
			}
			cell := fmt.Sprintf("%s (%s–%s)", human.Seconds(p.GetValue()), human.Seconds(p.GetLowerBound()), human.Seconds(p.GetUpperBound()))
			if !then {
				cell += fmt.Sprintf(" #%d %.2f×", v.GetRank(), v.GetRatioToMedian())
			}
			if v.GetWithinResolution() {
				cell += withinMark
				within = true
			}
			cells = append(cells, cell)
		}
		tail := "-"
		if row.GetTailRatio() > 0 {
			tail = fmt.Sprintf("%.1f×", row.GetTailRatio())
		}
		outlier := "-"
		if row.GetOutlier() {
			outlier = "yes"
		}
		cells = append(cells, tail, outlier)
		if hasBaseline {
			ratio := "-"
			if row.GetRatioToBaseline() > 0 && !then {
				ratio = fmt.Sprintf("%.2f×", row.GetRatioToBaseline())
			}
			cells = append(cells, ratio)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
		if row.GetNote() != "" {
			subject := row.GetSubject()
			if then {
				subject += " (" + row.GetOffset().AsDuration().String() + " before)"
			}
			notes = append(notes, subject+": "+row.GetNote())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if within {
		fmt.Fprintln(w, "\n"+withinMark+" within bucket resolution: the median subject's value (on a baseline row: the subject's value now) lies in the same bucket, so the histograms cannot tell the two apart; the rank or ratio is not a measured difference.")
	}
	for _, n := range notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func watchCommand(env Env, cf *clientFlags) *ffcli.Command {
	return clientCommand(env, cf, clientCmd{name: "watch", running: true,
		usage: "llmdiag watch [--model NAME] [--nodes a,b] [--labels k=v,...] [--heartbeat 15s]", short: "follow health changes as they happen", long: `
Print the current health of every selected node, then every change (status,
root cause, routability, load score) as llmdiag sees it, until interrupted.
Reconnects (with jittered backoff) and resumes where it left off if the
stream breaks; when the service no longer holds that position it sends the
current state again, marked as at the start.`,
		setup: func(fs *flag.FlagSet) clientCall {
			model := fs.String("model", "", "only nodes serving this model")
			nodes := fs.String("nodes", "", "comma-separated node ids (default: all)")
			labels := fs.String("labels", "", "only nodes carrying every one of these fleet-file labels: k=v,k2=v2")
			minScore := fs.Float64("min-score-change", 0, "report a load-score move alone only once it reaches this (0: every move llmdiag publishes, 0.05 or more)")
			hb := fs.Duration("heartbeat", 15*time.Second, "heartbeat interval to ask for (5s to 5m)")
			return func(ctx context.Context, cl *client.Client, _ clientIn) (clientOut, error) {
				sel := client.Selector{Model: *model, Heartbeat: *hb, MinScoreChange: *minScore}
				if *nodes != "" {
					sel.Nodes = strings.Split(*nodes, ",")
				}
				if *labels != "" {
					sel.Labels = map[string]string{}
					for _, kv := range strings.Split(*labels, ",") {
						k, v, ok := strings.Cut(kv, "=")
						if !ok || k == "" {
							return clientOut{}, usageError{fmt.Errorf("--labels %q: want k=v,k2=v2", *labels)}
						}
						sel.Labels[k] = v
					}
				}
				return clientOut{}, watch(ctx, cl, sel, env.Stdout, env.Stderr)
			}
		}})
}

// watch prints the stream a client.Watch follows; the view reconnects and
// resumes by itself.
func watch(ctx context.Context, cl *client.Client, sel client.Selector, out, errw io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	view := cl.Watch(ctx, sel,
		client.WithEventHook(func(ev *llmdiagv1.StreamHealthResponse) { printEvent(out, ev) }),
		client.WithRetryHook(func(err error, wait time.Duration) {
			fmt.Fprintf(errw, "stream ended (%v); reconnecting in %s\n", errOrEOF(err), wait.Round(time.Millisecond))
		}))
	select {
	case <-ctx.Done():
		<-view.Done()
		return nil
	case <-view.Done():
		if ctx.Err() != nil {
			return nil
		}
		return view.Err()
	}
}

func errOrEOF(err error) error {
	if err == nil {
		return errors.New("server closed the stream")
	}
	return err
}

func printEvent(w io.Writer, ev *llmdiagv1.StreamHealthResponse) {
	ts := ev.GetSentAt().AsTime().Local().Format("15:04:05")
	h := ev.GetHealth()
	switch ev.GetKind() {
	case llmdiagv1.EventKind_EVENT_KIND_SYNCED:
		fmt.Fprintf(w, "%s  -- current state above; changes follow --\n", ts)
	case llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT:
	default:
		kind := "now"
		if ev.GetKind() == llmdiagv1.EventKind_EVENT_KIND_CHANGE {
			kind = "change"
		}
		fmt.Fprintf(w, "%s  %-6s %-20s %-12s %-8s %-14s routable=%-5v score=%.2f age=%s\n", ts, kind, h.GetNode(), h.GetModel(),
			enumWord(h.GetStatus().String(), "STATUS_"), enumWord(h.GetRootCause().String(), "CAUSE_"), h.GetRoutable(), h.GetLoadScore(), dur(h.GetStaleness()))
	}
}

func enumWord(s, prefix string) string { return strings.TrimPrefix(s, prefix) }

func dur(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return d.AsDuration().Round(100 * time.Millisecond).String()
}

func percentile(p *llmdiagv1.Percentile) string {
	return fmt.Sprintf("p%s=%s (%s–%s)", strconv.FormatFloat(p.GetQuantile()*100, 'f', -1, 64), human.Seconds(p.GetValue()), human.Seconds(p.GetLowerBound()), human.Seconds(p.GetUpperBound()))
}

func gauge(v *float64, unit string) string {
	if v == nil {
		return "unknown"
	}
	if unit == "%" {
		return fmt.Sprintf("%.1f%%", *v*100)
	}
	return strconv.FormatFloat(math.Round(*v*100)/100, 'f', -1, 64) + unit
}
