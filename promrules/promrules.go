package promrules

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmdiag/llmdiag/auth"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/runbook"
	"github.com/llmdiag/llmdiag/source/prom"
)

// Config says what to write. Zero values take the defaults shown.
type Config struct {
	// Thresholds are the limits the alerts compare against; they must pass
	// Validate.
	Thresholds diagnose.Thresholds
	// Engines to write rules for (default every engine of the mapping
	// table, in its order).
	Engines []llmdiagv1.Engine
	// NodeLabel identifies a node (default prom.DefaultNodeLabel, as
	// serve's --node-label).
	NodeLabel string
	// ModelLabels may carry the model after the engine's own label
	// (default prom.DefaultModelLabels, as serve's --model-label).
	ModelLabels []string
	// Window is the rate range of counters and histograms (default
	// metrics.DefaultWindow, as serve's --window).
	Window time.Duration
	// History is the span over which the sustained-queue alert measures the
	// share of time queueing (default 10m: serve keeps --history 120
	// refreshes at --interval 5s).
	History time.Duration
	// Lookback is how long a node that stopped reporting counts as down
	// (default 10m, as source/prom).
	Lookback time.Duration
	// GroupName is the rule group's name (default "llmdiag").
	GroupName string
	// RunbookBaseURL is llmdiag's external URL, which every alert's
	// runbook_url annotation starts with: <base>/runbooks/<slug> (default
	// DefaultRunbookBaseURL). An absolute http or https URL, which may have a
	// path (behind a proxy), but no query or fragment.
	RunbookBaseURL string
}

// DefaultRunbookBaseURL is Config.RunbookBaseURL's default: serve's default
// --listen address, right for a look on the machine llmdiag runs on and
// for nothing else; pass the URL people reach llmdiag at.
const DefaultRunbookBaseURL = "http://127.0.0.1:8080"

// The recording rules. Per-engine records carry the label engine.
const (
	RecordModelInfo    = "llmdiag:node_model_info"
	RecordQueue        = "llmdiag:queue"
	RecordRunning      = "llmdiag:running"
	RecordKVPressure   = "llmdiag:kv_pressure"
	RecordTTFTP99      = "llmdiag:ttft_seconds:p99"
	RecordE2EP99       = "llmdiag:e2e_seconds:p99"
	RecordITLP99       = "llmdiag:inter_token_seconds:p99"
	RecordNodeDown     = "llmdiag:node_down"
	RecordRatio        = "llmdiag:queue_running_ratio"
	RecordQueueing     = "llmdiag:queueing"
	recordPreemptsBase = "llmdiag:preemptions:rate" // + window, e.g. rate5m
)

// RecordPreemptions is the name of the preemption-rate record over window.
func RecordPreemptions(window time.Duration) string {
	return recordPreemptsBase + model.Duration(window).String()
}

// RecordPromptTokens is the name of the prompt-token rate record (tokens
// per second) over window, e.g. llmdiag:prompt_tokens:rate5m.
func RecordPromptTokens(window time.Duration) string {
	return "llmdiag:prompt_tokens:rate" + model.Duration(window).String()
}

// RecordGenerationTokens is the name of the generation-token rate record
// (tokens per second) over window, e.g. llmdiag:generation_tokens:rate5m.
func RecordGenerationTokens(window time.Duration) string {
	return "llmdiag:generation_tokens:rate" + model.Duration(window).String()
}

// RecordLatencyBuckets is the name of the bucket-rate record (per node,
// model and le) of a latency histogram over window, the argument of
// histogram_quantile for any percentile: the P99 records are
// histogram_quantile(0.99, …) of the same buckets. E.g.
// llmdiag:ttft_seconds_bucket:rate5m.
func RecordLatencyBuckets(metric diagnose.SLOMetric, window time.Duration) string {
	return "llmdiag:" + string(metric) + "_seconds_bucket:rate" + model.Duration(window).String()
}

// Labels and label values the rules write.
const (
	// LabelEngine is the engine label of every per-engine record.
	LabelEngine = "engine"
	// LabelModel is the model label the records carry
	// (prom.RuleExprs.Model).
	LabelModel = "model"
	// LabelSeverity is every alert's severity label: SeverityCritical or
	// SeverityWarning.
	LabelSeverity = "severity"
	// LabelIndicator is every alert's llmdiag indicator label.
	LabelIndicator = "llmdiag_indicator"
	// LabelThreshold lists the threshold keys an alert reads.
	LabelThreshold = "llmdiag_threshold"
	// LabelCause is the root cause an alert names, where it names one.
	LabelCause = "llmdiag_cause"

	SeverityCritical = "critical" // a CRIT finding or a DOWN node
	SeverityWarning  = "warning"  // a WARN finding
)

