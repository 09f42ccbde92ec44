package promrules_test

import (
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/promrules"
	"github.com/llmdiag/llmdiag/sample"
)

// promtool returns the path of promtool, failing the test when it is
// missing: the rule file must be checked, never assumed valid.
func promtool(t *testing.T) string {
	t.Helper()
	return testkit.Binary(t, testkit.Program{
		Name:       "promtool",
		Candidates: []string{"promtool", "/usr/bin/promtool"},
		Get:        "apt-get install -y prometheus (Debian's package ships promtool)",
	})
}

// writeRules writes the rule file of cfg into dir/rules.yaml.
func writeRules(t *testing.T, dir string, cfg promrules.Config) string {
	t.Helper()
	var b strings.Builder
	if err := promrules.Write(&b, cfg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestPromtoolCheckRules(t *testing.T) {
	custom := diagnose.DefaultThresholds()
	custom.KVWarn, custom.KVCrit, custom.QueueCritFor, custom.TTFTP99Warn = 0.8, 0.9, 90*time.Second, 1500*time.Millisecond
	for _, tc := range []struct {
		name string
		cfg  promrules.Config
	}{
		{"defaults", promrules.Config{Thresholds: diagnose.DefaultThresholds()}},
		{"custom", promrules.Config{Thresholds: custom, NodeLabel: "pod", ModelLabels: []string{"served_model"},
			Window: 90 * time.Second, History: 30 * time.Minute, Lookback: 15 * time.Minute,
			Engines: []llmdiagv1.Engine{llmdiagv1.Engine_ENGINE_SGLANG, llmdiagv1.Engine_ENGINE_TGI}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := promtool(t)
			dir := t.TempDir()
			text := writeRules(t, dir, tc.cfg)
			out, err := exec.Command(bin, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, text)
			}
			if !strings.Contains(string(out), "SUCCESS") {
				t.Fatalf("promtool check rules did not say SUCCESS:\n%s", out)
			}
		})
	}
}

func TestBuildRejectsInvalidThresholds(t *testing.T) {
	th := diagnose.DefaultThresholds()
	th.KVWarn = 0.99
	if _, _, err := promrules.Build(promrules.Config{Thresholds: th}); err == nil || !strings.Contains(err.Error(), "kv_warn") {
		t.Fatalf("Build accepted kv_warn above kv_crit: %v", err)
	}
}

// TestRuleLabels: every alert says which indicator and which threshold keys
// it mirrors, and has a severity; every threshold key named exists.
func TestRuleLabels(t *testing.T) {
	f, _, err := promrules.Build(promrules.Config{Thresholds: diagnose.DefaultThresholds()})
	if err != nil {
		t.Fatal(err)
	}
	var keys strings.Builder
	if err := diagnose.WriteThresholds(&keys, diagnose.DefaultThresholds()); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Groups[0].Rules {
		if r.Alert == "" {
			continue
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q", r.Alert, s)
		}
		if r.Labels["llmdiag_indicator"] == "" {
			t.Errorf("%s: no llmdiag_indicator", r.Alert)
		}
		for _, k := range strings.Split(r.Labels["llmdiag_threshold"], ",") {
			if k != "" && !strings.Contains(keys.String(), "\n"+k+": ") {
				t.Errorf("%s: threshold key %q is not a threshold", r.Alert, k)
			}
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: missing summary or description", r.Alert)
		}
	}
}

// hist is a latency histogram of a case: the same observations every
// minute, counts per bucket (not cumulative), bounds +Inf last.
type hist struct {
	bounds []float64
	perMin []float64
}

// at puts 100 observations a minute in the bucket whose upper bound is le.
func at(bounds []float64, le float64) *hist {
	h := &hist{bounds: bounds, perMin: make([]float64, len(bounds))}
	h.perMin[slices.Index(bounds, le)] = 100
	return h
}

var (
	ttftBounds = []float64{0.5, 1, 5, 10, 20, 40, math.Inf(1)}
	e2eBounds  = []float64{1, 10, 60, 120, 1800, 3600, math.Inf(1)}
	itlBounds  = []float64{0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, math.Inf(1)}
)

// node is what one node of a case exports, minute by minute from minute 0
// to the evaluation minute (len of queue): queue, running and KV per
// minute; counters and histograms grow by the same amount every minute.
type node struct {
	engine         string // vllm or sglang
	queue, running []float64
	kv             []float64 // nil: not exported
	preemptPerMin  *float64
	ttft, e2e, itl *hist
	// downFrom > 0: every series stops after that minute (target down).
	downFrom int
}

// agreeCase is one node: its alerts (promtool test rules on the generated
// rules) and its verdict (diagnose.Diagnose on the same values) must agree.
type agreeCase struct {
	name string
	node node
	// focus is the indicator the case is about and want its status under
	// the default thresholds, so that alerts and verdict agreeing on a wrong
	// answer still fails.
	focus llmdiagv1.Indicator
	want  llmdiagv1.Status
}

func f(v float64) *float64 { return &v }

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// steps is a series of value a for n minutes then b for m minutes.
func steps(a float64, n int, b float64, m int) []float64 {
	return append(repeat(a, n), repeat(b, m)...)
}

var (
	indKV      = llmdiagv1.Indicator_INDICATOR_KV_PRESSURE
	indQueue   = llmdiagv1.Indicator_INDICATOR_QUEUE
	indRatio   = llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO
	indPreempt = llmdiagv1.Indicator_INDICATOR_PREEMPTIONS
	indTTFT    = llmdiagv1.Indicator_INDICATOR_TTFT_P99
	indE2E     = llmdiagv1.Indicator_INDICATOR_E2E_P99
	indITL     = llmdiagv1.Indicator_INDICATOR_INTER_TOKEN
	indScrape  = llmdiagv1.Indicator_INDICATOR_SCRAPE
	statusOK   = llmdiagv1.Status_STATUS_OK
	statusWarn = llmdiagv1.Status_STATUS_WARN
	statusCrit = llmdiagv1.Status_STATUS_CRIT
	statusDown = llmdiagv1.Status_STATUS_DOWN
)

// alertIndicator is the llmdiag_indicator label of the alerts that mirror
// each finding.
var alertIndicator = map[llmdiagv1.Indicator]string{
	indKV: "kv_pressure", indQueue: "queue", indRatio: "queue_running_ratio", indPreempt: "preemptions",
	indTTFT: "ttft_p99", indE2E: "e2e_p99", indITL: "inter_token", indScrape: "scrape",
}

func cases() []agreeCase {
	var out []agreeCase
	for _, e := range []string{"vllm", "sglang"} {
		base := func() node {
			return node{engine: e, queue: repeat(0, 11), running: repeat(10, 11), kv: repeat(0.3, 11)}
		}
		add := func(name string, focus llmdiagv1.Indicator, want llmdiagv1.Status, mod func(*node)) {
			n := base()
			mod(&n)
			out = append(out, agreeCase{name: e + "-" + name, node: n, focus: focus, want: want})
		}
		add("kv-0.97-10m", indKV, statusCrit, func(n *node) { n.kv = repeat(0.97, 11) })
		add("kv-0.95-exactly", indKV, statusCrit, func(n *node) { n.kv = repeat(0.95, 11) })
		add("kv-0.92", indKV, statusWarn, func(n *node) { n.kv = repeat(0.92, 11) })
		add("kv-0.5", indKV, statusOK, func(n *node) { n.kv = repeat(0.5, 11) })
		add("queue-60-6m", indQueue, statusCrit, func(n *node) {
			n.queue, n.running, n.kv = repeat(60, 7), repeat(40, 7), repeat(0.3, 7)
		})
		add("queue-60-2m", indQueue, statusWarn, func(n *node) { n.queue = steps(0, 8, 60, 3) })
		add("queue-50-exactly-10m", indQueue, statusWarn, func(n *node) { n.queue, n.running = repeat(50, 11), repeat(100, 11) })
		add("queue-3", indQueue, statusOK, func(n *node) { n.queue = repeat(3, 11) })
		add("ratio-sustained", indRatio, statusCrit, func(n *node) { n.queue = repeat(8, 11) })
		add("ratio-burst", indRatio, statusWarn, func(n *node) { n.queue = steps(0, 10, 8, 1) })
		add("ratio-all-waiting", indRatio, statusCrit, func(n *node) { n.queue, n.running = repeat(2, 11), repeat(2, 11) })
		add("ratio-0.3", indRatio, statusWarn, func(n *node) { n.queue = repeat(3, 11) })
		add("ratio-0", indRatio, statusOK, func(n *node) {})
		add("ratio-idle", indRatio, statusOK, func(n *node) { n.running = repeat(0, 11) })
		add("preempt-0.1/s", indPreempt, statusCrit, func(n *node) { n.preemptPerMin = f(6) })
		add("preempt-0.005/s", indPreempt, statusWarn, func(n *node) { n.preemptPerMin = f(0.3) })
		add("preempt-0", indPreempt, statusOK, func(n *node) { n.preemptPerMin = f(0) })
		add("ttft-40s", indTTFT, statusCrit, func(n *node) { n.ttft = at(ttftBounds, 40) })
		add("ttft-20s", indTTFT, statusWarn, func(n *node) { n.ttft = at(ttftBounds, 20) })
		add("ttft-1s", indTTFT, statusOK, func(n *node) { n.ttft = at(ttftBounds, 1) })
		add("e2e-1h", indE2E, statusCrit, func(n *node) { n.e2e = at(e2eBounds, 3600) })
		add("e2e-2m", indE2E, statusWarn, func(n *node) { n.e2e = at(e2eBounds, 120) })
		add("e2e-10s", indE2E, statusOK, func(n *node) { n.e2e = at(e2eBounds, 10) })
		add("itl-2s", indITL, statusCrit, func(n *node) { n.itl = at(itlBounds, 2) })
		add("itl-500ms", indITL, statusWarn, func(n *node) { n.itl = at(itlBounds, 0.5) })
		add("itl-50ms", indITL, statusOK, func(n *node) { n.itl = at(itlBounds, 0.05) })
		add("down", indScrape, statusDown, func(n *node) { n.downFrom = 4; n.preemptPerMin = f(1) })
		add("up", indScrape, statusOK, func(n *node) { n.preemptPerMin = f(0) })
	}
	return out
}

// sglangCapacity is the KV capacity in tokens of the SGLang nodes.
const sglangCapacity = 100000

// evalMinute is the minute a case is judged at.
func (n node) evalMinute() int { return len(n.queue) - 1 }

// labels of a node's series of one family.
func (n node) seriesLabels(instance string, rank string) string {
	if n.engine == "vllm" {
		return fmt.Sprintf(`instance=%q, model_name="m", engine="0"`, instance)
	}
	return fmt.Sprintf(`instance=%q, model_name="m", engine_type="unified", tp_rank=%q, pp_rank="0"`, instance, rank)
}

// values writes per-minute values in promtool's series notation, ending
// with a stale marker after downFrom.
func (n node) values(vs []float64) string {
	parts := make([]string, 0, len(vs)+1)
	for i, v := range vs {
		if n.downFrom > 0 && i > n.downFrom {
			parts = append(parts, "stale")
			break
		}
		parts = append(parts, fmt.Sprint(v))
	}
	return strings.Join(parts, " ")
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// series returns what a node exports, as promtool input series.
func (n node) series(instance string) []inputSeries {
	var out []inputSeries
	minutes := len(n.queue)
	ranks := []string{"0"}
	if n.engine == "sglang" {
		ranks = []string{"0", "1"} // two tensor-parallel ranks reporting the same state
	}
	gauge := func(family string, vs []float64) {
		for _, r := range ranks {
			out = append(out, inputSeries{family + "{" + n.seriesLabels(instance, r) + "}", n.values(vs)})
		}
	}
	counter := func(family string, perMin float64, labels string) {
		vs := make([]float64, minutes)
		for i := range vs {
			vs[i] = perMin * float64(i)
		}
		out = append(out, inputSeries{family + "{" + labels + "}", n.values(vs)})
	}
	histogram := func(family string, h *hist) {
		if h == nil {
			return
		}
		cum := 0.0
		for i, b := range h.bounds {
			cum += h.perMin[i]
			le := "+Inf"
			if !math.IsInf(b, 1) {
				le = fmt.Sprint(b)
			}
			counter(family+"_bucket", cum, fmt.Sprintf(`instance=%q, model_name="m", le=%q`, instance, le))
		}
	}
	switch n.engine {
	case "vllm":
		gauge("vllm:num_requests_waiting", n.queue)
		gauge("vllm:num_requests_running", n.running)
		if n.kv != nil {
			gauge("vllm:kv_cache_usage_perc", n.kv)
		}
		if n.preemptPerMin != nil {
			counter("vllm:num_preemptions_total", *n.preemptPerMin, n.seriesLabels(instance, "0"))
		}
		histogram("vllm:time_to_first_token_seconds", n.ttft)
		histogram("vllm:e2e_request_latency_seconds", n.e2e)
		histogram("vllm:inter_token_latency_seconds", n.itl)
	case "sglang":
		gauge("sglang:num_queue_reqs", n.queue)
		gauge("sglang:num_running_reqs", n.running)
		if n.kv != nil {
			used := make([]float64, len(n.kv))
			for i, v := range n.kv {
				used[i] = v * sglangCapacity
			}
			gauge("sglang:num_used_tokens", used)
			gauge("sglang:max_total_num_tokens", repeat(sglangCapacity, len(n.kv)))
		}
		if n.preemptPerMin != nil {
			for _, r := range ranks {
				counter("sglang:num_retracted_requests_total", *n.preemptPerMin, n.seriesLabels(instance, r))
			}
		}
		histogram("sglang:time_to_first_token_seconds", n.ttft)
		histogram("sglang:e2e_request_latency_seconds", n.e2e)
		histogram("sglang:inter_token_latency_seconds", n.itl)
	}
	return out
}

// metrics is what a refresh reports for the node at its evaluation minute,
// computed from the same numbers as its series: gauges as they are, counters
// as rates, percentiles with llmdiag's histogram_quantile.
func (n node) metrics(instance string, t0 time.Time) diagnose.Input {
	e := n.evalMinute()
	now := t0.Add(time.Duration(e) * time.Minute)
	m := &llmdiagv1.NodeMetrics{
		Node: instance, Model: "m", Window: "5m",
		ObservedAt: timestamppb.New(now), Staleness: durationpb.New(0), Up: n.downFrom == 0,
	}
	if !m.Up {
		return diagnose.Input{Metrics: m}
	}
	m.Queue, m.Running = f(n.queue[e]), f(n.running[e])
	m.QueueRunningRatio = metrics.QueueRunningRatio(m.Queue, m.Running)
	if n.kv != nil {
		m.KvPressure = f(n.kv[e])
		if n.engine == "sglang" {
			// Tokens used ÷ capacity, as the series give them.
			m.KvPressure = f(n.kv[e] * sglangCapacity / sglangCapacity)
		}
	}
	if n.preemptPerMin != nil {
		m.PreemptionsPerSecond = f(*n.preemptPerMin / 60)
	}
	dist := func(h *hist) *llmdiagv1.Distribution {
		if h == nil {
			return nil
		}
		sh := &sample.Histogram{Bounds: h.bounds}
		cum := 0.0
		for _, c := range h.perMin {
			cum += c / 60
			sh.Counts = append(sh.Counts, cum)
		}
		sh.Count = cum
		return metrics.Distribution(sh, metrics.DefaultQuantiles)
	}
	m.Ttft, m.E2E, m.InterToken = dist(n.ttft), dist(n.e2e), dist(n.itl)
	var hist []diagnose.Point
	for i := range e {
		hist = append(hist, diagnose.Point{
			At: t0.Add(time.Duration(i) * time.Minute), Up: true,
			Queue: f(n.queue[i]), Running: f(n.running[i]),
		})
	}
	return diagnose.Input{Metrics: m, History: hist}
}

// statuses is the status of every indicator an alert mirrors.
func statuses(d *llmdiagv1.Diagnosis) map[llmdiagv1.Indicator]llmdiagv1.Status {
	out := map[llmdiagv1.Indicator]llmdiagv1.Status{}
	for _, fd := range d.GetFindings() {
		if _, ok := alertIndicator[fd.GetIndicator()]; ok && fd.GetIndicator() != indScrape {
			out[fd.GetIndicator()] = fd.GetStatus()
		}
	}
	if d.GetStatus() == statusDown {
		out[indScrape] = statusDown
	}
	return out
}

// severities are the alert severities that must fire for a status: a
// critical finding fires its critical alert and, as the warning threshold
// is below it, its warning alert; DOWN fires only the target-down alert.
func severities(ind llmdiagv1.Indicator, s llmdiagv1.Status) []string {
	switch {
	case s == statusDown:
		return []string{"critical"}
	case s == statusCrit:
		return []string{"critical", "warning"}
	case s == statusWarn:
		return []string{"warning"}
	}
	return nil
}

type sampleExp struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

type exprTest struct {
	Expr       string      `yaml:"expr"`
	EvalTime   string      `yaml:"eval_time"`
	ExpSamples []sampleExp `yaml:"exp_samples"`
}

type testGroup struct {
	Interval    string        `yaml:"interval"`
	InputSeries []inputSeries `yaml:"input_series"`
	ExprTests   []exprTest    `yaml:"promql_expr_test"`
}

type testFile struct {
	RuleFiles          []string    `yaml:"rule_files"`
	EvaluationInterval string      `yaml:"evaluation_interval"`
	Tests              []testGroup `yaml:"tests"`
}

// TestAlertsAgreeWithDiagnose: for every case, the alerts the generated
// rules fire on the node's series (promtool test rules) are exactly those
// the verdict on the same values calls for, indicator by indicator:
// CRIT ↔ critical, WARN ↔ warning, OK or UNKNOWN ↔ none, DOWN ↔ the
// target-down alert. Under the default thresholds every case's status is
// also the one the case states; under other thresholds only the agreement
// is checked. Every alert the file has must fire in some case and stay
// silent in another.
func TestAlertsAgreeWithDiagnose(t *testing.T) {
	custom := diagnose.DefaultThresholds()
	custom.KVWarn, custom.KVCrit = 0.95, 0.98
	custom.QueueSaturated, custom.QueueCrit, custom.QueueCritFor = 2, 55, 2*time.Minute
	custom.QueueRunningRatioWarn, custom.QueueRunningRatioCrit = 0.5, 0.8
	custom.PreemptionsPerSecond = 0.2
	custom.TTFTP99Warn, custom.TTFTP99Crit = 25*time.Second, 50*time.Second
	custom.E2EP99Warn, custom.E2EP99Crit = 5*time.Minute, 2*time.Hour
	custom.ITLP99Warn, custom.ITLP99Crit = 100*time.Millisecond, 400*time.Millisecond
	for _, tc := range []struct {
		name    string
		th      diagnose.Thresholds
		literal bool
	}{
		{"defaults", diagnose.DefaultThresholds(), true},
		{"custom", custom, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := promtool(t)
			dir := t.TempDir()
			cfg := promrules.Config{Thresholds: tc.th}
			writeRules(t, dir, cfg)
			built, _, err := promrules.Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(0, 0).UTC()
			group := testGroup{Interval: "1m"}
			fired, silent := map[string]bool{}, map[string]bool{}
			for _, c := range cases() {
				instance := c.name
				group.InputSeries = append(group.InputSeries, c.node.series(instance)...)
				d := diagnose.Diagnose(c.node.metrics(instance, t0), tc.th, llmdiagv1.Language_LANGUAGE_EN)
				st := statuses(d)
				got := st[c.focus]
				if got == llmdiagv1.Status_STATUS_UNSPECIFIED {
					got = statusOK // a finding diagnose only lists when it is not OK
				}
				if tc.literal && got != c.want {
					t.Errorf("%s: diagnose says %s is %s, the case says %s (%s)", c.name, c.focus, got, c.want, d.GetSummary())
				}
				var exp []sampleExp
				for _, ind := range slices.Sorted(maps.Keys(alertIndicator)) {
					sev := severities(ind, st[ind])
					for _, s := range []string{"critical", "warning"} {
						key := alertIndicator[ind] + "/" + s
						if slices.Contains(sev, s) {
							fired[key] = true
							exp = append(exp, sampleExp{fmt.Sprintf(`{llmdiag_indicator=%q, severity=%q}`, alertIndicator[ind], s), 1})
						} else {
							silent[key] = true
						}
					}
				}
				group.ExprTests = append(group.ExprTests, exprTest{
					Expr:       fmt.Sprintf(`count by (llmdiag_indicator, severity) (ALERTS{alertstate="firing", instance=%q})`, instance),
					EvalTime:   fmt.Sprintf("%dm", c.node.evalMinute()),
					ExpSamples: exp,
				})
			}
			tf := testFile{RuleFiles: []string{"rules.yaml"}, EvaluationInterval: "1m", Tests: []testGroup{group}}
			b, err := yaml.Marshal(tf)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "tests.yaml")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "test", "rules", "tests.yaml")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("alerts disagree with diagnose (promtool test rules: %v):\n%s", err, out)
			}
			// Every alert of the file is covered both ways (the cases are
			// chosen around the default thresholds).
			if !tc.literal {
				return
			}
			for _, r := range built.Groups[0].Rules {
				if r.Alert == "" || r.Labels["llmdiag_indicator"] == "gpu_xid" { // TestXIDAlerts
					continue
				}
				key := r.Labels["llmdiag_indicator"] + "/" + r.Labels["severity"]
				if !fired[key] || !silent[key] {
					t.Errorf("alert %s (%s): fired in a case %v, silent in a case %v; want both", r.Alert, key, fired[key], silent[key])
				}
			}
		})
	}
}

