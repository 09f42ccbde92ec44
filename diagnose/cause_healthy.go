package diagnose

import (
	"math"
	"slices"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// healthy is rule 9: HEALTHY when every finding is OK or UNKNOWN. When
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
		addRec(f.recFor(x.GetIndicator(), groupSlow))
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
func (f *facts) recFor(ind llmdiagv1.Indicator, groupSlow bool) msg {
	if m, ok := f.gpuRec(ind); ok {
		return m
	}
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
