package diagnose

import (
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
)

// Point is one refresh in a node's history. A nil gauge is unknown, never 0.
// The rules read Up, Queue, Running and KVPressure (spikes, episodes, and
// the saturation held for routing) and E2EMean (a rising mean); the other
// fields travel with the history for callers that keep one history for
// both.
type Point struct {
	At             time.Time
	Up             bool
	Queue          *float64
	Running        *float64
	KVPressure     *float64
	E2EMean        *float64 // seconds
	GenerationRate *float64 // tok/s
	// E2EP99 is the window's P99 end-to-end latency, in seconds: for the
	// history's readers (GetNodeHistory's sparklines); no rule reads it.
	E2EP99 *float64
	// Status is the verdict given at that refresh.
	Status llmdiagv1.Status
}

// Input is everything one diagnosis reads.
type Input struct {
	// Metrics is the window being diagnosed. Nil means no data: UNKNOWN.
	Metrics *llmdiagv1.NodeMetrics
	// History holds earlier refreshes, oldest first, bounded by the caller;
	// it may be empty. A point at or after Metrics.observed_at is taken to be
	// the current refresh itself and is skipped.
	History []Point
	// Profile is how the node is deployed; nil or zero when unknown.
	Profile *llmdiagv1.Profile
	// Peers are other nodes serving the same model; may be empty. Stale, down
	// and differently-labelled peers, and the node itself, are ignored.
	Peers []*llmdiagv1.NodeMetrics
	// Group, when set, stands for Peers (which is then ignored): the nodes
	// serving the model, the node itself among them or not, prepared once
	// for all their diagnoses by NewPeerGroup with the same thresholds.
	Group *PeerGroup
	// Windows are the node's metrics over further windows, each with its
	// Window set, for the SLO burn findings (SLOWindows; slo.go); may be
	// empty, and is not read without SLOs.
	Windows []*llmdiagv1.NodeMetrics
	// OverBudget are windows of SLOWindows the caller did not read because
	// the request's query budget could not cover them: the SLO findings
	// say so of each, rather than only that it was not read.
	OverBudget []time.Duration
	// Trend, when set, is the hint the node's last diagnosis left for
	// fitting its latency trend, and is left holding the hint for its next
	// one (see TrendHint). Only the time a diagnosis takes depends on it.
	Trend *TrendHint
}

// Diagnose returns the verdict on in.Metrics under thresholds t, with every
// human-readable text in lang (English when unspecified). It never returns
// nil, and it never reports a node healthy from stale or absent data.
//
// t should have passed Validate; Diagnose does not check it.
func Diagnose(in Input, t Thresholds, lang llmdiagv1.Language) *llmdiagv1.Diagnosis {
	return diagnose(in, t, lang, nil)
}