// File is a Prometheus rule file.
type File struct {
	Groups []Group `yaml:"groups"`
}

// Group is a rule group.
type Group struct {
	Name  string `yaml:"name"`
	Rules []Rule `yaml:"rules"`
}

// Rule is a recording (Record) or alerting (Alert) rule.
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

func (c *Config) defaults() {
	if len(c.Engines) == 0 {
		c.Engines = engine.Engines()
	}
	if c.NodeLabel == "" {
		c.NodeLabel = prom.DefaultNodeLabel
	}
	if c.Window <= 0 {
		c.Window = metrics.DefaultWindow.Duration()
	}
	if c.History <= 0 {
		c.History = 10 * time.Minute
	}
	if c.Lookback <= 0 {
		c.Lookback = 10 * time.Minute
	}
	if c.GroupName == "" {
		c.GroupName = "llmdiag"
	}
	if c.RunbookBaseURL == "" {
		c.RunbookBaseURL = DefaultRunbookBaseURL
	}
}

// runbookBase checks raw as Config.RunbookBaseURL and returns it without a
// trailing slash. Errors show raw redacted: a base URL has no business
// carrying a password, but one given by mistake stays out of logs.
func runbookBase(raw string) (string, error) {
	shown := strconv.Quote(redact.URL(raw))
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("runbook base URL %s: not a URL", shown)
	case u.User != nil:
		return "", fmt.Errorf("runbook base URL %s: no user information allowed (alerts are shown to everyone who sees them)", shown)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("runbook base URL %s: want an http:// or https:// URL", shown)
	case u.Host == "":
		return "", fmt.Errorf("runbook base URL %s: no host", shown)
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, "?#"):
		return "", fmt.Errorf("runbook base URL %s: no query or fragment allowed (the runbook path follows it)", shown)
	case strings.ContainsAny(raw, "{}\"' \t\r\n"):
		return "", fmt.Errorf("runbook base URL %s: braces, quotes and white space are not allowed (Prometheus expands annotations as templates)", shown)
	}
	return strings.TrimRight(raw, "/"), nil
}

// runbookURL is the runbook_url annotation of an alert that leads to cause c.
func runbookURL(base string, c llmdiagv1.Cause) string {
	return base + strings.TrimSuffix(auth.RunbooksPrefix, "/") + "/" + runbook.Slug(c)
}

