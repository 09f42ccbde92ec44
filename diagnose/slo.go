package diagnose

import (
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/metrics"
)

// SLO burn: for every SLO that applies to the node, one finding of its
// attainment and error-budget burn over the windows of the burn alerts
// (multi-window, multi-burn-rate, as in the Google SRE workbook's
// "Alerting on SLOs"). docs/slo.md says why the windows are what they are
// and how they are read.
//
// The finding is reported beside the verdict, not weighed by it: an SLO says
// how much a symptom costs, and the causes already judge the symptom
// itself (the TTFT, E2E and inter-token tails). With no SLO configured
// nothing here runs.

// BurnAlert is one multi-window burn-rate condition: the SLO's burn rate is
// at or above Factor(period) over both the Long and the Short window. The
// long window makes sure a real share of the budget went; the short one
// that it is still going, so the alert ends soon after the burn does.
type BurnAlert struct {
	Long, Short time.Duration
	// BudgetShare is the share of the period's error budget the long window
	// must have spent for the alert to fire.
	BudgetShare float64
	// Status is the finding's status when it fires.
	Status llmdiagv1.Status
}

// Factor is the burn rate at which the long window spends BudgetShare of
// the budget of period: BudgetShare × period / Long. For 30 days: 14.4 for
// 2% in 1h, 6 for 5% in 6h. It is rounded to nine decimals, so that it
// reads as people write it (5.6, not 5.6000000000000005) in findings and
// rules alike.
func (b BurnAlert) Factor(period time.Duration) float64 {
	return math.Round(b.BudgetShare*(float64(period)/float64(b.Long))*1e9) / 1e9
}

// burnAlerts are the SRE workbook's two paging conditions, most severe
// first: 2% of the budget in an hour (still burning over the last 5
// minutes) is CRIT, 5% in six hours (still burning over the last 30
// minutes) is WARN.
var burnAlerts = [...]BurnAlert{
	{Long: time.Hour, Short: 5 * time.Minute, BudgetShare: 0.02, Status: llmdiagv1.Status_STATUS_CRIT},
	{Long: 6 * time.Hour, Short: 30 * time.Minute, BudgetShare: 0.05, Status: llmdiagv1.Status_STATUS_WARN},
}

// BurnAlerts returns the burn-rate conditions every SLO is judged by, most
// severe first.
func BurnAlerts() []BurnAlert { return burnAlerts[:] }

// SLOWindows are the windows the burn alerts read, shortest first: the
// windows Input.Windows should carry (those the refresh's own window does
// not already cover).
func SLOWindows() []time.Duration {
	var ws []time.Duration
	for _, b := range burnAlerts {
		ws = append(ws, b.Long, b.Short)
	}
	slices.Sort(ws)
	return slices.Compact(ws)
}

// HasSLO reports whether t has an SLO for model: one of model's, or one of
// every model's.
func HasSLO(t Thresholds, model string) bool {
	return slices.ContainsFunc(t.SLOs.List(), func(s SLO) bool { return s.appliesTo(model) })
}

// appliesTo reports whether s judges nodes serving model.
func (s SLO) appliesTo(model string) bool { return s.Model == "" || s.Model == model }

// sloIndicator is the finding's indicator for each metric.
var sloIndicator = map[SLOMetric]llmdiagv1.Indicator{
	SLOTTFT:       llmdiagv1.Indicator_INDICATOR_SLO_TTFT,
	SLOInterToken: llmdiagv1.Indicator_INDICATOR_SLO_INTER_TOKEN,
	SLOE2E:        llmdiagv1.Indicator_INDICATOR_SLO_E2E,
}

// sloDist is the distribution of metric in m.
func sloDist(m *llmdiagv1.NodeMetrics, metric SLOMetric) *llmdiagv1.Distribution {
	switch metric {
	case SLOTTFT:
		return m.GetTtft()
	case SLOInterToken:
		return m.GetInterToken()
	case SLOE2E:
		return m.GetE2E()
	}
	return nil
}

