package promrules

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/source/prom"
)

// SLO rules: for every latency metric an SLO names, per engine and per burn
// window, a recording rule of the bucket rates (RecordSLOBuckets); per SLO
// and window, its burn rate (RecordSLOBurnRate); per SLO, two alerts, as
// diagnose's SLO finding reads them (diagnose/slo.go, docs/slo.md):
// LLMDiagSLOBurnFast (critical) when the burn rate over both 1h and 5m is
// at or above the factor of 2% of the period's budget per hour, and
// LLMDiagSLOBurn (warning) when that holds or the burn over both 6h and 30m
// is at or above the factor of 5% per 6 hours, so that the warning keeps
// firing beside the critical alert, as the other alerts do.
//
// The burn rate is read as the finding grades it, from the lower
// attainment bound: the requests at or under the largest bucket bound at or
// under the target count as good. PromQL cannot compare the le label with a
// number, so the rules match le against the target itself and every bound
// at or under it of the engines' default layouts (knownBounds, from
// docs/engine-metrics.md); with a custom layout whose bounds under the
// target are none of these, the good count is 0: a stricter attainment,
// never a kinder one.

// RecordSLOBuckets is the name of the bucket-rate record of an SLO metric
// over window, e.g. llmdiag:slo_ttft_seconds_bucket:rate1h.
func RecordSLOBuckets(metric diagnose.SLOMetric, window time.Duration) string {
	return "llmdiag:slo_" + string(metric) + "_seconds_bucket:rate" + model.Duration(window).String()
}

// RecordSLOBurnRate is the name of the burn-rate record over window,
// labelled slo="<name>".
func RecordSLOBurnRate(window time.Duration) string {
	return "llmdiag:slo_burn_rate:rate" + model.Duration(window).String()
}

