package diagnose

import (
	"strings"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// decodeBoundCause is DECODE_BOUND: slow per-request decode with a long E2E
// tail, explained by the model's size and parallel strategy (rule 7), or
// output stalling between tokens (rule 7′, checked after rules 6–8). Like
// prefill, it gives way to the peer comparison.
var decodeBoundCause = cause{
	id:           llmdiagv1.Cause_CAUSE_DECODE_BOUND,
	name:         causeNameDecodeBound,
	explains:     decodeExplains,
	ruledOut:     (*facts).decodeRuledOut,
	weighedFirst: []llmdiagv1.Cause{llmdiagv1.Cause_CAUSE_NODE_OUTLIER},
}

// decodeExplains: slow decode explains the generation rate, per-request
// decode speed, the latency tails, and aborts short of CRIT.
func decodeExplains(x *llmdiagv1.Finding) bool {
	switch ind := x.GetIndicator(); ind {
	case llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_DECODE_SPEED:
		return true
	case llmdiagv1.Indicator_INDICATOR_ABORTS:
		return x.GetStatus() != statusCrit
	default:
		return latencyIndicator(ind)
	}
}

// decodeRuledOut says why decode does not explain the node, or what was
// missing.
func (f *facts) decodeRuledOut(p printer, _ []*llmdiagv1.Finding) string {
	t := f.t
	switch {
	case f.prefillWorker(): // role.go
		return p.f(roPrefillWorkerDecode)
	case !f.perRequest.ok:
		return p.f(roDecodeUnknown)
	case !f.slowDecode():
		return p.f(roDecode, rate(f.perRequest.v), rate(t.DecodeTokensPerRequestLow))
	case f.e2eP99 != nil && !elevated(f.e2eStatus()):
		return p.f(roDecodeTail, rate(f.perRequest.v), p.seconds(f.e2eP99.GetValue()))
	case f.e2eP99 == nil:
		return p.f(roDecodeNoTail, rate(f.perRequest.v))
	default:
		return p.f(roDecodeOther, rate(f.perRequest.v))
	}
}

// decodeApplies is rule 7: low queue, KV below warn, a long E2E tail and
// slow per-request decode, and not an outlier among its peers.
func (f *facts) decodeApplies([]*llmdiagv1.Finding) bool {
	if f.prefillWorker() { // role.go: a prefill worker's decode is not judged
		return false
	}
	return !f.hist.now && !f.kvHigh() && elevated(f.e2eStatus()) && f.slowDecode() && !f.peer.outlier
}

// decodeStallsApplies is rule 7′: decode stalls explain the node: output
// pausing a second or more between tokens (inter-token P99 CRIT), the queue
// not surging, KV below warn, nothing off that decode does not explain, and
// not an outlier among its peers (a GPU cache an offload tier keeps full,
// offloadByDesign, is not KV high); the shape rule 7 misses while
// per-request decode is not slow enough, or the tail not yet long enough.
func (f *facts) decodeStallsApplies(findings []*llmdiagv1.Finding) bool {
	if f.prefillWorker() || f.hist.surgeNow || f.kvHigh() || f.interTokenStatus() != statusCrit {
		return false
	}
	return explainsAll(decodeExplains, findings) && !f.peer.outlier
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

// decode is the verdict of rule 7: WARN, or E2E's status.
func (f *facts) decode(p printer, _ []*llmdiagv1.Finding) verdict {
	t, pr := f.t, f.profile
	v := verdict{status: worse(statusWarn, f.e2eStatus())}
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
	f.addDecodeEffects(p, &v)
	f.gpuDecode(p, &v)
	return v
}

// stalls is the verdict of rule 7′, DECODE_BOUND read from the gaps between
// tokens: prefills interrupting decode. WARN, or the inter-token status.
func (f *facts) stalls(p printer, _ []*llmdiagv1.Finding) verdict {
	pr := f.profile
	v := verdict{status: worse(statusWarn, f.interTokenStatus())}
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
	f.gpuDecode(p, &v)
	return v
}
