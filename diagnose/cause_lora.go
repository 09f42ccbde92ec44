package diagnose

import (
	"slices"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// loraContentionCause is LORA_CONTENTION: requests queue for LoRA adapters
// that are not loaded while every adapter slot (vLLM's max_lora) is held by
// other adapters, so the queue is adapter contention rather than a lack of
// batch room. Like a burst it explains the queue, the wait for the first
// token and the latency that wait adds.
var loraContentionCause = cause{
	id:       llmdiagv1.Cause_CAUSE_LORA_CONTENTION,
	name:     causeNameLoRAContention,
	explains: loraContentionExplains,
	ruledOut: (*facts).loraContentionRuledOut,
}

// loraContentionExplains: requests waiting for an adapter slot explain the
// queue, the queue/running ratio, the queued share of the first-token wait,
// TTFT P99, and the E2E tail and trend that wait lengthens; not gaps
// between tokens, which come after a request is admitted.
func loraContentionExplains(x *llmdiagv1.Finding) bool {
	switch x.GetIndicator() {
	case llmdiagv1.Indicator_INDICATOR_QUEUE, llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO,
		llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, llmdiagv1.Indicator_INDICATOR_TTFT_P99,
		llmdiagv1.Indicator_INDICATOR_E2E_P99, llmdiagv1.Indicator_INDICATOR_E2E_TREND:
		return true
	}
	return false
}

// loraSlots is what the node's metrics say of its LoRA adapters: those
// with requests running, those requests wait for, and max_lora.
type loraSlots struct {
	// exported is whether the engine exports its adapters at all.
	exported bool
	// named is whether the adapters are known by name: both counts read,
	// and the names agree with them.
	named            bool
	running, waiting []string
	// unloaded are the adapters waited for that no running request holds.
	unloaded []string
	max      opt
}

// loraSlots reads the node's LoRA adapters.
func (f *facts) loraSlots() loraSlots {
	m := f.m
	l := loraSlots{
		exported: m.LoraAdaptersRunning != nil || m.LoraAdaptersWaiting != nil,
		running:  m.GetLoraRunningAdapters(),
		waiting:  m.GetLoraWaitingAdapters(),
		max:      known(m.MaxLora),
	}
	l.named = m.LoraAdaptersRunning != nil && m.LoraAdaptersWaiting != nil &&
		float64(len(l.running)) == m.GetLoraAdaptersRunning() && float64(len(l.waiting)) == m.GetLoraAdaptersWaiting()
	for _, w := range l.waiting {
		if !slices.Contains(l.running, w) {
			l.unloaded = append(l.unloaded, w)
		}
	}
	return l
}

// full reports whether the adapters themselves show contention: some
// adapter is waited for, every one waited for is one no running request
// holds, and the running adapters fill max_lora. Whether the queue is made
// of those requests is loraContentionApplies's to say.
func (l loraSlots) full() bool {
	return l.exported && l.named && l.max.ok && len(l.waiting) > 0 && len(l.unloaded) == len(l.waiting) &&
		float64(len(l.running)) >= l.max.v
}

// loraContentionApplies is the rule: the adapters show contention
// (loraSlots.full) and requests are queued. As far as the metrics tell, the
// queue is those requests: every adapter the waiting requests name is one
// no running request holds. It comes after the saturation rules (a
// saturated queue is overload or a burst, whatever its requests wait for)
// and before prefill, decode, outliers and drained bursts, which would read
// the wait it adds to TTFT and E2E as theirs.
func (f *facts) loraContentionApplies([]*llmdiagv1.Finding) bool {
	return f.loraSlots().full() && f.queue.ok && f.queue.v > 0
}

// loraContentionRuledOut says why adapter contention does not explain the
// node, or what was missing to tell; "" when the engine exports no
// adapters (nothing to say of most nodes).
func (f *facts) loraContentionRuledOut(p printer, _ []*llmdiagv1.Finding) string {
	l := f.loraSlots()
	switch {
	case !l.exported:
		return ""
	case f.m.GetLoraAdaptersWaiting() == 0 && len(l.waiting) == 0:
		return p.f(roLoRANoWait)
	case f.m.GetLoraAdaptersWaiting() == 0:
		return "" // names waited for without a count: nothing to go on
	case !l.named || !l.max.ok:
		return p.f(roLoRAUnknown, count(f.m.GetLoraAdaptersWaiting()))
	case len(l.unloaded) < len(l.waiting):
		return p.f(roLoRALoaded, p.join(l.waiting))
	case float64(len(l.running)) < l.max.v:
		return p.f(roLoRASlotsFree, len(l.running), count(l.max.v))
	default:
		return p.f(roLoRANoQueue, p.join(l.unloaded), f.queueText())
	}
}

// loraContention is the verdict: WARN, or the worst status among the
// findings the contention explains (a queue/running ratio at its critical
// level makes it CRIT).
func (f *facts) loraContention(p printer, findings []*llmdiagv1.Finding) verdict {
	l := f.loraSlots()
	v := verdict{status: statusWarn, confidence: 0.8}
	for _, x := range findings {
		if elevated(x.GetStatus()) && explained(loraContentionExplains, x) {
			v.status = worse(v.status, x.GetStatus())
		}
	}
	running, waiting, slots := p.join(l.running), p.join(l.unloaded), count(l.max.v)
	v.summary = p.f(summaryLoRAContention, waiting, slots, running, f.queueText(), f.runningText())
	v.evidence = append(v.evidence,
		p.f(evLoRAContention, waiting, running, slots),
		p.f(evLoRAQueue, f.queueText(), f.runningText(), f.ratioText(), waiting))
	if share := f.queueTimeShare(); share.ok && share.v >= f.t.QueueTimeShareWarn {
		v.evidence = append(v.evidence, f.queueTimeSplit(p))
	}
	v.evidence = append(v.evidence, f.latencyEvidence(p)...)
	v.recs = []string{
		p.f(recLoRAMaxLoras, slots, len(l.running)+len(l.unloaded)),
		p.f(recLoRARoute, waiting),
	}
	return v
}
