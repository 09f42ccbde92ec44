package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// Env is what the commands take from the process.
type Env struct {
	Getenv func(string) string
	// Stdin is what `llmdiag mcp` reads the protocol from; nil: the
	// process's standard input.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// usageError marks errors in the command line itself (exit code 2).
type usageError struct{ error }

// ExitCode maps an error returned by Run to a process exit code: 0 for none
// or --help, 2 for a bad command line, 1 otherwise.
func ExitCode(err error) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// Run parses args and runs the chosen command until it ends or ctx is done.
func Run(ctx context.Context, args []string, env Env) error {
	global := flag.NewFlagSet("llmdiag", flag.ContinueOnError)
	cf := &clientFlags{root: global}
	cf.bind(global)
	root := &ffcli.Command{
		Name:       "llmdiag",
		ShortUsage: "llmdiag [--addr URL] [--token T] <command> [flags] [args]",
		ShortHelp:  "diagnose LLM inference fleets from their Prometheus metrics",
		LongHelp: strings.TrimSpace(`
llmdiag reads the Prometheus metrics of LLM inference servers (vLLM, SGLang),
turns them into the indicators an SRE reads off a dashboard (TTFT and E2E
percentiles with their bucket bounds, queue, running, KV-cache pressure,
prompt and generation token rates) and answers: is this node healthy, and if
not, why?

Start the service against the simulated fleet:
  llmdiag sim --scenario seed --fleet-out /tmp/fleet.yaml &
  llmdiag serve --fleet /tmp/fleet.yaml
Then ask it:
  llmdiag nodes
  llmdiag diagnose deepseek-v4-0 --lang zh

The flags below (--addr, --protocol, --token, --timeout, --ca, --cert,
--key) are those of the client commands (nodes, metrics, history, diagnose,
compare, watch, bench, mcp), and may come before or after the command name:
  llmdiag --addr http://llmdiag.example:8080 diagnose deepseek-v4-0
  llmdiag diagnose deepseek-v4-0 --addr http://llmdiag.example:8080
  llmdiag --addr https://llmdiag.example:8443 --ca ca.pem nodes

Every flag has an environment equivalent: LLMDIAG_ plus the flag name in
capitals with - as _ (for example LLMDIAG_LISTEN=127.0.0.1:9090, or
LLMDIAG_ADDR for the service the client commands ask). A flag given on the
command line wins over the environment.`),
		Subcommands: []*ffcli.Command{
			serveCommand(env),
			simCommand(env),
			nodesCommand(env, cf),
			metricsCommand(env, cf),
			historyCommand(env, cf),
			diagnoseCommand(env, cf),
			compareCommand(env, cf),
			watchCommand(env, cf),
			benchCommand(env, cf),
			loadgenCommand(env),
			mcpCommand(env, cf),
			thresholdsCommand(env),
			rulesCommand(env),
			dashboardCommand(env),
		},
		Exec: func(_ context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q; run llmdiag --help", args[0])}
			}
			return flag.ErrHelp
		},
	}
	root.FlagSet = global
	for _, c := range append([]*ffcli.Command{root}, root.Subcommands...) {
		c.FlagSet.SetOutput(env.Stderr)
		if c.UsageFunc == nil {
			c.UsageFunc = ffcli.DefaultUsageFunc
		}
	}
	if err := root.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{misplaced(err, root)}
	}
	if err := globalsFit(root); err != nil {
		return err
	}
	err := root.Run(ctx)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(env.Stderr, ffcli.DefaultUsageFunc(root))
	}
	return err
}

