package diagnose

import (
	"math"
	"strings"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// verdict applies rules 2–8 to fresh data from a node that answers.
func (f *facts) verdict(p printer, findings []*llmdiagv1.Finding) verdict {
	t, h := f.t, f.hist
	switch {
	case (f.kv.ok && f.kv.v >= t.KVCrit) || (f.preempt.ok && f.preempt.v > t.PreemptionsPerSecond):
		return f.kvExhausted(p)
	case h.sustained(t):
		return f.overloaded(p)
	case h.now:
		return f.burst(p)
	case h.spikes > 0 && worst(findings) == statusOK:
		return f.burst(p)
	case f.prefillBound() && !f.peer.outlier:
		return f.prefill(p)
	case f.decodeBound() && !f.peer.outlier:
		return f.decode(p)
	case f.peer.outlier:
		return f.outlier(p)
	}
	return f.healthy(p, findings)
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

// decodeBound reports whether the evidence fits rule 6 (peers aside): low
// queue, KV below warn, a long E2E tail and slow per-request decode.
func (f *facts) decodeBound() bool {
	kvHigh := f.kv.ok && f.kv.v >= f.t.KVWarn
	return !f.hist.now && !kvHigh && elevated(f.e2eStatus()) && f.slowDecode()
}

// ruledOut lists, for the given causes, the ones the evidence positively
// excludes, each with why. A cause without the figures to exclude it is not
// listed.
func (f *facts) ruledOut(p printer, causes ...llmdiagv1.Cause) []string {
	t := f.t
	var out []string
	for _, c := range causes {
		switch c {
		case llmdiagv1.Cause_CAUSE_KV_EXHAUSTED:
			if f.kv.below(t.KVWarn) {
				m := roMemory
				if f.preempt.ok && f.preempt.v == 0 {
					m = roMemoryNoPreempt
				}
				out = append(out, p.f(m, percent(f.kv.v), exactPercent(t.KVWarn)))
			}
		case llmdiagv1.Cause_CAUSE_OVERLOADED:
			if f.hist.now && !f.hist.noHistory() {
				out = append(out, p.f(roOverload, f.hist.queueing, f.hist.points, exactPercent(t.SustainedFraction)))
			} else if f.queue.ok && !f.hist.now {
				out = append(out, p.f(roQueueing, count(f.queue.v), f.ratioText()))
			}
		case llmdiagv1.Cause_CAUSE_PREFILL_BOUND:
			if f.ttftStatus() == statusOK {
				out = append(out, p.f(roPrefill, p.seconds(f.ttftP99.GetValue()), p.seconds(t.TTFTP99Warn.Seconds())))
			}
		case llmdiagv1.Cause_CAUSE_DECODE_BOUND:
			if f.perRequest.ok && !f.slowDecode() {
				out = append(out, p.f(roDecode, rate(f.perRequest.v), rate(t.DecodeTokensPerRequestLow)))
			}
		case llmdiagv1.Cause_CAUSE_NODE_OUTLIER:
			if f.peer.peers > 0 && !f.peer.outlier {
				out = append(out, p.f(roOutlier, f.metricName(p), times(f.peer.ratio), f.peer.peers))
			}
		}
	}
	return out
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
// as the seed does: "Not memory, not queueing, but …".
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

func (f *facts) kvExhausted(p printer) verdict {
	t := f.t
	kvFull := f.kv.ok && f.kv.v >= t.KVCrit
	preempting := f.preempt.ok && f.preempt.v > 0
	v := verdict{cause: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, status: statusCrit}
	switch {
	case kvFull && preempting:
		v.summary = p.f(summaryKVFullPreempt, percent(f.kv.v), exactPercent(t.KVCrit), perSecond(f.preempt.v))
		v.confidence = 0.95
	case kvFull:
		v.summary = p.f(summaryKVFull, percent(f.kv.v), exactPercent(t.KVCrit))
		v.confidence = 0.85
	default:
		v.summary = p.f(summaryPreempt, perSecond(f.preempt.v))
		v.confidence = 0.8
	}
	if f.kv.ok {
		v.evidence = append(v.evidence, p.f(evKV, percent(f.kv.v), exactPercent(t.KVWarn), exactPercent(t.KVCrit)))
	}
	if preempting {
		v.evidence = append(v.evidence, p.f(evPreemptRate, perSecond(f.preempt.v), perSecond(t.PreemptionsPerSecond)))
	}
	if f.queue.ok {
		v.evidence = append(v.evidence, p.f(evQueueRunning, count(f.queue.v), f.runningText()))
	}
	v.evidence = append(v.evidence, f.latencyEvidence(p)...)
	v.recs = []string{p.f(recKVShed), p.f(recKVCapacity), p.f(recKVContext)}
	return v
}

func (f *facts) overloaded(p printer) verdict {
	t, h := f.t, f.hist
	v := verdict{cause: llmdiagv1.Cause_CAUSE_OVERLOADED, status: statusCrit}
	if h.noHistory() {
		v.summary = p.f(summaryOverloadedNow, count(f.queue.v), f.ratioText())
		v.confidence = 0.5
	} else {
		v.summary = p.f(summaryOverloaded, count(f.queue.v), f.ratioText(), h.queueing, h.points)
		v.confidence = 0.6 + 0.3*h.fraction()
		if h.span >= t.QueueCritFor {
			v.confidence += 0.05
		}
	}
	v.evidence = append(v.evidence, p.f(evQueueHigh, count(f.queue.v), count(t.QueueSaturated), f.ratioText(), f.runningText()))
	if !h.noHistory() {
		v.evidence = append(v.evidence, f.historyEvidence(p))
	}
	v.evidence = append(v.evidence, f.latencyEvidence(p)...)
	v.ruledOut = f.ruledOut(p, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED)
	v.recs = []string{p.f(recShed), p.f(recAddCapacity), p.f(recAdmission)}
	return v
}

// burst covers both shapes of rule 4: queueing now that history says
// drains (WARN), and earlier spikes that drained with nothing else to
// explain (OK).
func (f *facts) burst(p printer) verdict {
	h := f.hist
	v := verdict{cause: llmdiagv1.Cause_CAUSE_BURST}
	if h.now {
		v.status = statusWarn
		v.summary = p.f(summaryBurstNow, count(f.queue.v), h.queueing, h.points)
		v.confidence = 0.5 + 0.4*(1-h.fraction())
		v.evidence = append(v.evidence, p.f(evQueueHigh, count(f.queue.v), count(f.t.QueueSaturated), f.ratioText(), f.runningText()))
	} else {
		v.status = statusOK
		v.summary = p.f(summaryBurstDrained, h.spikes, h.points, p.seconds(h.span.Seconds()))
		v.confidence = 0.8
		v.evidence = append(v.evidence, p.f(evQueueRunning, count(f.queue.v), f.runningText()))
	}
	v.evidence = append(v.evidence, f.historyEvidence(p))
	v.ruledOut = f.ruledOut(p, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, llmdiagv1.Cause_CAUSE_OVERLOADED)
	v.recs = []string{p.f(recBurstKeep), p.f(recBurstSmooth)}
	return v
}

func (f *facts) prefill(p printer) verdict {
	t := f.t
	v := verdict{cause: llmdiagv1.Cause_CAUSE_PREFILL_BOUND, status: f.ttftStatus()}
	byRatio := f.gen.ok && (f.gen.v == 0 || f.prompt.v/f.gen.v >= t.PrefillDecodeRatioHigh)
	byLength := f.rps.ok && f.rps.v > 0 && f.prompt.v/f.rps.v >= t.HeavyPromptTokens
	var heavy string
	if byRatio {
		heavy = p.f(heavyRatio, times(f.prompt.v/f.gen.v))
	} else {
		heavy = p.f(heavyPerRequest, tokens(f.prompt.v/f.rps.v))
	}
	v.summary = f.not(p, p.f(causePrefill, heavy, p.seconds(f.ttftP99.GetValue())))
	v.evidence = append(v.evidence, p.f(evTTFTHigh, p.percentile(f.ttftP99), p.seconds(t.TTFTP99Warn.Seconds())))
	if f.queue.ok {
		v.evidence = append(v.evidence, p.f(evQueueRatio, count(f.queue.v), f.ratioText()))
	}
	if f.gen.ok && f.gen.v > 0 {
		v.evidence = append(v.evidence, p.f(evPrefillGap, rate(f.prompt.v), rate(f.gen.v), times(f.prompt.v/f.gen.v), times(t.PrefillDecodeRatioHigh)))
	}
	if f.rps.ok && f.rps.v > 0 {
		v.evidence = append(v.evidence, p.f(evPromptPerRequest, tokens(f.prompt.v/f.rps.v), tokens(t.HeavyPromptTokens)))
	}
	v.confidence = 0.6
	if byRatio && byLength {
		v.confidence += 0.1
	}
	if f.queue.ok {
		v.confidence += 0.1
	}
	if !f.hist.noHistory() {
		v.confidence += 0.1
	}
	v.ruledOut = f.ruledOut(p, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, llmdiagv1.Cause_CAUSE_OVERLOADED, llmdiagv1.Cause_CAUSE_NODE_OUTLIER)
	v.recs = []string{p.f(recChunkedPrefill), p.f(recPrefixCache), p.f(recDisaggregate)}
	return v
}

// decodeFactors names what keeps single-request decode slow: the model's
// size and a data-parallel strategy when the profile says so, else the
// concurrency.
func (f *facts) decodeFactors(p printer) []string {
	model := f.m.GetModel()
	if model == "" {
		model = p.f(theModel)
	}
	var fs []string
	switch a := f.profile.GetActiveParamsBillions(); {
	case a <= 0:
		fs = append(fs, p.f(factorCost, model))
	case f.largeModel():
		fs = append(fs, p.f(factorSize, model, billions(a)))
	}
	if f.dataParallelOnly() {
		fs = append(fs, p.f(factorDataParallel, f.profile.GetDataParallel()))
	}
	if len(fs) == 0 {
		if f.running.ok {
			fs = append(fs, p.f(factorConcurrency, count(f.running.v)))
		} else {
			fs = append(fs, p.f(factorConcurrencyUnknown))
		}
	}
	return fs
}

func (f *facts) decode(p printer) verdict {
	t, pr := f.t, f.profile
	v := verdict{cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND, status: worse(statusWarn, f.e2eStatus())}
	factors := strings.Join(f.decodeFactors(p), " + ")
	running := ""
	if f.running.ok {
		running = p.f(runningPart, count(f.running.v))
	}
	v.summary = f.not(p, p.f(causeDecode, factors, rate(f.perRequest.v))) +
		p.f(decodeConcurrency, running, p.seconds(f.e2eP99.GetValue()))

	if f.queue.ok {
		v.evidence = append(v.evidence, p.f(evQueueRatio, count(f.queue.v), f.ratioText()))
	}
	if f.kv.ok {
		v.evidence = append(v.evidence, p.f(evKV, percent(f.kv.v), exactPercent(t.KVWarn), exactPercent(t.KVCrit)))
	}
	v.evidence = append(v.evidence, p.f(evE2EHigh, p.percentile(f.e2eP99), p.seconds(t.E2EP99Warn.Seconds())))
	if f.e2eP50 != nil && f.e2eP50.GetValue() > 0 {
		v.evidence = append(v.evidence, p.f(evTailRatio, times(f.e2eP99.GetValue()/f.e2eP50.GetValue()), p.seconds(f.e2eP50.GetValue())))
	}
	v.evidence = append(v.evidence, f.perRequestEvidence(p))
	if f.prompt.ok && f.gen.ok && f.gen.v > 0 && f.prompt.v > 0 {
		v.evidence = append(v.evidence, p.f(evPrefillGap, rate(f.prompt.v), rate(f.gen.v), times(f.prompt.v/f.gen.v), times(t.PrefillDecodeRatioHigh)))
	}
	v.evidence = append(v.evidence, f.profileEvidence(p)...)
	if !f.hist.noHistory() {
		v.evidence = append(v.evidence, f.historyEvidence(p))
	}

	v.confidence = 0.5
	if pr.GetActiveParamsBillions() > 0 {
		v.confidence += 0.1
	}
	if pr.GetDataParallel() > 0 || pr.GetTensorParallel() > 0 {
		v.confidence += 0.1
	}
	if f.queue.ok && f.kv.ok {
		v.confidence += 0.1
	}
	if !f.hist.noHistory() {
		v.confidence += 0.1
	}

	v.ruledOut = f.ruledOut(p, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, llmdiagv1.Cause_CAUSE_OVERLOADED,
		llmdiagv1.Cause_CAUSE_PREFILL_BOUND, llmdiagv1.Cause_CAUSE_NODE_OUTLIER)

	if f.dataParallelOnly() {
		dp := pr.GetDataParallel()
		v.recs = append(v.recs, p.f(recTensorParallel, dp))
	}
	v.recs = append(v.recs, p.f(recConcurrency), p.f(recSpeculative), p.f(recClientTimeout, p.seconds(f.e2eP99.GetValue())))
	if pr.GetActiveParamsBillions() <= 0 && pr.GetDataParallel() == 0 && pr.GetTensorParallel() == 0 {
		v.recs = append(v.recs, p.f(recProfile))
	}
	return v
}

func (f *facts) outlier(p printer) verdict {
	t, c := f.t, f.peer
	s := f.e2eStatus()
	if c.metric == llmdiagv1.Indicator_INDICATOR_TTFT_P99 {
		s = f.ttftStatus()
	}
	v := verdict{cause: llmdiagv1.Cause_CAUSE_NODE_OUTLIER, status: worse(statusWarn, s)}
	model := f.m.GetModel()
	if model == "" {
		model = p.f(theModel)
	}
	name := f.metricName(p)
	v.summary = p.f(summaryOutlier, c.peers, model, name, p.seconds(c.own), times(c.ratio), p.seconds(c.median))
	v.evidence = []string{
		p.f(evOutlier, name, p.seconds(c.own), p.seconds(c.median), times(c.ratio), c.peers, times(t.OutlierRatio)),
		p.f(evLoadSimilar, ratio(c.ownLoad), ratio(c.peerLoad), ratio(t.OutlierLoadMargin)),
	}
	v.confidence = 0.6 + 0.05*math.Min(float64(c.peers-t.MinPeers), 4)
	if c.ratio >= 2*t.OutlierRatio {
		v.confidence += 0.1
	}
	v.ruledOut = f.ruledOut(p, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, llmdiagv1.Cause_CAUSE_OVERLOADED,
		llmdiagv1.Cause_CAUSE_PREFILL_BOUND, llmdiagv1.Cause_CAUSE_DECODE_BOUND)
	v.recs = []string{p.f(recOutlierDrain), p.f(recOutlierCompare)}
	return v
}

// healthy is rule 8. When some finding is WARN or CRIT but no rule explains
// it, the cause stays HEALTHY (no fault pattern matches), the status is the
// worst finding's and the summary names what to watch.
func (f *facts) healthy(p printer, findings []*llmdiagv1.Finding) verdict {
	v := verdict{cause: llmdiagv1.Cause_CAUSE_HEALTHY, status: worst(findings)}
	var watch []string
	for _, x := range findings {
		if x.GetStatus() == statusOK || x.GetStatus() == statusUnknown {
			continue
		}
		watch = append(watch, p.f(evReading, x.GetName(), x.GetValue()))
	}
	for _, x := range findings[:len(coreIndicators)] {
		if x.GetStatus() != statusUnknown {
			v.evidence = append(v.evidence, p.f(evReading, x.GetName(), x.GetValue()))
		}
	}
	known := float64(f.coreKnown())
	if len(watch) == 0 {
		v.summary = p.f(summaryHealthy)
		v.confidence = math.Min(0.35+0.1*known, 0.95)
		v.recs = []string{p.f(recNone)}
	} else {
		v.summary = p.f(summaryUnexplained, p.join(watch))
		v.confidence = 0.2 + 0.03*known
		v.recs = []string{p.f(recWatch)}
	}
	v.ruledOut = f.ruledOut(p, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, llmdiagv1.Cause_CAUSE_OVERLOADED,
		llmdiagv1.Cause_CAUSE_PREFILL_BOUND, llmdiagv1.Cause_CAUSE_DECODE_BOUND, llmdiagv1.Cause_CAUSE_NODE_OUTLIER)
	return v
}
