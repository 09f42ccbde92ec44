package diagnose

import (
	"math"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// nodeOutlierCause is NODE_OUTLIER (rule 8): latency several times the
// median of peers serving the same model under similar load (peers.go).
var nodeOutlierCause = cause{
	id:       llmdiagv1.Cause_CAUSE_NODE_OUTLIER,
	name:     causeNameNodeOutlier,
	explains: outlierExplains,
	ruledOut: (*facts).outlierRuledOut,
}

// outlierExplains: a node slower than its peers explains its latency,
// token rates, queue time and aborts.
func outlierExplains(x *llmdiagv1.Finding) bool {
	switch ind := x.GetIndicator(); ind {
	case llmdiagv1.Indicator_INDICATOR_PEERS, llmdiagv1.Indicator_INDICATOR_TTFT_P99,
		llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_DECODE_SPEED,
		llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, llmdiagv1.Indicator_INDICATOR_ABORTS:
		return true
	default:
		return latencyIndicator(ind)
	}
}

// outlierApplies is rule 8: the peer comparison found the node an outlier.
func (f *facts) outlierApplies([]*llmdiagv1.Finding) bool { return f.peer.outlier }

// outlierRuledOut says why the node is not an outlier, or that it has too
// few peers; "" when it is one (and an earlier cause won).
func (f *facts) outlierRuledOut(p printer, _ []*llmdiagv1.Finding) string {
	t := f.t
	switch {
	case f.peer.peers > 0 && !f.peer.outlier:
		return p.f(roOutlier, f.metricName(p), times(f.peer.ratio), f.peer.peers)
	case f.peer.peers == 0:
		return p.f(roNoPeers, t.MinPeers, f.modelName(p))
	}
	return ""
}

// outlier is the verdict of rule 8: WARN, or the compared latency's status.
func (f *facts) outlier(p printer, _ []*llmdiagv1.Finding) verdict {
	t, c := f.t, f.peer
	s := f.e2eStatus()
	if c.metric == llmdiagv1.Indicator_INDICATOR_TTFT_P99 {
		s = f.ttftStatus()
	}
	v := verdict{status: worse(statusWarn, s)}
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