// Build returns the rule file of cfg and the notes on where its PromQL
// approximates a refresh.
func Build(cfg Config) (*File, []string, error) {
	cfg.defaults()
	t := cfg.Thresholds
	if err := t.Validate(); err != nil {
		return nil, nil, err
	}
	base, err := runbookBase(cfg.RunbookBaseURL)
	if err != nil {
		return nil, nil, err
	}
	cfg.RunbookBaseURL = base
	g := Group{Name: cfg.GroupName}
	var notes []string
	node := cfg.NodeLabel
	for _, e := range cfg.Engines {
		name := fleet.EngineName(e)
		if name == "" {
			return nil, nil, fmt.Errorf("engine %v: unknown", e)
		}
		x, err := prom.RuleExpressions(e, prom.RuleConfig{
			NodeLabel: node, ModelLabels: cfg.ModelLabels, Window: cfg.Window, Lookback: cfg.Lookback,
		})
		if err != nil {
			return nil, nil, err
		}
		for _, n := range x.Notes {
			notes = append(notes, name+": "+n)
		}
		labels := map[string]string{LabelEngine: name}
		g.Rules = append(g.Rules, Rule{Record: RecordModelInfo, Expr: x.Model, Labels: labels})
		info := RecordModelInfo + `{` + LabelEngine + `="` + name + `"}`
		withModel := func(record, expr string) {
			if expr == "" {
				return
			}
			g.Rules = append(g.Rules, Rule{
				Record: record,
				Expr:   "(" + expr + ") * on (" + node + ") group_left (" + LabelModel + ") " + info,
				Labels: labels,
			})
		}
		p99 := func(buckets string) string {
			if buckets == "" {
				return ""
			}
			return "histogram_quantile(0.99, " + buckets + ")"
		}
		withModel(RecordQueue, x.Queue)
		withModel(RecordRunning, x.Running)
		withModel(RecordKVPressure, x.KVPressure)
		withModel(RecordPreemptions(cfg.Window), x.Preemptions)
		withModel(RecordTTFTP99, p99(x.TTFTBuckets))
		withModel(RecordE2EP99, p99(x.E2EBuckets))
		withModel(RecordITLP99, p99(x.ITLBuckets))
		withModel(RecordPromptTokens(cfg.Window), x.PromptTokens)
		withModel(RecordGenerationTokens(cfg.Window), x.GenerationTokens)
		withModel(RecordLatencyBuckets(diagnose.SLOTTFT, cfg.Window), x.TTFTBuckets)
		withModel(RecordLatencyBuckets(diagnose.SLOE2E, cfg.Window), x.E2EBuckets)
		withModel(RecordLatencyBuckets(diagnose.SLOInterToken, cfg.Window), x.ITLBuckets)
		if x.Vanished != "" {
			g.Rules = append(g.Rules, Rule{Record: RecordNodeDown, Expr: x.Vanished, Labels: labels})
		}
		slo, err := sloBucketRecords(e, cfg, labels)
		if err != nil {
			return nil, nil, err
		}
		g.Rules = append(g.Rules, slo...)
	}
	g.Rules = append(g.Rules,
		Rule{
			Record: RecordRatio,
			Expr: "(" + RecordQueue + " / " + RecordRunning + " unless " + RecordQueue + " == 0) or (" +
				RecordQueue + " * 0 and " + RecordRunning + ")",
		},
		Rule{
			Record: RecordQueueing,
			Expr: "clamp_max((" + RecordQueue + " > bool " + num(t.QueueSaturated) + ") + (" +
				RecordRatio + " >= bool " + num(t.QueueRunningRatioCrit) + ") * (" + RecordQueue + " >= bool 1), 1) or (" +
				RecordQueue + " > bool " + num(t.QueueSaturated) + ")",
		},
	)
	g.Rules = append(g.Rules, alerts(cfg)...)
	g.Rules = append(g.Rules, sloRules(cfg)...) // slo.go
	return &File{Groups: []Group{g}}, notes, nil
}

// alert is one alerting rule and what it mirrors.
type alert struct {
	name, expr, forDur string
	severity           string
	indicator          string // the llmdiag indicator (proto enum name, lower case)
	thresholds         []string
	cause              string // llmdiag root cause, or ""
	// runbook is the cause whose runbook an alert without a cause links to:
	// the cause its indicator leads to (see Write); an alert with a cause
	// links to the cause's.
	runbook              llmdiagv1.Cause
	summary, description string
}

// LatencyRunbook is the cause whose runbook a latency alert links to, for
// the P99 alerts and the SLO burn alerts alike: TTFT leads to
// PREFILL_BOUND (rule 6 reads TTFT P99), E2E and inter-token latency to
// DECODE_BOUND (rules 7 and 7′ read them). The queue and KV causes explain
// every latency too, but they have alerts of their own, which fire with
// the latency's.
func LatencyRunbook(m diagnose.SLOMetric) llmdiagv1.Cause {
	if m == diagnose.SLOTTFT {
		return llmdiagv1.Cause_CAUSE_PREFILL_BOUND
	}
	return llmdiagv1.Cause_CAUSE_DECODE_BOUND
}

