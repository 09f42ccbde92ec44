package diagnose

import (
	"math"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Helpers the causes share (the causes themselves are in causes.go and
// cause_*.go): weighing a cause against every finding, and the sentences
// and evidence several causes write.

// Confidence weights: each further indicator a cause explains adds
// supportWeight (up to maxSupport of them); each WARN/CRIT finding it leaves
// unexplained takes unexplainedWeight; each unknown core indicator takes
// unknownCoreWeight, each unknown further indicator unknownExtraWeight.
const (
	supportWeight      = 0.02
	maxSupport         = 5
	unexplainedWeight  = 0.1
	unknownCoreWeight  = 0.03
	unknownExtraWeight = 0.01
	minConfidence      = 0.05
	maxConfidence      = 0.97
)

// weigh adjusts v, the verdict naming cause won, for every finding: what won
// explains raises the confidence, what it leaves unexplained lowers it, is
// named in the evidence and can raise the status; unknown indicators lower
// it.
func (f *facts) weigh(p printer, v *verdict, won *cause, findings []*llmdiagv1.Finding) {
	support := 0
	var off []string
	for _, x := range findings {
		if !elevated(x.GetStatus()) {
			continue
		}
		if explained(won.explains, x) {
			support++
			continue
		}
		off = append(off, p.f(evReading, x.GetName(), x.GetValue()))
		v.status = worse(v.status, x.GetStatus())
	}
	if len(off) > 0 {
		v.evidence = append(v.evidence, p.f(evUnexplainedAlso, p.join(off)))
	}
	c := v.confidence + supportWeight*float64(min(max(support-1, 0), maxSupport)) -
		unexplainedWeight*float64(len(off)) - f.unknownPenalty(findings)
	v.confidence = math.Max(minConfidence, math.Min(maxConfidence, c))
}

// unknownPenalty is how much the unknown indicators take off a confidence.
func (f *facts) unknownPenalty(findings []*llmdiagv1.Finding) float64 {
	pen := 0.0
	for i, x := range findings {
		if x.GetStatus() != statusUnknown {
			continue
		}
		if i < len(coreIndicators) {
			pen += unknownCoreWeight
		} else {
			pen += unknownExtraWeight
		}
	}
	return pen
}

// worst is the most severe OK/WARN/CRIT status among findings; UNKNOWN
// findings do not count.
func worst(findings []*llmdiagv1.Finding) llmdiagv1.Status {
	s := statusOK
	for _, x := range findings {
		s = worse(s, x.GetStatus())
	}
	return s
}

// ratioText is the queue/running ratio, or "?" when unknown.
func (f *facts) ratioText() string {
	if !f.ratio.ok {
		return "?"
	}
	return ratio(f.ratio.v)
}

// metricName names the latency the peer comparison reports.
func (f *facts) metricName(p printer) string {
	if f.peer.metric == llmdiagv1.Indicator_INDICATOR_TTFT_P99 {
		return p.f(nameTTFTP99)
	}
	return p.f(nameE2EP99)
}

// not turns a cause fragment into a sentence that first says what it is not,
// as an SRE would: "Not memory, not queueing, but …" (docs/verdict-rules.md).
func (f *facts) not(p printer, cause string) string {
	var nots []string
	if f.kv.below(f.t.KVWarn) {
		nots = append(nots, p.f(notMemory))
	}
	if f.queue.ok && !f.hist.now {
		nots = append(nots, p.f(notQueueing))
	}
	if len(nots) == 0 {
		return p.f(causeOnly, cause)
	}
	return p.f(causeAfterNots, sentenceIfEN(p, p.join(nots)), cause)
}

// sentenceIfEN capitalises English text; Chinese has no case.
func sentenceIfEN(p printer, s string) string {
	if p.zh {
		return s
	}
	return sentence(s)
}

// latencyEvidence states the E2E and TTFT tails when they are WARN or worse.
func (f *facts) latencyEvidence(p printer) []string {
	var ev []string
	if elevated(f.e2eStatus()) {
		ev = append(ev, p.f(evE2EHigh, p.percentile(f.e2eP99), p.seconds(f.t.E2EP99Warn.Seconds())))
	}
	if elevated(f.ttftStatus()) {
		ev = append(ev, p.f(evTTFTHigh, p.percentile(f.ttftP99), p.seconds(f.t.TTFTP99Warn.Seconds())))
	}
	return ev
}

// queueNowEvidence is the queue now and, while the queue is saturated, for
// how long, and whether it dips this refresh.
func (f *facts) queueNowEvidence(p printer) []string {
	t, q := f.t, f.hist.queueHold
	ev := []string{p.f(evQueueHigh, count(f.queue.v), count(t.QueueSaturated), f.ratioText(), f.runningText())}
	if q.on && !f.hist.noHistory() {
		ev = append(ev, p.f(evSaturatedSince, p.seconds(q.length(f.hist.at).Seconds()), q.episodes,
			p.seconds(q.longest.Seconds()), p.seconds(t.OverloadedAfter.Seconds())))
	}
	if q.dipping() {
		ev = append(ev, p.f(evHeldDip, count(f.queue.v), q.streak, t.RoutingHold))
	}
	return append(ev, f.loraEvidence(p)...)
}