// TestXIDAlerts: the XID alerts fire on an XID that occurred within
// gpu_xid_window (the last XID changed, or its counter rose), critical
// for one that needs a GPU reset or a reboot and warning for the
// application's, and never on a value held from the start or an
// informational XID, as the GPU XID finding grades them (TestXIDGrades).
func TestXIDAlerts(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	th := diagnose.DefaultThresholds()
	th.GPUXIDWindow = 10 * time.Minute
	writeRules(t, dir, promrules.Config{Thresholds: th})
	const gpu = `gpu="3", Hostname="h", UUID="GPU-x"`
	for _, tc := range []struct {
		name   string
		last   string // DCGM_FI_DEV_XID_ERRORS, promtool series notation, a sample a minute
		counts string // DCGM_EXP_XID_ERRORS_TOTAL of the XID, "" when not exported
		xid    string
		// want maps an evaluation minute to the severity firing then ("" none).
		want map[int]string
	}{
		{"79 at minute 5", "0x4 79x35", "", "79", map[int]string{4: "", 6: "critical", 12: "critical", 17: ""}},
		{"79 at minute 5, counted again at 12", "0x4 79x35", "_x4 1x6 2x28", "79",
			map[int]string{6: "critical", 17: "critical", 20: "critical", 24: ""}},
		{"13 at minute 5", "0x4 13x35", "", "13", map[int]string{6: "warning", 12: "warning", 17: ""}},
		{"31 from the start", "31x39", "1x39", "31", map[int]string{1: "", 6: "", 17: ""}},
		{"63 at minute 5", "0x4 63x35", "", "63", map[int]string{6: "", 12: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := testGroup{Interval: "1m", InputSeries: []inputSeries{{Series: "DCGM_FI_DEV_XID_ERRORS{" + gpu + `, instance="i"}`, Values: tc.last}}}
			if tc.counts != "" {
				group.InputSeries = append(group.InputSeries, inputSeries{Series: "DCGM_EXP_XID_ERRORS_TOTAL{" + gpu + `, instance="i", xid="` + tc.xid + `"}`, Values: tc.counts})
			}
			for _, minute := range slices.Sorted(maps.Keys(tc.want)) {
				var exp []sampleExp
				if s := tc.want[minute]; s != "" {
					exp = append(exp, sampleExp{fmt.Sprintf(`{severity=%q}`, s), 1})
				}
				group.ExprTests = append(group.ExprTests, exprTest{
					Expr:       `count by (severity) (ALERTS{alertstate="firing", llmdiag_indicator="gpu_xid"})`,
					EvalTime:   fmt.Sprintf("%dm", minute),
					ExpSamples: exp,
				})
			}
			b, err := yaml.Marshal(testFile{RuleFiles: []string{"rules.yaml"}, EvaluationInterval: "1m", Tests: []testGroup{group}})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tests.yaml"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "test", "rules", "tests.yaml")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("promtool test rules: %v\n%s", err, out)
			}
		})
	}
}