// alerts are the alerting rules, each mirroring a finding of diagnose.
func alerts(cfg Config) []Rule {
	t, node := cfg.Thresholds, cfg.NodeLabel
	secs := func(d time.Duration) string { return num(d.Seconds()) }
	who := "{{ $labels." + node + " }} ({{ $labels.engine }}, {{ $labels.model }})"
	pre := RecordPreemptions(cfg.Window)
	as := []alert{
		{
			name: "LLMDiagKVExhausted", expr: RecordKVPressure + " >= " + num(t.KVCrit), severity: SeverityCritical,
			indicator: "kv_pressure", thresholds: []string{"kv_crit"}, cause: "KV_EXHAUSTED",
			summary:     "KV cache nearly full on " + who,
			description: "KV pressure is {{ $value | humanizePercentage }}, at or above kv_crit (" + percent(t.KVCrit) + "): new requests wait for room or preempt running ones. llmdiag's KV finding is CRIT.",
		},
		{
			name: "LLMDiagKVPressureHigh", expr: RecordKVPressure + " >= " + num(t.KVWarn), severity: SeverityWarning, runbook: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED,
			indicator: "kv_pressure", thresholds: []string{"kv_warn"},
			summary:     "KV cache pressure high on " + who,
			description: "KV pressure is {{ $value | humanizePercentage }}, at or above kv_warn (" + percent(t.KVWarn) + "). llmdiag's KV finding is WARN (CRIT from kv_crit).",
		},
		{
			name: "LLMDiagPreemptionsHigh", expr: pre + " > " + num(t.PreemptionsPerSecond), severity: SeverityCritical,
			indicator: "preemptions", thresholds: []string{"preemptions_per_second"}, cause: "KV_EXHAUSTED",
			summary:     "Requests preempted on " + who,
			description: "{{ $value | humanize }} preemptions/s over " + model.Duration(cfg.Window).String() + ", above preemptions_per_second (" + num(t.PreemptionsPerSecond) + "): the KV cache is exhausted. llmdiag's preemption finding is CRIT.",
		},
		{
			name: "LLMDiagPreemptions", expr: pre + " > 0", severity: SeverityWarning, runbook: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED,
			indicator: "preemptions", thresholds: []string{"preemptions_per_second"},
			summary:     "Some requests preempted on " + who,
			description: "{{ $value | humanize }} preemptions/s over " + model.Duration(cfg.Window).String() + ": every preemption recomputes work. llmdiag's preemption finding is WARN (CRIT above preemptions_per_second, " + num(t.PreemptionsPerSecond) + ").",
		},
		{
			name: "LLMDiagQueueHigh", expr: RecordQueue + " > " + num(t.QueueCrit), forDur: model.Duration(t.QueueCritFor).String(), severity: SeverityCritical, runbook: llmdiagv1.Cause_CAUSE_OVERLOADED,
			indicator: "queue", thresholds: []string{"queue_crit", "queue_crit_for"},
			summary:     "Long queue on " + who,
			description: "{{ $value | humanize }} requests waiting, above queue_crit (" + num(t.QueueCrit) + ") for queue_crit_for (" + diagnose.ShortDuration(t.QueueCritFor) + "). llmdiag's queue finding is CRIT.",
		},
		{
			name: "LLMDiagQueueing", expr: RecordQueue + " > " + num(t.QueueSaturated), severity: SeverityWarning, runbook: llmdiagv1.Cause_CAUSE_BURST,
			indicator: "queue", thresholds: []string{"queue_saturated"},
			summary:     "Requests queueing on " + who,
			description: "{{ $value | humanize }} requests waiting, above queue_saturated (" + num(t.QueueSaturated) + "). llmdiag's queue finding is WARN.",
		},
		{
			name:     "LLMDiagOverloaded",
			runbook:  llmdiagv1.Cause_CAUSE_OVERLOADED,
			expr:     RecordQueueing + " == 1 and avg_over_time(" + RecordQueueing + "[" + model.Duration(cfg.History).String() + "]) >= " + num(t.SustainedFraction),
			severity: SeverityCritical, indicator: "queue_running_ratio",
			thresholds: []string{"queue_running_ratio_crit", "queue_saturated", "sustained_fraction"},
			summary:    "Sustained queueing on " + who,
			description: "The node is queueing (queue above queue_saturated, " + num(t.QueueSaturated) + ", or queue/running at or above queue_running_ratio_crit, " +
				num(t.QueueRunningRatioCrit) + ") now and for at least sustained_fraction (" + num(t.SustainedFraction) + ") of the last " +
				model.Duration(cfg.History).String() + ". llmdiag's queue/running finding is CRIT. (Its OVERLOADED verdict is timed on the queue itself: saturated for overloaded_after without draining.)",
		},
		{
			name:     "LLMDiagQueueRunningRatioHigh",
			runbook:  llmdiagv1.Cause_CAUSE_BURST,
			expr:     RecordRatio + " >= " + num(t.QueueRunningRatioWarn) + " or (" + RecordRatio + " and " + RecordQueueing + " == 1)",
			severity: SeverityWarning, indicator: "queue_running_ratio",
			thresholds:  []string{"queue_running_ratio_warn", "queue_running_ratio_crit", "queue_saturated"},
			summary:     "Queue/running ratio high on " + who,
			description: "Queue/running is {{ $value | humanize }}, at or above queue_running_ratio_warn (" + num(t.QueueRunningRatioWarn) + "), or the node is queueing. llmdiag's queue/running finding is WARN (a burst until it is sustained).",
		},
		{
			name: "LLMDiagTargetDown", expr: RecordNodeDown, severity: SeverityCritical,
			indicator: "scrape", cause: "TARGET_DOWN",
			summary:     "Inference node {{ $labels." + node + " }} ({{ $labels.engine }}) is down",
			description: "The node exported " + "{{ $labels.engine }} metrics within the last " + model.Duration(cfg.Lookback).String() + " and exports none now: target down (up == 0) or no longer exporting. llmdiag's verdict is DOWN. After " + model.Duration(cfg.Lookback).String() + " llmdiag forgets the node; keep a generic up == 0 alert for longer outages.",
		},
	}
	as = append(as, xidAlerts(t)...)
	// The latency P99s are graded alike: warning at _warn, critical at _crit.
	for _, l := range []struct {
		name, record, indicator, key, what, finding string
		warn, crit                                  time.Duration
		runbook                                     llmdiagv1.Cause
	}{
		{"TTFTP99", RecordTTFTP99, "ttft_p99", "ttft_p99", "Time to first token P99", "TTFT", t.TTFTP99Warn, t.TTFTP99Crit, LatencyRunbook(diagnose.SLOTTFT)},
		{"E2EP99", RecordE2EP99, "e2e_p99", "e2e_p99", "End-to-end latency P99", "E2E", t.E2EP99Warn, t.E2EP99Crit, LatencyRunbook(diagnose.SLOE2E)},
		{"InterTokenP99", RecordITLP99, "inter_token", "itl_p99", "Inter-token latency P99", "inter-token", t.ITLP99Warn, t.ITLP99Crit, LatencyRunbook(diagnose.SLOInterToken)},
	} {
		for _, g := range []struct {
			suffix, severity, key, level, grade string
			at                                  time.Duration
		}{
			{"Critical", SeverityCritical, l.key + "_crit", "critical", "CRIT", l.crit},
			{"High", SeverityWarning, l.key + "_warn", "high", "WARN", l.warn},
		} {
			as = append(as, alert{
				name: "LLMDiag" + l.name + g.suffix, expr: l.record + " >= " + secs(g.at), severity: g.severity, runbook: l.runbook,
				indicator: l.indicator, thresholds: []string{g.key},
				summary:     l.what + " " + g.level + " on " + who,
				description: l.what + " is {{ $value | humanizeDuration }}, at or above " + g.key + " (" + diagnose.ShortDuration(g.at) + "). llmdiag's " + l.finding + " finding is " + g.grade + ".",
			})
		}
	}
	out := make([]Rule, len(as))
	for i, a := range as {
		labels := map[string]string{LabelSeverity: a.severity, LabelIndicator: a.indicator}
		if len(a.thresholds) > 0 {
			labels[LabelThreshold] = strings.Join(a.thresholds, ",")
		}
		rb := a.runbook
		if a.cause != "" {
			labels[LabelCause] = a.cause
			rb = llmdiagv1.Cause(llmdiagv1.Cause_value["CAUSE_"+a.cause])
		}
		out[i] = Rule{
			Alert: a.name, Expr: a.expr, For: a.forDur, Labels: labels,
			Annotations: map[string]string{"summary": a.summary, "description": a.description, "runbook_url": runbookURL(cfg.RunbookBaseURL, rb)},
		}
	}
	return out
}

