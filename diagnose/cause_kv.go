package diagnose

import (
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// kvExhaustedCause is KV_EXHAUSTED (rule 2): the KV cache saturated, or
// requests preempted. It explains every other symptom: every latency
// suffers when requests are preempted and redone.
var kvExhaustedCause = cause{
	id:       llmdiagv1.Cause_CAUSE_KV_EXHAUSTED,
	name:     causeNameKVExhausted,
	explains: explainsEverything,
	ruledOut: (*facts).kvRuledOut,
}

// kvExhaustedApplies reports the KV cache saturated (held with hysteresis,
// saturation.go), or preemptions above PreemptionsPerSecond over the
// window.
func (f *facts) kvExhaustedApplies([]*llmdiagv1.Finding) bool {
	return f.hist.kvHold.on || (f.preempt.ok && f.preempt.v > f.t.PreemptionsPerSecond)
}

// kvRuledOut says why the cache is not exhausted, or what was missing.
func (f *facts) kvRuledOut(p printer, _ []*llmdiagv1.Finding) string {
	t := f.t
	noPreempt := f.preempt.ok && f.preempt.v == 0
	switch {
	case f.offloadByDesign():
		return p.f(roMemoryOffload, f.offloadTier(), percent(f.kv.v))
	case f.kv.below(t.KVWarn) && noPreempt:
		return p.f(roMemoryNoPreempt, percent(f.kv.v), exactPercent(t.KVWarn))
	case f.kv.below(t.KVWarn):
		return p.f(roMemory, percent(f.kv.v), exactPercent(t.KVWarn))
	case f.kv.below(t.KVCrit) && f.preempt.ok:
		return p.f(roMemoryNearFull, percent(f.kv.v), exactPercent(t.KVCrit))
	case f.kv.below(t.KVCrit):
		return p.f(roMemoryNearFullUnknown, percent(f.kv.v), exactPercent(t.KVCrit))
	case f.hist.kvHold.rising():
		return p.f(roMemoryNotHeld, percent(f.kv.v), exactPercent(t.KVCrit), f.hist.kvHold.streak, t.RoutingHold)
	default:
		return p.f(roMemoryUnknown)
	}
}

// kvExhausted is the verdict of rule 2: CRIT.
func (f *facts) kvExhausted(p printer, _ []*llmdiagv1.Finding) verdict {
	t, kvHold := f.t, f.hist.kvHold
	kvFull := kvHold.on
	preempting := f.preempt.ok && f.preempt.v > 0
	v := verdict{status: statusCrit}
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
