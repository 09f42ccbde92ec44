package diagnose

import (
	"math"
	"slices"
	"strings"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
)

// verdict applies rules 2–8 to fresh data from a node that answers, then
// weighs the cause against every finding: what it explains, what it leaves
// unexplained, and how much is unknown.
func (f *facts) verdict(p printer, findings []*llmdiagv1.Finding) verdict {
	t, h := f.t, f.hist
	var v verdict
	switch {
	case h.kvHold.on || (f.preempt.ok && f.preempt.v > t.PreemptionsPerSecond):
		v = f.kvExhausted(p)
	case h.queueHold.on && (h.noHistory() || h.queueHold.length(h.at) >= t.OverloadedAfter):
		v = f.overloaded(p)
	case f.queueingNow():
		v = f.burst(p, findings)
	case f.recovering():
		v = f.recovered(p)
	case f.prefillBound() && !f.peer.outlier:
		v = f.prefill(p)
	case f.decodeBound() && !f.peer.outlier:
		v = f.decode(p)
	case f.peer.outlier:
		v = f.outlier(p)
	case f.burstDrained(findings):
		v = f.burst(p, findings)
	case f.decodeStalls(findings) && !f.peer.outlier:
		v = f.stalls(p)
	default:
		return f.healthy(p, findings)
	}
	v.ruledOut = f.ruledOut(p, v.cause, findings)
	f.weigh(p, &v, findings)
	return v
}

// queueingNow reports a queue above QueueSaturated now, or a saturated
// queue the hysteresis holds through a dip.
func (f *facts) queueingNow() bool { return f.hist.queueHold.on || f.hist.surgeNow }

// defaultRecovery is how long after a long episode drains the node reads as
// recovering when its window has no length (lifetime).
const defaultRecovery = 5 * time.Minute

// recovering reports whether the queue's last saturated episode lasted
// OverloadedAfter or longer and drained within the window: the window's
// latency still holds what the overload did.
func (f *facts) recovering() bool {
	q, t := f.hist.queueHold, f.t
	if q.on || !q.last.ok || q.lastLength() < t.OverloadedAfter {
		return false
	}
	within := defaultRecovery
	if w, lifetime, err := metrics.ParseWindow(f.m.GetWindow()); err == nil && !lifetime {
		within = w
	}
	return f.hist.at.Sub(q.last.drained) < within
}

// burstDrained reports whether the evidence fits rule 4's second shape:
// queue spikes that drained (or TTFT mostly queue time with no queue now:
// waits shorter than a refresh), and nothing the bursts cannot explain.
func (f *facts) burstDrained(findings []*llmdiagv1.Finding) bool {
	share := f.queueTimeShare()
	waited := share.ok && share.v >= f.t.QueueTimeShareWarn && elevated(f.firstTokenStatus())
	if f.hist.surges == 0 && !waited {
		return false
	}
	for _, x := range findings {
		if elevated(x.GetStatus()) && !explains(llmdiagv1.Cause_CAUSE_BURST, x) {
			return false
		}
	}
	return true
}

// explains reports whether cause c accounts for finding x being WARN or
// CRIT. Scrape errors are never explained by a load pattern; memory
// exhaustion and overload explain every other symptom.
func explains(c llmdiagv1.Cause, x *llmdiagv1.Finding) bool {
	ind, crit := x.GetIndicator(), x.GetStatus() == statusCrit
	if ind == llmdiagv1.Indicator_INDICATOR_SCRAPE {
		return false
	}
	latency := ind == llmdiagv1.Indicator_INDICATOR_E2E_P99 || ind == llmdiagv1.Indicator_INDICATOR_INTER_TOKEN ||
		ind == llmdiagv1.Indicator_INDICATOR_E2E_TREND
	switch c {
	case llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, llmdiagv1.Cause_CAUSE_OVERLOADED:
		return true
	case llmdiagv1.Cause_CAUSE_BURST:
		switch ind {
		case llmdiagv1.Indicator_INDICATOR_QUEUE, llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO,
			llmdiagv1.Indicator_INDICATOR_TTFT_P99, llmdiagv1.Indicator_INDICATOR_QUEUE_TIME:
			return true
		case llmdiagv1.Indicator_INDICATOR_KV_PRESSURE, llmdiagv1.Indicator_INDICATOR_ABORTS:
			return !crit
		}
		return latency
	case llmdiagv1.Cause_CAUSE_PREFILL_BOUND:
		switch ind {
		case llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO,
			llmdiagv1.Indicator_INDICATOR_TTFT_P99:
			return true
		case llmdiagv1.Indicator_INDICATOR_ABORTS:
			return !crit
		}
		return latency
	case llmdiagv1.Cause_CAUSE_DECODE_BOUND:
		switch ind {
		case llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_DECODE_SPEED:
			return true
		case llmdiagv1.Indicator_INDICATOR_ABORTS:
			return !crit
		}
		return latency
	case llmdiagv1.Cause_CAUSE_NODE_OUTLIER:
		switch ind {
		case llmdiagv1.Indicator_INDICATOR_PEERS, llmdiagv1.Indicator_INDICATOR_TTFT_P99,
			llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_DECODE_SPEED,
			llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, llmdiagv1.Indicator_INDICATOR_ABORTS:
			return true
		}
		return latency
	}
	return false
}

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

