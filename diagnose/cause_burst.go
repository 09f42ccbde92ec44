package diagnose

import (
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// burstCause is BURST: the queue saturated now but not yet for
// OverloadedAfter (rule 4, WARN), or queue spikes that drained and explain
// every finding off (rule 4′, checked after rules 6–8 because it rests on
// weaker evidence).
var burstCause = cause{
	id:       llmdiagv1.Cause_CAUSE_BURST,
	name:     causeNameBurst,
	explains: burstExplains,
	ruledOut: (*facts).burstRuledOut,
}

// burstExplains: bursts explain the queue, the wait for the first token and
// the latency tails, and KV pressure and aborts short of CRIT.
func burstExplains(x *llmdiagv1.Finding) bool {
	switch ind := x.GetIndicator(); ind {
	case llmdiagv1.Indicator_INDICATOR_QUEUE, llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO,
		llmdiagv1.Indicator_INDICATOR_TTFT_P99, llmdiagv1.Indicator_INDICATOR_QUEUE_TIME:
		return true
	case llmdiagv1.Indicator_INDICATOR_KV_PRESSURE, llmdiagv1.Indicator_INDICATOR_ABORTS:
		return x.GetStatus() != statusCrit
	default:
		return latencyIndicator(ind)
	}
}

// burstNowApplies is rule 4: queueing now (queueingNow), given that rule 3
// found the episode shorter than OverloadedAfter.
func (f *facts) burstNowApplies([]*llmdiagv1.Finding) bool { return f.queueingNow() }

// burstRuledOut says why bursts do not explain the node, or what was
// missing.
func (f *facts) burstRuledOut(p printer, findings []*llmdiagv1.Finding) string {
	t, h := f.t, f.hist
	switch {
	case h.spikes > 0:
		var rest []string
		for _, x := range findings {
			if elevated(x.GetStatus()) && !explained(burstExplains, x) {
				rest = append(rest, x.GetName())
			}
		}
		if len(rest) == 0 {
			rest = append(rest, p.f(restNothing))
		}
		return p.f(roBurstMinor, h.queueing, h.points, p.join(rest))
	case h.now && f.queue.ok:
		return p.f(roBurstSmall, count(f.queue.v), count(t.QueueSaturated))
	case h.now:
		return p.f(roBurstQueueUnknown)
	case !h.noHistory():
		return p.f(roNoBurst, h.points, p.seconds(h.span.Seconds()))
	case f.queue.ok || f.ratio.ok:
		return p.f(roBurstNoHistory)
	default:
		return p.f(roQueueUnknown)
	}
}

// queueingNow reports a queue above QueueSaturated now, or a saturated
// queue the hysteresis holds through a dip.
func (f *facts) queueingNow() bool { return f.hist.queueHold.on || f.hist.surgeNow }

// burstDrainedApplies is rule 4′: queue spikes that drained (or TTFT mostly
// queue time with no queue now: waits shorter than a refresh), and nothing
// the bursts cannot explain.
func (f *facts) burstDrainedApplies(findings []*llmdiagv1.Finding) bool {
	share := f.queueTimeShare()
	waited := share.ok && share.v >= f.t.QueueTimeShareWarn && elevated(f.firstTokenStatus())
	if f.hist.surges == 0 && !waited {
		return false
	}
	return explainsAll(burstExplains, findings)
}

// longestSurge is how long the longest queue spike in the history lasted.
func (f *facts) longestSurge(p printer) string {
	return p.seconds((time.Duration(f.hist.surge.longest) * f.hist.step).Seconds())
}

// burst is the verdict of both shapes of rule 4: queueing now that history says
// drains (WARN), and earlier spikes that drained with nothing else to
// explain (OK, or the status of the tail the bursts explain).
func (f *facts) burst(p printer, findings []*llmdiagv1.Finding) verdict {
	h := f.hist
	var v verdict
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
