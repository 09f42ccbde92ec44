package diagnose

import (
	"math"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
)

// The findings beyond the six core rows: per-request decode speed, the
// prefill/decode ratio, queue time, inter-token latency, aborts, the E2E
// trend, the peer group and the data's age.

// decodeSpeedFinding is the decode speed one request sees, with what the
// deployment profile says about it.
func (f *facts) decodeSpeedFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_DECODE_SPEED, nameDecodeSpeed
	switch {
	case f.gen.ok && f.gen.v == 0:
		return finding(p, ind, name, "", statusUnknown, p.f(decodeIdle))
	case !f.perRequest.ok:
		return finding(p, ind, name, "", statusUnknown, p.f(decodeUnknown))
	}
	value := p.f(valuePerRequest, rate(f.perRequest.v))
	ev := []string{f.perRequestEvidence(p)}
	if !f.slowDecode() {
		return finding(p, ind, name, value, statusOK, p.f(decodeOK), ev...)
	}
	c := decodeSlow
	switch {
	case f.largeModel() && f.dataParallelOnly():
		c = decodeSlowModelDP
	case f.largeModel():
		c = decodeSlowModel
	case f.dataParallelOnly():
		c = decodeSlowDP
	}
	return finding(p, ind, name, value, statusWarn, p.f(c), append(ev, f.profileEvidence(p)...)...)
}

// prefillDecodeFinding is the prompt/generation token-rate ratio: a gap of
// ~100× is physics (docs/verdict-rules.md); it is WARN only when heavy prompts
// hold back the first token (rule 6).
func (f *facts) prefillDecodeFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO, namePrefillDecode
	switch {
	case !f.prompt.ok || !f.gen.ok:
		return finding(p, ind, name, "", statusUnknown, f.unknown(p))
	case f.prompt.v == 0:
		return finding(p, ind, name, "", statusUnknown, p.f(pdIdle))
	}
	r := math.Inf(1)
	if f.gen.v > 0 {
		r = f.prompt.v / f.gen.v
	}
	ev := []string{p.f(evPrefillGap, rate(f.prompt.v), rate(f.gen.v), times(r), times(f.t.PrefillDecodeRatioHigh))}
	switch {
	case f.prefillBound():
		return finding(p, ind, name, times(r), statusWarn, p.f(pdHeavyTTFT), ev...)
	case r >= f.t.PrefillDecodeRatioHigh && f.ttftStatus() == statusOK:
		return finding(p, ind, name, times(r), statusOK, p.f(pdHeavy), ev...)
	case r >= f.t.PrefillDecodeRatioHigh:
		return finding(p, ind, name, times(r), statusOK, p.f(pdHeavyOnly), ev...)
	}
	return finding(p, ind, name, times(r), statusOK, p.f(pdPhysics), ev...)
}

// queueTimeFinding splits TTFT into time queued and the rest (prefill),
// where the engine has a queue-time histogram.
func (f *facts) queueTimeFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, nameQueueTime
	if f.m.GetQueueTime() == nil {
		return finding(p, ind, name, "", statusUnknown, p.f(queueTimeNotExposed))
	}
	share := f.queueTimeShare()
	if !share.ok {
		return finding(p, ind, name, "", statusUnknown, p.f(queueTimeNoData))
	}
	value := p.f(valueShareOfTTFT, percent(share.v))
	if f.checks.ttftExcludesQueue {
		value = p.f(valueShareOfWait, percent(share.v))
	}
	ev := []string{f.queueTimeSplit(p)}
	if f.queueTimeP99 != nil {
		ev = append(ev, p.f(evQueueTimeP99, p.percentile(f.queueTimeP99)))
	}
	switch {
	case share.v < f.t.QueueTimeShareWarn:
		return finding(p, ind, name, value, statusOK, p.f(queueTimeOK), ev...)
	case elevated(f.firstTokenStatus()):
		return finding(p, ind, name, value, statusWarn, p.f(queueTimeWarn), ev...)
	case f.ttftStatus() == statusOK && !f.checks.ttftExcludesQueue:
		return finding(p, ind, name, value, statusOK, p.f(queueTimeShort), ev...)
	}
	return finding(p, ind, name, value, statusOK, p.f(queueTimeMostly), ev...)
}