// weigh adjusts v for every finding: what the cause explains raises the
// confidence, what it leaves unexplained lowers it, is named in the
// evidence and can raise the status; unknown indicators lower it.
func (f *facts) weigh(p printer, v *verdict, findings []*llmdiagv1.Finding) {
	support := 0
	var off []string
	for _, x := range findings {
		if !elevated(x.GetStatus()) {
			continue
		}
		if explains(v.cause, x) {
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

// decodeBound reports whether the evidence fits rule 6 (peers aside): low
// queue, KV below warn, a long E2E tail and slow per-request decode.
func (f *facts) decodeBound() bool {
	if f.prefillWorker() { // role.go: a prefill worker's decode is not judged
		return false
	}
	kvHigh := f.kv.ok && f.kv.v >= f.t.KVWarn
	return !f.hist.now && !kvHigh && elevated(f.e2eStatus()) && f.slowDecode()
}

// decodeStalls reports whether decode stalls explain the node: output
// pausing a second or more between tokens (inter-token P99 CRIT), the queue
// not surging, KV below warn, and nothing off that decode does not explain;
// the shape decodeBound misses while per-request decode is not slow enough,
// or the tail not yet long enough.
func (f *facts) decodeStalls(findings []*llmdiagv1.Finding) bool {
	kvHigh := f.kv.ok && f.kv.v >= f.t.KVWarn
	if f.prefillWorker() || f.hist.surgeNow || kvHigh || f.interTokenStatus() != statusCrit {
		return false
	}
	for _, x := range findings {
		if elevated(x.GetStatus()) && !explains(llmdiagv1.Cause_CAUSE_DECODE_BOUND, x) {
			return false
		}
	}
	return true
}

// causeOrder is the order the rules consider causes in.
var causeOrder = []llmdiagv1.Cause{
	llmdiagv1.Cause_CAUSE_KV_EXHAUSTED,
	llmdiagv1.Cause_CAUSE_OVERLOADED,
	llmdiagv1.Cause_CAUSE_BURST,
	llmdiagv1.Cause_CAUSE_PREFILL_BOUND,
	llmdiagv1.Cause_CAUSE_DECODE_BOUND,
	llmdiagv1.Cause_CAUSE_NODE_OUTLIER,
}

// considered lists the causes the rules weighed before settling on won:
// those before it in order and, for the causes that give way to peers, the
// peer comparison. For HEALTHY and UNEXPLAINED, every cause.
func considered(won llmdiagv1.Cause) []llmdiagv1.Cause {
	var out []llmdiagv1.Cause
	for _, c := range causeOrder {
		if c == won {
			if won == llmdiagv1.Cause_CAUSE_PREFILL_BOUND || won == llmdiagv1.Cause_CAUSE_DECODE_BOUND {
				out = append(out, llmdiagv1.Cause_CAUSE_NODE_OUTLIER)
			}
			return out
		}
		if won == llmdiagv1.Cause_CAUSE_BURST && c == llmdiagv1.Cause_CAUSE_BURST {
			continue
		}
		out = append(out, c)
	}
	return out
}

// ruledOut says, for each cause considered before won, why it does not
// hold, or which figure was missing to check it.
func (f *facts) ruledOut(p printer, won llmdiagv1.Cause, findings []*llmdiagv1.Finding) []string {
	t, h := f.t, f.hist
	var out []string
	add := func(id msg, args ...any) { out = append(out, p.f(id, args...)) }
	for _, c := range considered(won) {
		switch c {
		case llmdiagv1.Cause_CAUSE_KV_EXHAUSTED:
			noPreempt := f.preempt.ok && f.preempt.v == 0
			switch {
			case f.kv.below(t.KVWarn) && noPreempt:
				add(roMemoryNoPreempt, percent(f.kv.v), exactPercent(t.KVWarn))
			case f.kv.below(t.KVWarn):
				add(roMemory, percent(f.kv.v), exactPercent(t.KVWarn))
			case f.kv.below(t.KVCrit) && f.preempt.ok:
				add(roMemoryNearFull, percent(f.kv.v), exactPercent(t.KVCrit))
			case f.kv.below(t.KVCrit):
				add(roMemoryNearFullUnknown, percent(f.kv.v), exactPercent(t.KVCrit))
			case f.hist.kvHold.rising():
				add(roMemoryNotHeld, percent(f.kv.v), exactPercent(t.KVCrit), f.hist.kvHold.streak, t.RoutingHold)
			default:
				add(roMemoryUnknown)
			}
		case llmdiagv1.Cause_CAUSE_OVERLOADED:
			q := h.queueHold
			switch {
			case q.on:
				add(roOverloadShort, p.seconds(q.length(h.at).Seconds()), p.seconds(t.OverloadedAfter.Seconds()))
			case q.last.ok && q.lastLength() >= t.OverloadedAfter:
				add(roOverloadRecovered, p.seconds(h.at.Sub(q.last.drained).Seconds()), p.seconds(q.lastLength().Seconds()))
			case f.queue.ok && h.now:
				add(roOverload, count(f.queue.v), f.ratioText(), count(t.QueueSaturated))
			case f.queue.ok && !h.now:
				add(roQueueing, count(f.queue.v), f.ratioText())
			case !h.now:
				add(roQueueUnknown)
			}
		case llmdiagv1.Cause_CAUSE_BURST:
			switch {
			case h.spikes > 0:
				var rest []string
				for _, x := range findings {
					if elevated(x.GetStatus()) && !explains(llmdiagv1.Cause_CAUSE_BURST, x) {
						rest = append(rest, x.GetName())
					}
				}
				if len(rest) == 0 {
					rest = append(rest, p.f(restNothing))
				}
				add(roBurstMinor, h.queueing, h.points, p.join(rest))
			case h.now && f.queue.ok:
				add(roBurstSmall, count(f.queue.v), count(t.QueueSaturated))
			case h.now:
				add(roBurstQueueUnknown)
			case !h.noHistory():
				add(roNoBurst, h.points, p.seconds(h.span.Seconds()))
			case f.queue.ok || f.ratio.ok:
				add(roBurstNoHistory)
			default:
				add(roQueueUnknown)
			}
		case llmdiagv1.Cause_CAUSE_PREFILL_BOUND:
			share := f.queueTimeShare()
			switch {
			case f.decodeWorker() && f.ttftP99 != nil && elevated(f.ttftStatus()): // role.go
				add(roDecodeWorkerTTFT, p.seconds(f.ttftP99.GetValue()))
			case f.ttftP99 == nil:
				add(roPrefillUnknown)
			case f.ttftStatus() == statusOK:
				add(roPrefill, p.seconds(f.ttftP99.GetValue()), p.seconds(t.TTFTP99Warn.Seconds()))
			case share.ok && share.v >= t.QueueTimeShareWarn:
				add(roPrefillQueue, p.seconds(f.ttftP99.GetValue()), percent(share.v))
			case !f.prompt.ok:
				add(roPrefillPromptsUnknown, p.seconds(f.ttftP99.GetValue()))
			case !f.heavyPrompts():
				add(roPrefillLight, p.seconds(f.ttftP99.GetValue()))
			case h.now || h.spikes > 0:
				add(roPrefillSpikes, p.seconds(f.ttftP99.GetValue()))
			default:
				add(roPrefillPeers)
			}
		case llmdiagv1.Cause_CAUSE_DECODE_BOUND:
			switch {
			case f.prefillWorker(): // role.go
				add(roPrefillWorkerDecode)
			case !f.perRequest.ok:
				add(roDecodeUnknown)
			case !f.slowDecode():
				add(roDecode, rate(f.perRequest.v), rate(t.DecodeTokensPerRequestLow))
			case f.e2eP99 != nil && !elevated(f.e2eStatus()):
				add(roDecodeTail, rate(f.perRequest.v), p.seconds(f.e2eP99.GetValue()))
			case f.e2eP99 == nil:
				add(roDecodeNoTail, rate(f.perRequest.v))
			default:
				add(roDecodeOther, rate(f.perRequest.v))
			}
		case llmdiagv1.Cause_CAUSE_NODE_OUTLIER:
			switch {
			case f.peer.peers > 0 && !f.peer.outlier:
				add(roOutlier, f.metricName(p), times(f.peer.ratio), f.peer.peers)
			case f.peer.peers == 0:
				add(roNoPeers, t.MinPeers, f.modelName(p))
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

func (f *facts) kvExhausted(p printer) verdict {
	t, kvHold := f.t, f.hist.kvHold
	kvFull := kvHold.on
	preempting := f.preempt.ok && f.preempt.v > 0
	v := verdict{cause: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, status: statusCrit}
	switch {
	case kvHold.dipping():
		v.summary = p.f(summaryKVHeld, exactPercent(t.KVCrit), p.seconds(kvHold.length(f.hist.at).Seconds()), percent(f.kv.v), kvHold.streak)
		v.confidence = 0.75
	case kvFull && preempting:
		v.summary = p.f(summaryKVFullPreempt, percent(f.kv.v), exactPercent(t.KVCrit), perSecond(f.preempt.v))
		v.confidence = 0.95
	case kvFull && f.preempt.ok:
		v.summary = p.f(summaryKVFullNoPreempt, percent(f.kv.v), exactPercent(t.KVCrit))
		v.confidence = 0.85
	case kvFull:
		v.summary = p.f(summaryKVFull, percent(f.kv.v), exactPercent(t.KVCrit))
		v.confidence = 0.85
	default:
		// Preemptions over the window with the cache not saturated now:
		// CRIT for what the window holds, yet routable (routing follows
		// saturation now).
		v.summary = p.f(summaryPreempt, perSecond(f.preempt.v))
		v.confidence = 0.8
	}
	if f.kv.ok {
		v.evidence = append(v.evidence, p.f(evKV, percent(f.kv.v), exactPercent(t.KVWarn), exactPercent(t.KVCrit)))
	}
	if kvHold.dipping() {
		v.evidence = append(v.evidence, p.f(evHeldDip, percent(f.kv.v), kvHold.streak, t.RoutingHold))
	}
	if preempting {
		v.evidence = append(v.evidence, p.f(evPreemptRate, perSecond(f.preempt.v), perSecond(t.PreemptionsPerSecond)))
	}
	if f.queue.ok {
		v.evidence = append(v.evidence, p.f(evQueueRunning, count(f.queue.v), f.runningText()))
	}
	v.evidence = append(v.evidence, f.latencyEvidence(p)...)
	shed := recKVShed
	if !(f.kv.ok && f.kv.v >= t.KVWarn) {
		shed = recKVShedPreempt
	}
	v.recs = []string{p.f(shed), p.f(recKVCapacity), p.f(recKVContext)}
	return v
}

func (f *facts) overloaded(p printer) verdict {
	t, h := f.t, f.hist
	q := h.queueHold
	length := q.length(h.at)
	v := verdict{cause: llmdiagv1.Cause_CAUSE_OVERLOADED, status: statusCrit, confidence: 0.75}
	switch {
	case h.noHistory():
		v.summary = p.f(summaryOverloadedNow, f.queueText(), f.ratioText())
		v.confidence = 0.5
	case length >= 2*t.OverloadedAfter:
		v.confidence += 0.1
		fallthrough
	default:
		v.summary = p.f(summaryOverloadedFor, p.seconds(length.Seconds()), f.queueText(), f.ratioText(), p.seconds(t.OverloadedAfter.Seconds()))
	}
	v.evidence = append(v.evidence, f.queueNowEvidence(p)...)
	if !h.noHistory() {
		v.evidence = append(v.evidence, f.historyEvidence(p))
	}
	v.evidence = append(v.evidence, f.latencyEvidence(p)...)
	v.recs = []string{p.f(recShed), p.f(recAddCapacity)}
	if f.profile.GetTensorParallel() > 1 {
		v.recs = append(v.recs, p.f(recOverloadTP, f.profile.GetTensorParallel()))
	}
	v.recs = append(v.recs, p.f(recAdmission))
	return v
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
	return ev
}

// longestSurge is how long the longest queue spike in the history lasted.
func (f *facts) longestSurge(p printer) string {
	return p.seconds((time.Duration(f.hist.surge.longest) * f.hist.step).Seconds())
}

// recovered is OVERLOADED just after it drained: WARN, routable again, for
// as long as the window's latency holds the episode (recovering).
func (f *facts) recovered(p printer) verdict {
	h := f.hist
	q := h.queueHold
	long, ago := q.lastLength(), h.at.Sub(q.last.drained)
	v := verdict{cause: llmdiagv1.Cause_CAUSE_OVERLOADED, status: statusWarn, confidence: 0.7}
	v.summary = p.f(summaryRecovering, p.seconds(long.Seconds()), p.seconds(ago.Seconds()))
	if f.queue.ok {
		v.evidence = append(v.evidence, p.f(evQueueRunning, count(f.queue.v), f.runningText()))
	}
	v.evidence = append(v.evidence, p.f(evRecovered, p.seconds(long.Seconds()), p.seconds(ago.Seconds()), q.episodes))
	if !h.noHistory() {
		v.evidence = append(v.evidence, f.historyEvidence(p))
	}
	v.evidence = append(v.evidence, f.latencyEvidence(p)...)
	v.recs = []string{p.f(recAddCapacity), p.f(recAdmission)}
	return v
}

// burst covers both shapes of rule 4: queueing now that history says
// drains (WARN), and earlier spikes that drained with nothing else to
// explain (OK, or the status of the tail the bursts explain).
func (f *facts) burst(p printer, findings []*llmdiagv1.Finding) verdict {
	h := f.hist
	v := verdict{cause: llmdiagv1.Cause_CAUSE_BURST}
	if f.queueingNow() {
		v.status = statusWarn
		if q := h.queueHold; q.on {
			v.summary = p.f(summaryQueueSaturated, p.seconds(q.length(h.at).Seconds()), count(f.queue.v), f.ratioText(), p.seconds(f.t.OverloadedAfter.Seconds()))
			v.confidence = 0.6
		} else {
			v.summary = p.f(summaryQueueRising, count(f.queue.v), f.ratioText())
			v.confidence = 0.5 + 0.4*(1-h.fraction())
		}
		v.evidence = append(v.evidence, f.queueNowEvidence(p)...)
	} else {
		v.status = worst(findings)
		var tail []string
		for _, x := range findings {
			if elevated(x.GetStatus()) {
				tail = append(tail, p.f(evReading, x.GetName(), x.GetValue()))
			}
		}
		switch {
		case h.surges == 0:
			v.summary = p.f(summaryBurstShort, percent(f.queueTimeShare().v), p.join(tail))
			v.confidence = 0.55
		case len(tail) > 0:
			v.summary = p.f(summaryBurstTail, h.surges, h.points, p.seconds(h.span.Seconds()), f.longestSurge(p), p.join(tail))
			v.confidence = 0.7
		default:
			v.summary = p.f(summaryBurstDrained, h.surges, h.points, p.seconds(h.span.Seconds()), f.longestSurge(p))
			v.confidence = 0.8
		}
		if f.queue.ok {
			v.evidence = append(v.evidence, p.f(evQueueRunning, count(f.queue.v), f.runningText()))
		}
	}
	if !h.noHistory() {
		v.evidence = append(v.evidence, f.historyEvidence(p))
	}
	if share := f.queueTimeShare(); share.ok && share.v >= f.t.QueueTimeShareWarn {
		v.evidence = append(v.evidence, f.queueTimeSplit(p))
	}
	v.evidence = append(v.evidence, f.latencyEvidence(p)...)
	v.recs = []string{p.f(recBurstKeep), p.f(recBurstSmooth)}
	if elevated(f.ttftStatus()) || elevated(f.e2eStatus()) {
		v.recs = append(v.recs, p.f(recBurstHeadroom))
	}
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
	cause := causePrefill
	if !f.queue.ok {
		cause = causePrefillQueueUnknown
	}
	v.summary = f.not(p, p.f(cause, heavy, p.seconds(f.ttftP99.GetValue())))
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
	case f.largeModel() && f.profile.GetTotalParamsBillions() > a:
		fs = append(fs, p.f(factorSizeMoE, model, billions(a), billions(f.profile.GetTotalParamsBillions())))
	case f.largeModel():
		fs = append(fs, p.f(factorSize, model, billions(a)))
	}
	if f.dataParallelOnly() {
		fs = append(fs, p.f(factorDataParallel, f.profile.GetDataParallel()))
	}
	if len(fs) == 0 {
		if f.running.ok && f.running.v > 0 {
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
	v.summary = f.not(p, p.f(causeDecode, factors, rate(f.perRequest.v)))
	if f.running.ok && f.running.v > 0 {
		v.summary += p.f(decodeConcurrency, p.f(runningPart, count(f.running.v)), p.seconds(f.e2eP99.GetValue()))
	} else {
		v.summary += p.f(decodeTail, p.seconds(f.e2eP99.GetValue()))
	}
	g, groupSlow := f.groupSlow()
	if groupSlow {
		v.summary += p.f(decodeGroup, g.groupN, f.modelName(p), comparisonName(p, g), p.seconds(g.groupMedian))
	}

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
	if groupSlow {
		v.evidence = append(v.evidence, f.groupEvidence(p, g))
	}
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
	if groupSlow {
		v.confidence += 0.05
	}

	switch tp := pr.GetTensorParallel(); {
	case f.dataParallelOnly():
		v.recs = append(v.recs, p.f(recTensorParallel, pr.GetDataParallel()))
	case tp > 1:
		v.recs = append(v.recs, p.f(recTPAlready, tp))
	}
	v.recs = append(v.recs, p.f(recConcurrency), p.f(recSpeculative), p.f(recClientTimeout, p.seconds(f.e2eP99.GetValue())))
	if pr.GetActiveParamsBillions() <= 0 && pr.GetDataParallel() == 0 && pr.GetTensorParallel() == 0 {
		v.recs = append(v.recs, p.f(recProfile))
	}
	return v
}

// stalls is DECODE_BOUND read from the gaps between tokens: prefills
// interrupting decode.
func (f *facts) stalls(p printer) verdict {
	pr := f.profile
	v := verdict{cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND, status: worse(statusWarn, f.interTokenStatus())}
	lockstep := ""
	if dp, ep := pr.GetDataParallel(), pr.GetExpertParallel(); dp > 1 && ep > 1 {
		lockstep = p.f(decodeLockstep, dp, ep)
	}
	median := "?"
	if f.itlP50 != nil {
		median = p.seconds(f.itlP50.GetValue())
	}
	cause := causeDecodeStalls
	if !(f.prompt.ok && f.prompt.v > 0) {
		cause = causeDecodeStallsBare
	}
	v.summary = f.not(p, p.f(cause, p.seconds(f.itlP99.GetValue()), median, lockstep))
	if f.queue.ok {
		v.evidence = append(v.evidence, p.f(evQueueRatio, count(f.queue.v), f.ratioText()))
	}
	if f.kv.ok {
		v.evidence = append(v.evidence, p.f(evKV, percent(f.kv.v), exactPercent(f.t.KVWarn), exactPercent(f.t.KVCrit)))
	}
	v.evidence = append(v.evidence, p.f(evLatencyLimits, p.seconds(f.t.ITLP99Warn.Seconds()), p.seconds(f.t.ITLP99Crit.Seconds())))
	if f.perRequest.ok {
		v.evidence = append(v.evidence, f.perRequestEvidence(p))
	}
	v.evidence = append(v.evidence, f.profileEvidence(p)...)
	if !f.hist.noHistory() {
		v.evidence = append(v.evidence, f.historyEvidence(p))
	}
	v.confidence = 0.6
	if lockstep != "" {
		v.confidence += 0.1
	}
	if f.queue.ok && f.kv.ok {
		v.confidence += 0.1
	}
	v.recs = []string{p.f(recChunkedPrefill), p.f(recSmallerChunks)}
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
	v.recs = []string{p.f(recOutlierDrain), p.f(recOutlierCompare)}
	return v
}

// healthy is rule 8: HEALTHY when every finding is OK or UNKNOWN. When
// some finding is WARN or CRIT and no cause explains it, the cause is
// UNEXPLAINED: the status is the worst finding's, the evidence names each
// one, and the recommendations follow from them.
func (f *facts) healthy(p printer, findings []*llmdiagv1.Finding) verdict {
	v := verdict{cause: llmdiagv1.Cause_CAUSE_HEALTHY, status: worst(findings)}
	var off []string
	var recs []msg
	addRec := func(m msg) {
		if !slices.Contains(recs, m) {
			recs = append(recs, m)
		}
	}
	_, groupSlow := f.groupSlow()
	for _, x := range findings {
		if !elevated(x.GetStatus()) {
			continue
		}
		off = append(off, p.f(evReading, x.GetName(), x.GetValue()))
		v.evidence = append(v.evidence, p.f(evReadingWhy, x.GetName(), x.GetValue(), x.GetConclusion()))
		addRec(recFor(x.GetIndicator(), groupSlow))
	}
	known := float64(f.coreKnown())
	v.ruledOut = f.ruledOut(p, llmdiagv1.Cause_CAUSE_UNEXPLAINED, findings)
	if len(off) == 0 {
		for _, x := range findings[:len(coreIndicators)] {
			if x.GetStatus() != statusUnknown {
				v.evidence = append(v.evidence, p.f(evReading, x.GetName(), x.GetValue()))
			}
		}
		v.summary = f.healthySummary(p)
		v.confidence = math.Max(minConfidence, math.Min(0.35+0.1*known, 0.95)-f.unknownPenalty(findings[len(coreIndicators):]))
		v.recs = []string{p.f(recNone)}
		return v
	}
	v.cause = llmdiagv1.Cause_CAUSE_UNEXPLAINED
	v.summary = p.f(summaryUnexplained, p.join(off))
	if g, ok := f.groupSlow(); ok {
		v.summary += p.f(summaryGroupSlow, g.groupN, f.modelName(p), comparisonName(p, g), p.seconds(g.groupMedian))
		v.evidence = append(v.evidence, f.groupEvidence(p, g))
	}
	if !f.hist.noHistory() {
		v.evidence = append(v.evidence, f.historyEvidence(p))
	}
	v.confidence = math.Max(minConfidence, 0.2+0.03*known-0.02*float64(len(off)-1))
	addRec(recWatch)
	for _, r := range recs {
		v.recs = append(v.recs, p.f(r))
	}
	return v
}

// recFor is the recommendation for an indicator no cause explains.
func recFor(ind llmdiagv1.Indicator, groupSlow bool) msg {
	switch ind {
	case llmdiagv1.Indicator_INDICATOR_KV_PRESSURE:
		return recKVWatch
	case llmdiagv1.Indicator_INDICATOR_PREEMPTIONS:
		return recPreemptWatch
	case llmdiagv1.Indicator_INDICATOR_E2E_P99, llmdiagv1.Indicator_INDICATOR_TTFT_P99:
		if groupSlow {
			return recGroupSlow
		}
		return recLatency
	case llmdiagv1.Indicator_INDICATOR_INTER_TOKEN:
		return recITL
	case llmdiagv1.Indicator_INDICATOR_ABORTS:
		return recAborts
	case llmdiagv1.Indicator_INDICATOR_E2E_TREND:
		return recTrend
	case llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, llmdiagv1.Indicator_INDICATOR_QUEUE, llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO:
		return recQueueTime
	case llmdiagv1.Indicator_INDICATOR_SCRAPE:
		return recScrape
	case llmdiagv1.Indicator_INDICATOR_DECODE_SPEED, llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE:
		return recConcurrency
	case llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO:
		return recChunkedPrefill
	case llmdiagv1.Indicator_INDICATOR_PEERS:
		return recOutlierCompare
	}
	return recWatch
}