// sloWindow is an SLO's attainment over one window.
type sloWindow struct {
	window time.Duration
	read   bool // the window's metrics were read, cover it and carry the histogram
	// covered is how much of the window the metrics cover when that is
	// less than sloCoverage of it (read is then false); 0 otherwise.
	covered time.Duration
	att     histogram.Attainment
}

// sloCoverage is the share of a window its metrics must cover to be judged,
// as for the history's window averages (refresh.PointOf). A direct scrape
// covers no more of a window than the samples it kept reach back
// (scrape.Options.Retention, LongRetention); a window it covers less is
// not judged, rather than judged as if it were whole.
const sloCoverage = 0.9

// partial returns how much of d m covers when that is less than sloCoverage
// of it, else 0. Metrics that do not say what they cover count as covering
// the window.
func partial(m *llmdiagv1.NodeMetrics, d time.Duration) time.Duration {
	if c := m.GetCovered(); c != nil && c.AsDuration() < time.Duration(float64(d)*sloCoverage) {
		return max(c.AsDuration(), 0)
	}
	return 0
}

// requests reports whether the window holds requests to judge.
func (w sloWindow) requests() bool { return w.read && w.att.Total > 0 && !math.IsNaN(w.att.Lower) }

// burn returns the burn rates the window's attainment bounds allow: high
// from the lower attainment, low from the upper.
func (w sloWindow) burn(s SLO) (low, high float64) {
	return (1 - w.att.Upper) / s.ErrBudget(), (1 - w.att.Lower) / s.ErrBudget()
}

// windowMetrics finds the metrics over window d: in.Metrics when its window
// is d, else the first of in.Windows that is.
func windowMetrics(in Input, d time.Duration) *llmdiagv1.NodeMetrics {
	is := func(m *llmdiagv1.NodeMetrics) bool {
		w, lifetime, err := metrics.ParseWindow(m.GetWindow())
		return m != nil && err == nil && !lifetime && w == d
	}
	if is(in.Metrics) {
		return in.Metrics
	}
	for _, m := range in.Windows {
		if is(m) {
			return m
		}
	}
	return nil
}

// sloFindings returns one finding per SLO of t that applies to the node
// (its model, or every model); none without SLOs.
func sloFindings(p printer, in Input, t Thresholds) []*llmdiagv1.Finding {
	slos := t.SLOs.List()
	if len(slos) == 0 {
		return nil
	}
	var out []*llmdiagv1.Finding
	for _, s := range slos {
		if !s.appliesTo(in.Metrics.GetModel()) {
			continue
		}
		out = append(out, sloFinding(p, in, s))
	}
	return out
}