// interTokenStatus grades the P99 gap between output tokens.
func (f *facts) interTokenStatus() llmdiagv1.Status {
	if f.itlP99 == nil {
		return statusUnknown
	}
	return grade(f.itlP99.GetValue(), f.t.ITLP99Warn.Seconds(), f.t.ITLP99Crit.Seconds())
}

func (f *facts) interTokenFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_INTER_TOKEN, nameInterToken
	if f.itlP99 == nil {
		c := p.f(itlNotExposed)
		if f.m.GetInterToken() != nil {
			c = p.f(itlNoData)
		}
		return finding(p, ind, name, "", statusUnknown, c)
	}
	s := f.interTokenStatus()
	c := itlOK
	switch {
	case s == statusCrit:
		c = itlCrit
	case s == statusWarn:
		c = itlWarn
	}
	ev := []string{p.f(evLatencyLimits, p.seconds(f.t.ITLP99Warn.Seconds()), p.seconds(f.t.ITLP99Crit.Seconds()))}
	if f.itlP50 != nil && f.itlP50.GetValue() > 0 {
		ev = append(ev, p.f(evITLTail, p.seconds(f.itlP50.GetValue()), times(f.itlP99.GetValue()/f.itlP50.GetValue())))
	}
	if elevated(s) && f.heavyPrompts() {
		ev = append(ev, p.f(evITLPrefill))
	}
	return finding(p, ind, name, p.percentile(f.itlP99), s, p.f(c), ev...)
}

// abortFraction is aborted ÷ finished requests, at most 1; unknown when the
// engine does not tell aborted requests apart (never 0).
func (f *facts) abortFraction() opt {
	if !f.aborted.ok || !f.rps.ok {
		return opt{}
	}
	if f.rps.v == 0 {
		if f.aborted.v == 0 {
			return opt{}
		}
		return opt{v: 1, ok: true}
	}
	return opt{v: math.Min(f.aborted.v/f.rps.v, 1), ok: true}
}

func (f *facts) abortsStatus() llmdiagv1.Status {
	a := f.abortFraction()
	if !a.ok {
		return statusUnknown
	}
	return grade(a.v, f.t.AbortFractionWarn, f.t.AbortFractionCrit)
}

func (f *facts) abortsFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_ABORTS, nameAborts
	switch {
	case !f.aborted.ok:
		return finding(p, ind, name, "", statusUnknown, p.f(abortsNotExposed))
	case !f.rps.ok:
		return finding(p, ind, name, perSecond(f.aborted.v), statusUnknown, p.f(abortsNoRate))
	case f.rps.v == 0 && f.aborted.v == 0:
		return finding(p, ind, name, perSecond(0), statusUnknown, p.f(abortsNoRequests))
	}
	a := f.abortFraction()
	s := f.abortsStatus()
	c := abortsOK
	switch {
	case s == statusCrit:
		c = abortsCrit
	case s == statusWarn:
		c = abortsWarn
	}
	ev := []string{p.f(evAborts, perSecond(f.aborted.v), perSecond(f.rps.v), percent(a.v), exactPercent(f.t.AbortFractionWarn), exactPercent(f.t.AbortFractionCrit))}
	return finding(p, ind, name, percent(a.v), s, p.f(c), ev...)
}

// trendStatus is WARN when the mean E2E latency rises over the history.
func (f *facts) trendStatus() llmdiagv1.Status {
	switch tr := f.hist.trend; {
	case !tr.ok:
		return statusUnknown
	case tr.rising(f.t):
		return statusWarn
	}
	return statusOK
}

func (f *facts) trendFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_E2E_TREND, nameTrend
	tr := f.hist.trend
	if !tr.ok {
		return finding(p, ind, name, "", statusUnknown, p.f(trendUnknown, tr.points, minTrendPoints))
	}
	c := trendFlat
	switch {
	case tr.rising(f.t):
		c = trendRising
	case tr.falling(f.t):
		c = trendFalling
	}
	ev := []string{p.f(evTrend, p.seconds(tr.from), p.seconds(tr.to), signedPercent(tr.change), tr.points, p.seconds(tr.span.Seconds()), exactPercent(f.t.E2EMeanRise))}
	return finding(p, ind, name, p.f(valueTrend, signedPercent(tr.change), p.seconds(tr.span.Seconds())), f.trendStatus(), p.f(c), ev...)
}