// diagnose is Diagnose, recording into rec (when not nil) every catalog
// entry the diagnosis is written from.
func diagnose(in Input, t Thresholds, lang llmdiagv1.Language, rec *recorder) *llmdiagv1.Diagnosis {
	if lang != llmdiagv1.Language_LANGUAGE_ZH {
		lang = llmdiagv1.Language_LANGUAGE_EN
	}
	p := newPrinter(lang)
	p.rec = rec
	m := in.Metrics
	d := &llmdiagv1.Diagnosis{Language: lang}
	if m != nil {
		d.Node, d.Model, d.Engine, d.Window = m.GetNode(), m.GetModel(), m.GetEngine(), m.GetWindow()
		d.Stale = m.GetStale()
		d.Role = m.GetRole()
		if ts := m.GetObservedAt(); ts != nil {
			d.ObservedAt = timestamppb.New(ts.AsTime())
		}
		if s := m.GetStaleness(); s != nil {
			d.Staleness = durationpb.New(s.AsDuration())
		}
	}

	var v verdict
	saturated := false
	switch {
	case m == nil:
		v = noData(p, p.f(summaryNoMetrics), p.f(unknownNoMetrics))
		d.Findings = unknownFindings(p, p.f(unknownNoMetrics))
	case isStale(m, t):
		d.Stale = true
		v, d.Findings = stale(p, m, t)
	case !m.GetUp():
		v = down(p, m)
		d.Findings = append(unknownFindings(p, p.f(unknownDown)), scrapeFinding(p, m, llmdiagv1.Status_STATUS_CRIT, scrapeDown))
	default:
		f := observe(in, t)
		saturated = f.hist.saturated
		d.LoadScore = f.hist.score
		d.Findings = f.findings(p)
		if f.coreKnown() == 0 {
			v = noData(p, p.f(summaryUnreadable), p.f(evUnreadable))
			v.evidence = append(v.evidence, errorEvidence(p, m)...)
		} else if sv, ok := f.stalled(p, d.Findings); ok {
			v = sv
		} else {
			v = f.verdict(p, d.Findings)
			f.roleVerdict(p, &v, d.Findings)
		}
		f.noteContradictions(p, d.Findings, &v)
		d.Findings = append(d.Findings, sloFindings(p, in, t)...)
	}

	d.Status = v.status
	d.RootCause = v.cause
	d.Confidence = round3(v.confidence)
	d.Summary = v.summary
	d.Evidence = v.evidence
	// Warnings (for example a Prometheus query warning or partial result)
	// do not change the verdict, but the reader must see them.
	for _, w := range m.GetWarnings() {
		d.Evidence = append(d.Evidence, p.f(evSourceWarning, quote(w)))
	}
	d.RuledOut = v.ruledOut
	d.Recommendations = v.recs
	d.Routable = !saturated && routableApart(v.status, v.cause, m, t)
	if m != nil && !d.Routable && !saturated {
		// Stale, down, unreadable, stalled or a GPU fault: the gauges say nothing about
		// what the node can take, so the score does not claim saturation.
		d.LoadScore = round3(math.Min(Pressure(m.Queue, m.Running, m.KvPressure, t), 1))
	}
	return d
}

// isStale reports whether m is no fresh data (metrics.Stale).
func isStale(m *llmdiagv1.NodeMetrics, t Thresholds) bool { return metrics.Stale(m, t.StaleAfter) }

// verdict is the outcome of the rules, before it is copied into a Diagnosis.
type verdict struct {
	cause      llmdiagv1.Cause
	status     llmdiagv1.Status
	confidence float64
	summary    string
	evidence   []string
	ruledOut   []string
	recs       []string
}

// noData is the verdict when there is nothing fresh to judge.
func noData(p printer, summary, evidence string) verdict {
	return verdict{
		cause:      llmdiagv1.Cause_CAUSE_NO_DATA,
		status:     llmdiagv1.Status_STATUS_UNKNOWN,
		confidence: 1,
		summary:    summary,
		evidence:   []string{evidence},
		recs:       []string{p.f(recNoData), p.f(recNoDataRouting)},
	}
}

// stale is the verdict, the six UNKNOWN findings and the data's age, for
// data that is no
// longer fresh: older than StaleAfter, or flagged stale by its source.
func stale(p printer, m *llmdiagv1.NodeMetrics, t Thresholds) (verdict, []*llmdiagv1.Finding) {
	if s := m.GetStaleness(); s != nil && metrics.TooOld(s.AsDuration(), t.StaleAfter) {
		age := p.seconds(s.AsDuration().Seconds())
		return noData(p, p.f(summaryStale, age, p.seconds(t.StaleAfter.Seconds())), p.f(evStale, age)),
			append(unknownFindings(p, p.f(unknownStale, age)), staleFinding(p, m, t))
	}
	return noData(p, p.f(summaryStaleFlagged), p.f(evStaleFlagged)),
		append(unknownFindings(p, p.f(unknownStaleFlagged)), staleFinding(p, m, t))
}

// errorEvidence quotes every error met reading m.
func errorEvidence(p printer, m *llmdiagv1.NodeMetrics) []string {
	ev := make([]string, 0, len(m.GetErrors()))
	for _, e := range m.GetErrors() {
		ev = append(ev, p.f(evScrapeError, quote(e)))
	}
	return ev
}

// down is the verdict when the target does not answer.
func down(p printer, m *llmdiagv1.NodeMetrics) verdict {
	ev := append([]string{p.f(evDown)}, errorEvidence(p, m)...)
	return verdict{
		cause:      llmdiagv1.Cause_CAUSE_TARGET_DOWN,
		status:     llmdiagv1.Status_STATUS_DOWN,
		confidence: 1,
		summary:    p.f(summaryDown),
		evidence:   ev,
		recs:       []string{p.f(recDown), p.f(recDownRouting)},
	}
}
