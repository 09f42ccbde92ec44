package diagnose

import (
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
)

// overloadedCause is OVERLOADED: the queue saturated for OverloadedAfter
// without draining (rule 3, CRIT), or a long episode that drained within the
// window (rule 3′, WARN, recovering). Like memory exhaustion it explains
// every other symptom: every latency suffers when requests wait.
var overloadedCause = cause{
	id:       llmdiagv1.Cause_CAUSE_OVERLOADED,
	name:     causeNameOverloaded,
	explains: explainsEverything,
	ruledOut: (*facts).overloadedRuledOut,
}

// overloadedApplies reports the queue saturated (held with hysteresis) for
// OverloadedAfter or longer, or saturated now with no history to say how
// long.
func (f *facts) overloadedApplies([]*llmdiagv1.Finding) bool {
	h := f.hist
	return h.queueHold.on && (h.noHistory() || h.queueHold.length(h.at) >= f.t.OverloadedAfter)
}

// overloadedRuledOut says why the node is not overloaded, or what was
// missing; "" when the queue is unknown and surging now.
func (f *facts) overloadedRuledOut(p printer, _ []*llmdiagv1.Finding) string {
	t, h := f.t, f.hist
	q := h.queueHold
	switch {
	case q.on:
		return p.f(roOverloadShort, p.seconds(q.length(h.at).Seconds()), p.seconds(t.OverloadedAfter.Seconds()))
	case q.last.ok && q.lastLength() >= t.OverloadedAfter:
		return p.f(roOverloadRecovered, p.seconds(h.at.Sub(q.last.drained).Seconds()), p.seconds(q.lastLength().Seconds()))
	case f.queue.ok && h.now:
		return p.f(roOverload, count(f.queue.v), f.ratioText(), count(t.QueueSaturated))
	case f.queue.ok && !h.now:
		return p.f(roQueueing, count(f.queue.v), f.ratioText())
	case !h.now:
		return p.f(roQueueUnknown)
	}
	return ""
}

// defaultRecovery is how long after a long episode drains the node reads as
// recovering when its window has no length (lifetime).
const defaultRecovery = 5 * time.Minute

// recoveringApplies is rule 3′: the queue's last saturated episode lasted
// OverloadedAfter or longer and drained within the window, whose latency
// still holds what the overload did.
func (f *facts) recoveringApplies([]*llmdiagv1.Finding) bool {
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

// overloaded is the verdict of rule 3: CRIT.
func (f *facts) overloaded(p printer, _ []*llmdiagv1.Finding) verdict {
	t, h := f.t, f.hist
	q := h.queueHold
	length := q.length(h.at)
	v := verdict{status: statusCrit, confidence: 0.75}
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

// recovered is OVERLOADED just after it drained: WARN, routable again, for
// as long as the window's latency holds the episode (recoveringApplies).
func (f *facts) recovered(p printer, _ []*llmdiagv1.Finding) verdict {
	h := f.hist
	q := h.queueHold
	long, ago := q.lastLength(), h.at.Sub(q.last.drained)
	v := verdict{status: statusWarn, confidence: 0.7}
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