// groupSlow returns the peer comparison whose whole group (node included)
// has a median P99 at the metric's warn level or above: slowness shared by
// every node serving the model is the model's or the deployment's, not the
// node's.
func (f *facts) groupSlow() (peerComparison, bool) {
	for _, c := range f.peers {
		warn := f.t.E2EP99Warn.Seconds()
		if c.metric == llmdiagv1.Indicator_INDICATOR_TTFT_P99 {
			warn = f.t.TTFTP99Warn.Seconds()
		}
		if c.groupMedian >= warn {
			return c, true
		}
	}
	return peerComparison{}, false
}

// comparisonName names the latency a peer comparison is about.
func comparisonName(p printer, c peerComparison) string {
	if c.metric == llmdiagv1.Indicator_INDICATOR_TTFT_P99 {
		return p.f(nameTTFTP99)
	}
	return p.f(nameE2EP99)
}

func (f *facts) peersFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_PEERS, namePeers
	c := f.peer
	s, con := statusOK, peersInLine
	_, slow := f.groupSlow()
	switch {
	case c.outlier:
		s, con = statusWarn, peersOutlier
	case slow:
		con = peersGroupSlow
	case c.ratio <= 1/f.t.OutlierRatio:
		con = peersFaster
	}
	var ev []string
	for _, x := range f.peers {
		ev = append(ev, p.f(evPeerMetric, comparisonName(p, x), p.seconds(x.own), p.seconds(x.median), times(x.ratio), x.peers, p.seconds(x.groupMedian), x.groupN))
	}
	ev = append(ev, p.f(evLoadSimilar, ratio(c.ownLoad), ratio(c.peerLoad), ratio(f.t.OutlierLoadMargin)))
	if g, ok := f.groupSlow(); ok {
		ev = append(ev, f.groupEvidence(p, g))
	}
	return finding(p, ind, name, p.f(valuePeers, times(c.ratio), c.peers), s, p.f(con), ev...)
}

// groupEvidence states the group's figures: "all 4 nodes serving m: median
// E2E P99 12 min (warn ≥ 1 min)".
func (f *facts) groupEvidence(p printer, g peerComparison) string {
	warn := f.t.E2EP99Warn
	if g.metric == llmdiagv1.Indicator_INDICATOR_TTFT_P99 {
		warn = f.t.TTFTP99Warn
	}
	return p.f(evGroupSlow, g.groupN, f.modelName(p), comparisonName(p, g), p.seconds(g.groupMedian), p.seconds(warn.Seconds()))
}

// modelName is the node's model, or "the model".
func (f *facts) modelName(p printer) string {
	if m := f.m.GetModel(); m != "" {
		return m
	}
	return p.f(theModel)
}

// stalenessFinding is the data's age for fresh data: OK, since data older
// than StaleAfter never reaches the rules.
func (f *facts) stalenessFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_STALENESS, nameStaleness
	if !f.staleness.ok {
		return finding(p, ind, name, "", statusUnknown, p.f(stalenessUnknown))
	}
	return finding(p, ind, name, p.seconds(f.staleness.v), statusOK, p.f(stalenessOK),
		p.f(evStalenessLimit, p.seconds(f.t.StaleAfter.Seconds())))
}

// staleFinding is the data's age when it is too old to judge.
func staleFinding(p printer, m *llmdiagv1.NodeMetrics, t Thresholds) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_STALENESS, nameStaleness
	ev := p.f(evStalenessLimit, p.seconds(t.StaleAfter.Seconds()))
	if s := m.GetStaleness(); s != nil && metrics.TooOld(s.AsDuration(), t.StaleAfter) {
		return finding(p, ind, name, p.seconds(s.AsDuration().Seconds()), statusCrit, p.f(stalenessCrit), ev)
	}
	return finding(p, ind, name, p.f(valueStaleFlagged), statusCrit, p.f(stalenessFlagged), ev)
}
