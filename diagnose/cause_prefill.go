package diagnose

import (
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// prefillBoundCause is PREFILL_BOUND (rule 6): a high TTFT tail with little
// queueing and heavy prompts. It gives way to the peer comparison: when
// peers serving the same model are several times faster under similar
// load, the workload does not explain the slowness.
var prefillBoundCause = cause{
	id:           llmdiagv1.Cause_CAUSE_PREFILL_BOUND,
	name:         causeNamePrefillBound,
	explains:     prefillExplains,
	ruledOut:     (*facts).prefillRuledOut,
	weighedFirst: []llmdiagv1.Cause{llmdiagv1.Cause_CAUSE_NODE_OUTLIER},
}

// prefillExplains: heavy prompts explain the prompt rate, the
// prefill/decode ratio, the TTFT and latency tails, and aborts short of
// CRIT.
func prefillExplains(x *llmdiagv1.Finding) bool {
	switch ind := x.GetIndicator(); ind {
	case llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO,
		llmdiagv1.Indicator_INDICATOR_TTFT_P99:
		return true
	case llmdiagv1.Indicator_INDICATOR_ABORTS:
		return x.GetStatus() != statusCrit
	default:
		return latencyIndicator(ind)
	}
}

// prefillApplies is rule 6: prefillBound (findings.go), and not an outlier
// among its peers.
func (f *facts) prefillApplies([]*llmdiagv1.Finding) bool { return f.prefillBound() && !f.peer.outlier }

// prefillRuledOut says why prefill does not explain the node, or what was
// missing.
func (f *facts) prefillRuledOut(p printer, _ []*llmdiagv1.Finding) string {
	t, h := f.t, f.hist
	share := f.queueTimeShare()
	switch {
	case f.decodeWorker() && f.ttftP99 != nil && elevated(f.ttftStatus()): // role.go
		return p.f(roDecodeWorkerTTFT, p.seconds(f.ttftP99.GetValue()))
	case f.ttftP99 == nil:
		return p.f(roPrefillUnknown)
	case f.ttftStatus() == statusOK:
		return p.f(roPrefill, p.seconds(f.ttftP99.GetValue()), p.seconds(t.TTFTP99Warn.Seconds()))
	case share.ok && share.v >= t.QueueTimeShareWarn:
		return p.f(roPrefillQueue, p.seconds(f.ttftP99.GetValue()), percent(share.v))
	case !f.prompt.ok:
		return p.f(roPrefillPromptsUnknown, p.seconds(f.ttftP99.GetValue()))
	case !f.heavyPrompts():
		return p.f(roPrefillLight, p.seconds(f.ttftP99.GetValue()))
	case h.now || h.spikes > 0:
		return p.f(roPrefillSpikes, p.seconds(f.ttftP99.GetValue()))
	default:
		return p.f(roPrefillPeers)
	}
}

// prefill is the verdict of rule 6: TTFT's status.
func (f *facts) prefill(p printer, _ []*llmdiagv1.Finding) verdict {
	t := f.t
	v := verdict{status: f.ttftStatus()}
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
	f.addPrefillEffects(p, &v)
	return v
}
