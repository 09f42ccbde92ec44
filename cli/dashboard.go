package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/llmdiag/llmdiag/dashboard"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source/prom"
)

func dashboardCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag dashboard", flag.ContinueOnError)
	out := fs.String("out", "", "write the dashboard to this file instead of stdout")
	datasource := fs.String("datasource", "", "UID or name of the Prometheus data source the dashboard starts at (default: Grafana's default Prometheus)")
	nodeLabel := fs.String("node-label", prom.DefaultNodeLabel, "label that identifies a node, as rules --node-label")
	window := metrics.DefaultWindow
	fs.Var(&window, "window", "rate window of the recording rules, as rules --window (it is part of their names)")
	file := fs.String("thresholds", "", "thresholds file (YAML, see llmdiag thresholds) whose warn and crit values the panels draw as lines; default: the built-in defaults")
	title := fs.String("title", "llmdiag fleet", "dashboard title")
	uid := fs.String("uid", "llmdiag-fleet", "dashboard UID (importing again replaces the dashboard of this UID)")
	return &ffcli.Command{
		Name:       "dashboard",
		ShortUsage: "llmdiag dashboard [--out FILE] [--datasource UID-or-name] [--node-label instance] [--window 5m] [--thresholds FILE] > llmdiag-dashboard.json",
		ShortHelp:  "write a Grafana dashboard of the fleet built on the rules of llmdiag rules",
		LongHelp: strings.TrimSpace(`
Write a Grafana dashboard (JSON, for Dashboards › New › Import) whose fleet
panels read the recording and alerting rules ` + "`llmdiag rules`" + ` writes, so
they show what the verdicts use: status by node and model (the firing
llmdiag alerts, DOWN nodes), queue, running, queue/running, KV pressure,
preemptions and token rates, TTFT, end-to-end and inter-token latency
P50/P95/P99, and llmdiag's own RPC, refresh, node and (with --redis) lease
metrics. Template variables pick the data source, models and nodes.

Load the rules into the Prometheus the dashboard reads, and pass the same
--node-label and --window as to rules (the window is part of the records'
names):

  llmdiag rules --window 5m > llmdiag-rules.yaml
  llmdiag dashboard --window 5m --datasource prometheus --out llmdiag-dashboard.json`),
		FlagSet: fs,
		Exec: withEnv(fs, env, func(_ context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			th, err := loadThresholds(*file)
			if err != nil {
				return err
			}
			if window.Duration() <= 0 {
				return usageError{errors.New("--window must be positive")}
			}
			var b bytes.Buffer
			err = dashboard.Write(&b, dashboard.Config{
				NodeLabel: *nodeLabel, Window: window.Duration(), Datasource: *datasource,
				Thresholds: &th, Title: *title, UID: *uid,
			})
			if err != nil {
				return usageError{err}
			}
			if *out == "" {
				_, err = env.Stdout.Write(b.Bytes())
				return err
			}
			if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			return nil
		}),
	}
}