// knownBounds are the finite bucket bounds of the engines' default latency
// histograms (docs/engine-metrics.md), ascending; TGI's, whose latency
// histograms llmdiag does not read for TTFT, inter-token or E2E, left out.
var knownBounds = func() []float64 {
	var out []float64
	for _, l := range [][]float64{
		{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560},
		{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80},
		{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680},
		{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400},
		{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8},
		{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400},
	} {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}()

// leSpellings are the ways exporters write bound b as le: Go's shortest
// form ("1", "2.5") and the Python clients' and Prometheus 3's, which add
// ".0" to whole numbers ("1.0").
func leSpellings(b float64) []string {
	g := strconv.FormatFloat(b, 'g', -1, 64)
	out := []string{g}
	if !strings.ContainsAny(g, ".e") {
		out = append(out, g+".0")
	}
	return out
}

// goodLE is the le regex of the buckets whose counts may be the good
// requests of target (seconds): target itself and every known bound at or
// under it.
func goodLE(target float64) string {
	var alts []string
	add := func(b float64) {
		for _, s := range leSpellings(b) {
			if q := regexp.QuoteMeta(s); !slices.Contains(alts, q) {
				alts = append(alts, q)
			}
		}
	}
	for _, b := range knownBounds {
		if b <= target {
			add(b)
		}
	}
	add(target)
	return strings.Join(alts, "|")
}

// sloBucketRecords are the bucket-rate records of engine e for the metrics
// the SLOs name, one per burn window.
func sloBucketRecords(e llmdiagv1.Engine, cfg Config, labels map[string]string) ([]Rule, error) {
	slos := cfg.Thresholds.SLOs.List()
	if len(slos) == 0 {
		return nil, nil
	}
	var out []Rule
	for _, w := range diagnose.SLOWindows() {
		x, err := prom.RuleExpressions(e, prom.RuleConfig{
			NodeLabel: cfg.NodeLabel, ModelLabels: cfg.ModelLabels, Window: w, Lookback: cfg.Lookback,
		})
		if err != nil {
			return nil, err
		}
		done := map[diagnose.SLOMetric]bool{}
		for _, s := range slos {
			if done[s.Metric] {
				continue
			}
			done[s.Metric] = true
			expr := map[diagnose.SLOMetric]string{diagnose.SLOTTFT: x.TTFTBuckets, diagnose.SLOInterToken: x.ITLBuckets, diagnose.SLOE2E: x.E2EBuckets}[s.Metric]
			if expr != "" {
				out = append(out, Rule{Record: RecordSLOBuckets(s.Metric, w), Expr: expr, Labels: labels})
			}
		}
	}
	return out, nil
}

// sloRules are the engine-independent burn-rate records and the burn
// alerts of every SLO.
func sloRules(cfg Config) []Rule {
	var out []Rule
	node := cfg.NodeLabel
	by := node + ", engine"
	for _, s := range cfg.Thresholds.SLOs.List() {
		sel := `{slo="` + s.Name + `"}`
		info := RecordModelInfo
		if s.Model != "" {
			info += `{model=` + strconv.Quote(s.Model) + `}`
		}
		for _, w := range diagnose.SLOWindows() {
			b := RecordSLOBuckets(s.Metric, w)
			total := "max by (" + by + ") (" + b + `{le="+Inf"})`
			good := "(max by (" + by + ") (" + b + `{le=~` + strconv.Quote(goodLE(s.Target.Seconds())) + `}) or on (` + by + ") " + total + " * 0)"
			out = append(out, Rule{
				Record: RecordSLOBurnRate(w),
				Expr: "(1 - " + good + " / on (" + by + ") " + total + ") / (1 - " + num(s.Objective) + ")" +
					" * on (" + by + ") group_left (model) " + info,
				Labels: map[string]string{"slo": s.Name},
			})
		}
		pair := func(a diagnose.BurnAlert) string {
			f := num(a.Factor(s.Period))
			return "(" + RecordSLOBurnRate(a.Long) + sel + " >= " + f + " and " + RecordSLOBurnRate(a.Short) + sel + " >= " + f + ")"
		}
		fast, slow := diagnose.BurnAlerts()[0], diagnose.BurnAlerts()[1]
		who := "{{ $labels." + node + " }} ({{ $labels.engine }}, {{ $labels.model }})"
		what := fmt.Sprintf("%s SLO %s (%s within %s for %s of requests over %s)", s.Metric, s.Name, s.Metric, diagnose.ShortDuration(s.Target),
			percent(s.Objective), model.Duration(s.Period))
		desc := func(a diagnose.BurnAlert) string {
			return fmt.Sprintf("burn rate at or above %s over both %s and %s (%s of the %s error budget within %s)",
				num(a.Factor(s.Period)), model.Duration(a.Long), model.Duration(a.Short), percent(a.BudgetShare), model.Duration(s.Period), model.Duration(a.Long))
		}
		labels := func(sev string) map[string]string {
			return map[string]string{
				LabelSeverity: sev, LabelIndicator: "slo_" + string(s.Metric),
				LabelThreshold: "slos", "llmdiag_slo": s.Name,
			}
		}
		out = append(out,
			Rule{
				Alert: "LLMDiagSLOBurnFast", Expr: pair(fast), Labels: labels(SeverityCritical),
				Annotations: map[string]string{
					"summary":     "Error budget of SLO " + s.Name + " burning fast on " + who,
					"description": "The " + what + " has its " + desc(fast) + ". Burn rate over " + model.Duration(fast.Long).String() + ": {{ $value | humanize }}. llmdiag's SLO finding is CRIT.",
					"runbook_url": runbookURL(cfg.RunbookBaseURL, LatencyRunbook(s.Metric)),
				},
			},
			Rule{
				Alert: "LLMDiagSLOBurn", Expr: pair(slow) + " or " + pair(fast), Labels: labels(SeverityWarning),
				Annotations: map[string]string{
					"summary":     "Error budget of SLO " + s.Name + " burning on " + who,
					"description": "The " + what + " has its " + desc(slow) + ", or burns fast. llmdiag's SLO finding is WARN (CRIT when it burns fast).",
					"runbook_url": runbookURL(cfg.RunbookBaseURL, LatencyRunbook(s.Metric)),
				},
			},
		)
	}
	return out
}