// Write writes the rule file of cfg as YAML, after a comment header.
func Write(w io.Writer, cfg Config) error {
	f, notes, err := Build(cfg)
	if err != nil {
		return err
	}
	cfg.defaults()
	var b strings.Builder
	b.WriteString("# Prometheus rules generated by `llmdiag rules`: llmdiag's per-node indicators\n" +
		"# (recording rules, the PromQL llmdiag itself runs) and its thresholds as alerts,\n" +
		"# so that alerts and verdicts agree. Regenerate rather than edit.\n" +
		"# Window " + model.Duration(cfg.Window).String() + ", node label " + cfg.NodeLabel + ".\n" +
		"# Every alert's runbook_url is the runbook llmdiag serves at " + strings.TrimRight(cfg.RunbookBaseURL, "/") + auth.RunbooksPrefix + "<cause>\n" +
		"# (--runbook-base-url): the cause in llmdiag_cause where the alert carries one, else\n" +
		"# the cause its indicator leads to: KV pressure and preemptions kv-exhausted,\n" +
		"# queueing and queue/running burst (a saturated queue is a burst until it lasts\n" +
		"# overloaded_after), a long queue and sustained queueing overloaded, TTFT P99 and\n" +
		"# TTFT SLO burn prefill-bound, E2E and inter-token P99 and their SLO burn\n" +
		"# decode-bound. When llmdiag's verdict names another cause, follow its runbook.\n")
	if len(notes) > 0 {
		b.WriteString("# Where the PromQL approximates what llmdiag computes in Go:\n")
		for _, n := range notes {
			b.WriteString("#   - " + n + "\n")
		}
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// num writes a threshold as PromQL reads it.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// percent writes a fraction as a percentage.
func percent(v float64) string { return strconv.FormatFloat(v*100, 'g', -1, 64) + "%" }

// The DCGM exporter's XID series: the last XID per GPU, and its opt-in
// counter per GPU and XID.
const (
	dcgmXID      = "DCGM_FI_DEV_XID_ERRORS"
	dcgmXIDTotal = "DCGM_EXP_XID_ERRORS_TOTAL"
)

// xidAlerts mirror the GPU XID finding: they fire on an XID that
// occurred within gpu_xid_window (the last XID changed, or its counter
// rose), never on the value alone, which DCGM keeps until the exporter
// restarts. Critical for the XIDs NVIDIA's XID catalogue says need a GPU
// reset or a reboot (the finding CRIT, the node not routable), warning
// for the others but the informational ones. A value the exporter already
// held when Prometheus first scraped it has not changed, and fires
// nothing: as llmdiag's first read, it may be old.
func xidAlerts(t diagnose.Thresholds) []alert {
	w := model.Duration(t.GPUXIDWindow).String()
	crit := diagnose.XIDCodes(llmdiagv1.Status_STATUS_CRIT)
	quiet := append(slices.Clone(crit), diagnose.XIDCodes(llmdiagv1.Status_STATUS_OK)...)
	slices.Sort(quiet)
	changed := dcgmXID + " > 0 and changes(" + dcgmXID + "[" + w + "]) > 0"
	where := "GPU {{ $labels.gpu }} of {{ $labels.Hostname }} ({{ $labels.instance }})"
	return []alert{
		{
			name:     "LLMDiagGPUXIDFault",
			expr:     "(" + changed + " and " + valueIn(dcgmXID, crit) + ") or increase(" + dcgmXIDTotal + `{xid=~"` + joinCodes(crit) + `"}[` + w + "]) > 0",
			severity: SeverityCritical, indicator: "gpu_xid", thresholds: []string{"gpu_xid_window"}, runbook: llmdiagv1.Cause_CAUSE_UNEXPLAINED,
			summary: "GPU fault (XID) on " + where,
			description: "The GPU reported, within gpu_xid_window (" + diagnose.ShortDuration(t.GPUXIDWindow) + "), an XID that NVIDIA's XID catalogue says needs a GPU reset or a reboot " +
				"(the last XID changed, or DCGM_EXP_XID_ERRORS_TOTAL rose): drain the node. llmdiag's GPU XID finding is CRIT and the node not routable.",
		},
		{
			name:     "LLMDiagGPUXID",
			expr:     "(" + changed + " unless " + valueIn(dcgmXID, quiet) + ") or increase(" + dcgmXIDTotal + `{xid!~"` + joinCodes(quiet) + `"}[` + w + "]) > 0",
			severity: SeverityWarning, indicator: "gpu_xid", thresholds: []string{"gpu_xid_window"}, runbook: llmdiagv1.Cause_CAUSE_UNEXPLAINED,
			summary: "GPU XID on " + where,
			description: "The GPU reported, within gpu_xid_window (" + diagnose.ShortDuration(t.GPUXIDWindow) + "), an XID that the application's own GPU work causes, or one NVIDIA's XID catalogue does not list. " +
				"llmdiag's GPU XID finding is WARN; the node stays routable.",
		},
	}
}

// valueIn selects the series of metric whose value is one of codes.
func valueIn(metric string, codes []uint32) string {
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = metric + " == " + strconv.FormatUint(uint64(c), 10)
	}
	return "(" + strings.Join(parts, " or ") + ")"
}

// joinCodes is codes as a regular expression's alternatives.
func joinCodes(codes []uint32) string {
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = strconv.FormatUint(uint64(c), 10)
	}
	return strings.Join(parts, "|")
}