// sloFinding judges one SLO. The status is the most severe burn alert
// that fires, graded on the upper burn rate (the requests of the bucket the
// target falls inside counted as misses), so that it agrees with the rules
// `llmdiag rules` writes; the conclusion says when only that bound fires.
// A pair whose window was not read, or whose histogram the engine does not
// export, is UNKNOWN unless a more severe pair fires; a window without
// requests burns nothing.
func sloFinding(p printer, in Input, s SLO) *llmdiagv1.Finding {
	target := s.Target.Seconds()
	byWindow := map[time.Duration]sloWindow{}
	burn := &llmdiagv1.SLOBurn{Name: s.Name, TargetSeconds: target, Objective: s.Objective, Period: durationpb.New(s.Period)}
	var evidence []string
	for _, d := range SLOWindows() {
		w := sloWindow{window: d}
		pw := &llmdiagv1.SLOWindow{Window: metrics.FormatWindow(d)}
		m := windowMetrics(in, d)
		if dist := sloDist(m, s.Metric); dist != nil && len(dist.GetBucketBounds()) > 0 {
			w.covered = partial(m, d)
			w.read = w.covered == 0
			w.att = histogram.AttainmentAt(target, distBuckets(dist))
			pw.Requests = w.att.Total
		}
		byWindow[d] = w
		switch {
		case w.covered > 0:
			evidence = append(evidence, p.f(evSLOWindowPartial, pw.Window, metrics.FormatWindow(roundCovered(w.covered))))
		case w.requests():
			lo, hi := w.burn(s)
			pw.AttainmentLower, pw.AttainmentUpper = &w.att.Lower, &w.att.Upper
			pw.BurnRateLower, pw.BurnRateUpper = &lo, &hi
			evidence = append(evidence, p.f(evSLOWindow, pw.Window, attainmentText(w.att), thousands(w.att.Total), p.seconds(target), rangeText(lo, hi, 1)+"×"))
		case w.read:
			evidence = append(evidence, p.f(evSLOWindowEmpty, pw.Window))
		case slices.Contains(in.OverBudget, d):
			evidence = append(evidence, p.f(evSLOWindowOverBudget, pw.Window))
		default:
			evidence = append(evidence, p.f(evSLOWindowMissing, pw.Window))
		}
		burn.Windows = append(burn.Windows, pw)
	}

	status, conclusion := statusOK, ""
	unknown := false
	for _, a := range burnAlerts {
		long, short := byWindow[a.Long], byWindow[a.Short]
		if !long.read || !short.read {
			unknown = true
			continue
		}
		if !long.requests() || !short.requests() {
			continue
		}
		factor := a.Factor(s.Period)
		lLo, lHi := long.burn(s)
		sLo, sHi := short.burn(s)
		if lHi < factor || sHi < factor {
			continue
		}
		id := sloBurnWarn
		if a.Status == statusCrit {
			id = sloBurnCrit
		}
		status = a.Status
		conclusion = p.f(id, metrics.FormatWindow(a.Long), metrics.FormatWindow(a.Short), trimFloat(factor, 2),
			exactPercent(a.BudgetShare), metrics.FormatWindow(s.Period))
		if lLo < factor || sLo < factor {
			conclusion += p.f(sloOnlyIfMissed, p.seconds(target))
		}
		break
	}
	if status == statusOK {
		crit, warn := burnAlerts[0], burnAlerts[1]
		switch {
		case unknown:
			status, conclusion = statusUnknown, p.f(sloUnknown)
		default:
			conclusion = p.f(sloWithin, trimFloat(crit.Factor(s.Period), 2), metrics.FormatWindow(crit.Long), metrics.FormatWindow(crit.Short),
				trimFloat(warn.Factor(s.Period), 2), metrics.FormatWindow(warn.Long), metrics.FormatWindow(warn.Short))
		}
	}
	value := ""
	if w := byWindow[burnAlerts[0].Long]; w.requests() {
		value = p.f(sloValue, attainmentText(w.att), p.seconds(target), metrics.FormatWindow(w.window))
	}
	f := finding(p, sloIndicator[s.Metric], nameSLO, value, status, conclusion, evidence...)
	f.Name += " " + s.Name
	f.Slo = burn
	return f
}

// roundCovered rounds a covered span for the evidence: to the minute, or
// to the second below one.
func roundCovered(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

// distBuckets are a distribution's buckets for package histogram.
func distBuckets(d *llmdiagv1.Distribution) []histogram.Bucket {
	n := min(len(d.GetBucketBounds()), len(d.GetBucketCounts()))
	bs := make([]histogram.Bucket, n)
	for i := range n {
		bs[i] = histogram.Bucket{UpperBound: d.GetBucketBounds()[i], Count: d.GetBucketCounts()[i]}
	}
	return bs
}

// attainmentText writes an attainment as a percentage, or as the range the
// buckets allow: "95%", "80–95%".
func attainmentText(a histogram.Attainment) string {
	return rangeText(a.Lower*100, a.Upper*100, 2) + "%"
}

// rangeText writes lo–hi with prec decimals, or one figure when they are
// written alike.
func rangeText(lo, hi float64, prec int) string {
	l, h := trimFloat(lo, prec), trimFloat(hi, prec)
	if l == h {
		return l
	}
	return l + "–" + h
}
