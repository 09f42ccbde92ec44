package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
	"go.yaml.in/yaml/v3"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/promrules"
	"github.com/llmdiag/llmdiag/source/prom"
)

// loadThresholds reads a thresholds file (diagnose.LoadThresholds); "" is
// the defaults. A bad file is a usage error naming the file and the key.
func loadThresholds(path string) (diagnose.Thresholds, error) {
	th, _, err := loadThresholdsKeys(path)
	return th, err
}

// loadThresholdsKeys is loadThresholds that also tells which keys the file
// sets.
func loadThresholdsKeys(path string) (diagnose.Thresholds, map[string]bool, error) {
	if path == "" {
		return diagnose.DefaultThresholds(), nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return diagnose.Thresholds{}, nil, usageError{fmt.Errorf("--thresholds: %w", err)}
	}
	th, err := diagnose.LoadThresholds(bytes.NewReader(b))
	if err != nil {
		return diagnose.Thresholds{}, nil, usageError{fmt.Errorf("--thresholds %s: %w", path, err)}
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return diagnose.Thresholds{}, nil, usageError{fmt.Errorf("--thresholds %s: %w", path, err)}
	}
	keys := make(map[string]bool, len(doc))
	for k := range doc {
		keys[k] = true
	}
	return th, keys, nil
}

func thresholdsCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag thresholds", flag.ContinueOnError)
	file := fs.String("thresholds", "", "print the thresholds of this file (keys it leaves out at their defaults) instead of the defaults")
	return &ffcli.Command{
		Name:       "thresholds",
		ShortUsage: "llmdiag thresholds [--thresholds FILE] > thresholds.yaml",
		ShortHelp:  "print the verdict thresholds as a commented YAML file",
		LongHelp: strings.TrimSpace(`
Print every threshold the verdicts compare against, as the YAML file that
serve --thresholds and rules --thresholds read, each key with a comment
saying what it does and where its default comes from. Edit the copy, keep
only the keys you change if you like (the others keep their defaults):

  llmdiag thresholds > t.yaml
  llmdiag serve --thresholds t.yaml ...
  llmdiag rules --thresholds t.yaml > llmdiag-rules.yaml`),
		FlagSet: fs,
		Exec: withEnv(fs, env, func(_ context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			th, err := loadThresholds(*file)
			if err != nil {
				return err
			}
			return diagnose.WriteThresholds(env.Stdout, th)
		}),
	}
}

// enginesFlag collects --engine values, repeatable or comma-separated.
type enginesFlag []llmdiagv1.Engine

func (e *enginesFlag) String() string { return fmt.Sprint(len(*e), " engines") }

func (e *enginesFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		en, err := fleet.ParseEngine(s)
		if err != nil {
			return err
		}
		if en == llmdiagv1.Engine_ENGINE_UNSPECIFIED {
			return errors.New("empty engine name")
		}
		*e = append(*e, en)
	}
	return nil
}

func rulesCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag rules", flag.ContinueOnError)
	file := fs.String("thresholds", "", "thresholds file (YAML, see llmdiag thresholds); default: the built-in defaults")
	window := metrics.DefaultWindow
	fs.Var(&window, "window", "rate window of counters and histograms, as serve --window")
	nodeLabel := fs.String("node-label", prom.DefaultNodeLabel, "label that identifies a node, as serve --node-label")
	modelLabels := fs.String("model-label", strings.Join(prom.DefaultModelLabels(), ","), "labels that may carry the served model, in order of preference, as serve --model-label")
	history := fs.Duration("history", 10*time.Minute, "span over which sustained queueing is measured (serve keeps --history 120 refreshes at --interval 5s: 10m)")
	lookback := fs.Duration("lookback", 10*time.Minute, "how long a node that stopped reporting counts as down (llmdiag's lookback)")
	runbookBase := fs.String("runbook-base-url", promrules.DefaultRunbookBaseURL, "llmdiag's external URL, as people reach it: each alert's runbook_url is <this>/runbooks/<cause> (the default is serve's default --listen, good on that machine only)")
	var engines enginesFlag
	fs.Var(&engines, "engine", "engine to write rules for: vllm, sglang, trtllm, triton, tgi or dynamo; repeatable or comma-separated (default all)")
	return &ffcli.Command{
		Name:       "rules",
		ShortUsage: "llmdiag rules [--thresholds FILE] [--window 5m] [--node-label instance] [--engine NAME ...] [--runbook-base-url URL] > llmdiag-rules.yaml",
		ShortHelp:  "write llmdiag's indicators and thresholds as Prometheus recording and alerting rules",
		LongHelp: strings.TrimSpace(`
Write a Prometheus rule file to stdout: recording rules computing llmdiag's
per-node indicators with the same PromQL llmdiag runs against Prometheus
(llmdiag:queue, llmdiag:running, llmdiag:kv_pressure,
llmdiag:preemptions:rate5m, llmdiag:ttft_seconds:p99, llmdiag:e2e_seconds:p99,
llmdiag:inter_token_seconds:p99, llmdiag:queue_running_ratio, …, keyed by the
node label, model and engine), and alerting rules comparing them with the
thresholds, so that an alert fires exactly when a verdict turns WARN
(severity warning) or CRIT (severity critical). Each alert is labelled with
the indicator (llmdiag_indicator) and threshold keys (llmdiag_threshold) it
mirrors. Use the same --thresholds, --window and --node-label as serve.

Each alert's runbook_url annotation links to the runbook llmdiag serves at
<--runbook-base-url>/runbooks/<cause>: the alert's llmdiag_cause, else the
cause its indicator leads to (the rule file's header lists the mapping).

When the thresholds file lists SLOs (slos:, see docs/slo.md), it also
writes, per SLO, the bucket rates of its latency histogram and its burn
rate over 5m, 30m, 1h and 6h (llmdiag:slo_ttft_seconds_bucket:rate1h,
llmdiag:slo_burn_rate:rate1h{slo="ttft-2s"}, …) and the multi-window
burn-rate alerts LLMDiagSLOBurnFast (critical: 1h and 5m) and
LLMDiagSLOBurn (warning: 6h and 30m), labelled llmdiag_slo; they fire
exactly when the SLO finding is CRIT or WARN. Without SLOs none is written.

  llmdiag rules > llmdiag-rules.yaml && promtool check rules llmdiag-rules.yaml
  llmdiag rules --thresholds t.yaml > llmdiag-rules.yaml   # with t.yaml's SLOs
  llmdiag rules --runbook-base-url https://llmdiag.example.com > llmdiag-rules.yaml`),
		FlagSet: fs,
		Exec: withEnv(fs, env, func(_ context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			th, err := loadThresholds(*file)
			if err != nil {
				return err
			}
			if window.Duration() <= 0 || *history <= 0 || *lookback <= 0 {
				return usageError{errors.New("--window, --history and --lookback must be positive")}
			}
			var models []string
			for _, l := range strings.Split(*modelLabels, ",") {
				if l = strings.TrimSpace(l); l != "" {
					models = append(models, l)
				}
			}
			err = promrules.Write(env.Stdout, promrules.Config{
				Thresholds: th, Engines: engines, NodeLabel: *nodeLabel, ModelLabels: models,
				Window: window.Duration(), History: *history, Lookback: *lookback, RunbookBaseURL: *runbookBase,
			})
			if err != nil {
				return usageError{err}
			}
			return nil
		}),
	}
}