// globalsFit rejects client flags given before a command that does not
// take them (llmdiag --addr URL serve): they would be silently ignored.
func globalsFit(root *ffcli.Command) error {
	var given []string
	root.FlagSet.Visit(func(f *flag.Flag) { given = append(given, "--"+f.Name) })
	if len(given) == 0 || root.FlagSet.NArg() == 0 {
		return nil
	}
	name := root.FlagSet.Arg(0)
	for _, c := range root.Subcommands {
		if strings.EqualFold(c.Name, name) && c.FlagSet.Lookup("addr") == nil {
			what := "a flag"
			if len(given) > 1 {
				what = "flags"
			}
			return usageError{fmt.Errorf("%s: %s of the client commands (%s), which %s does not take", strings.Join(given, ", "), what, strings.Join(clientCommandNames(root), ", "), c.Name)}
		}
	}
	return nil
}

// clientCommandNames are the subcommands of root that take the client flags.
func clientCommandNames(root *ffcli.Command) []string {
	var names []string
	for _, c := range root.Subcommands {
		if c.FlagSet.Lookup("addr") != nil {
			names = append(names, c.Name)
		}
	}
	return names
}

// misplaced adds to a parse error of the global flags, when it names a flag
// only some commands define (llmdiag --lang zh diagnose NODE), that the flag
// belongs after the command name.
func misplaced(err error, root *ffcli.Command) error {
	const undefined = "flag provided but not defined: -"
	msg := err.Error()
	i := strings.Index(msg, undefined)
	if i < 0 {
		return err
	}
	name := strings.TrimPrefix(msg[i+len(undefined):], "-")
	var owners []string
	for _, c := range root.Subcommands {
		if c.FlagSet.Lookup(name) != nil {
			owners = append(owners, c.Name)
		}
	}
	if len(owners) == 0 {
		return fmt.Errorf("%w (the flags before a command are %s; run llmdiag --help)", err, globalNames(root.FlagSet))
	}
	return fmt.Errorf("%w: --%s is a flag of %s, to give after the command name (llmdiag %s … --%s …)", err, name, strings.Join(owners, ", "), owners[0], name)
}

// globalNames lists the flags of fs as --name, comma-separated.
func globalNames(fs *flag.FlagSet) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
	return strings.Join(names, ", ")
}

// noArgs rejects positional arguments for commands that take none.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", args)}
	}
	return nil
}

// applyEnv sets every flag of fs not given on the command line (on fs, or on
// one of also: the root command's flags, bound to the same values) from
// LLMDIAG_<NAME> when that variable is set.
func applyEnv(fs *flag.FlagSet, getenv func(string) string, also ...*flag.FlagSet) error {
	set := map[string]bool{}
	for _, s := range append([]*flag.FlagSet{fs}, also...) {
		s.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || getenv == nil {
			return
		}
		key := "LLMDIAG_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(key); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, usageError{fmt.Errorf("%s=%q: %w", key, v, err)})
			}
		}
	})
	return errors.Join(errs...)
}

// withEnv wraps a command's Exec so environment variables are applied first
// to the flags given neither on fs nor on also.
func withEnv(fs *flag.FlagSet, env Env, exec func(context.Context, []string) error, also ...*flag.FlagSet) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if err := applyEnv(fs, env.Getenv, also...); err != nil {
			return err
		}
		return exec(ctx, args)
	}
}

// logConfig is --log-level and --log-format.
type logConfig struct{ level, format string }

// register defines --log-level and --log-format on fs, filling l.
func (l *logConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
}

// logger is the logger asked for, writing to w.
func (l logConfig) logger(w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level: %w", err)}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError{fmt.Errorf("--log-format %q: want text or json", l.format)}
}

// logFlags adds --log-level and --log-format and returns a constructor.
func logFlags(fs *flag.FlagSet) func(io.Writer) (*slog.Logger, error) {
	l := &logConfig{}
	l.register(fs)
	return func(w io.Writer) (*slog.Logger, error) { return l.logger(w) }
}

// interspersed parses flags that follow positional arguments (`diagnose NODE
// --lang zh`), which the flag package leaves unparsed, and returns the
// positional arguments alone.
func interspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		if !strings.HasPrefix(args[0], "-") || args[0] == "-" {
			pos, args = append(pos, args[0]), args[1:]
			continue
		}
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err}
		}
		args = fs.Args()
	}
	return pos, nil
}
