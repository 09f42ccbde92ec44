package diagnose

import (
	"math"
	"slices"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Prefill/decode disaggregation (docs/verdict-rules.md, "Roles").
//
// A prefill worker computes each prompt's KV cache and hands it to a decode
// worker; it produces one token per request, so its decode speed, generation
// rate and gaps between tokens say nothing about it and are not judged. A
// decode worker receives the KV cache before its first token: its TTFT
// includes the transfer (and, as the client sees it, the prefill worker's
// queue and prefill), so it is not evidence of PREFILL_BOUND. Peers are
// nodes of the same model and the same role.
//
// The KV-transfer figures, where the engine exposes them, become findings:
// the mean time of one transfer, the bytes per second, and the failures.

// KV-transfer limits: the mean time of one transfer (a KV cache of a long
// prompt is some hundred MB to a few GB, milliseconds over RDMA, seconds
// over TCP), and the share of transfers that fail.
const (
	kvTransferWarn        = 0.5 // seconds
	kvTransferCrit        = 2.0 // seconds
	kvTransferFailureCrit = 0.05
)

// roleOf is m's role, unspecified read as both.
func roleOf(m *llmdiagv1.NodeMetrics) llmdiagv1.Role {
	if r := m.GetRole(); r != llmdiagv1.Role_ROLE_UNSPECIFIED {
		return r
	}
	return llmdiagv1.Role_ROLE_BOTH
}

// sameRole reports whether two nodes play the same role: only such nodes
// are compared as peers.
func sameRole(a, b *llmdiagv1.NodeMetrics) bool { return roleOf(a) == roleOf(b) }

func (f *facts) prefillWorker() bool { return roleOf(f.m) == llmdiagv1.Role_ROLE_PREFILL }
func (f *facts) decodeWorker() bool  { return roleOf(f.m) == llmdiagv1.Role_ROLE_DECODE }

// notJudgedOnPrefill are the indicators a prefill worker is not judged on:
// its decode, and the prefill/decode ratio, which one token per request
// makes huge by design.
var notJudgedOnPrefill = []llmdiagv1.Indicator{
	llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE,
	llmdiagv1.Indicator_INDICATOR_DECODE_SPEED,
	llmdiagv1.Indicator_INDICATOR_INTER_TOKEN,
	llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO,
}

// roleFindings adjusts out for the node's role and appends the role and
// KV-transfer rows: a prefill worker's decode rows read OK, not judged (an
// unknown one stays unknown); a decode worker's TTFT row says it includes
// the transfer.
func (f *facts) roleFindings(p printer, out []*llmdiagv1.Finding) []*llmdiagv1.Finding {
	for _, x := range out {
		switch {
		case f.prefillWorker() && slices.Contains(notJudgedOnPrefill, x.GetIndicator()) && x.GetStatus() != statusUnknown:
			x.Status, x.Conclusion = statusOK, p.f(roleNotJudged)
		case f.decodeWorker() && x.GetIndicator() == llmdiagv1.Indicator_INDICATOR_TTFT_P99:
			x.Evidence = append(x.Evidence, f.transferShare(p))
		}
	}
	if r := roleOf(f.m); r == llmdiagv1.Role_ROLE_PREFILL || r == llmdiagv1.Role_ROLE_DECODE {
		value, c := p.f(valueRolePrefill), rolePrefill
		if r == llmdiagv1.Role_ROLE_DECODE {
			value, c = p.f(valueRoleDecode), roleDecode
		}
		out = append(out, finding(p, llmdiagv1.Indicator_INDICATOR_ROLE, nameRole, value, statusOK, p.f(c),
			p.f(evRoleSource, quote(f.m.GetRoleSource()))))
	}
	return append(out, f.kvTransferFindings(p)...)
}

// transferShare says what part of the TTFT the KV transfer is.
func (f *facts) transferShare(p printer) string {
	mean := known(f.m.KvTransferSecondsMean)
	if !mean.ok {
		return p.f(evTTFTTransferUnknown)
	}
	if f.ttftMean.ok && f.ttftMean.v > 0 {
		return p.f(evTTFTTransfer, p.seconds(mean.v), percent(math.Min(mean.v/f.ttftMean.v, 1)), p.seconds(f.ttftMean.v))
	}
	return p.f(evTTFTTransferNoMean, p.seconds(mean.v))
}

// kvTransferFindings are the KV-transfer rows the engine exposes figures
// for; none when it exposes none.
func (f *facts) kvTransferFindings(p printer) []*llmdiagv1.Finding {
	var out []*llmdiagv1.Finding
	n := known(f.m.KvTransfersPerSecond)
	if mean := known(f.m.KvTransferSecondsMean); mean.ok {
		s := grade(mean.v, kvTransferWarn, kvTransferCrit)
		c := kvTimeOK
		if elevated(s) {
			c = kvTimeSlow
		}
		ev := []string{p.f(evKVTransferLimits, p.seconds(kvTransferWarn), p.seconds(kvTransferCrit))}
		if n.ok {
			ev = append(ev, p.f(evKVTransfers, perSecond(n.v)))
		}
		out = append(out, finding(p, llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_TIME, nameKVTransferTime, p.seconds(mean.v), s, p.f(c), ev...))
	} else if n.ok && n.v == 0 {
		out = append(out, finding(p, llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_TIME, nameKVTransferTime, perSecond(0), statusOK, p.f(kvTimeNone)))
	}
	if b := known(f.m.KvTransferBytesPerSecond); b.ok {
		var ev []string
		if n.ok && n.v > 0 {
			ev = append(ev, p.f(evKVPerTransfer, byteSize(b.v/n.v)))
		}
		out = append(out, finding(p, llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_VOLUME, nameKVTransferVolume, byteSize(b.v)+"/s", statusOK, p.f(kvVolume), ev...))
	}
	if fail := known(f.m.KvTransferFailuresPerSecond); fail.ok {
		s, c := statusOK, kvFailNone
		var ev []string
		if fail.v > 0 {
			s, c = statusWarn, kvFailSome
			if n.ok && n.v+fail.v > 0 {
				share := fail.v / (n.v + fail.v)
				if share >= kvTransferFailureCrit {
					s = statusCrit
				}
				ev = append(ev, p.f(evKVFailShare, percent(share), exactPercent(kvTransferFailureCrit)))
			}
		}
		out = append(out, finding(p, llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_FAILURES, nameKVTransferFailures, perSecond(fail.v), s, p.f(c), ev...))
	}
	return out
}

// roleVerdict completes v for the node's role: what a decode worker's high
// TTFT is made of, why a prefill worker's decode is not judged, and what to
// do about slow or failing transfers.
func (f *facts) roleVerdict(p printer, v *verdict, findings []*llmdiagv1.Finding) {
	elevatedInd := func(ind llmdiagv1.Indicator) bool {
		for _, x := range findings {
			if x.GetIndicator() == ind && elevated(x.GetStatus()) {
				return true
			}
		}
		return false
	}
	slow := elevatedInd(llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_TIME)
	switch {
	case f.decodeWorker() && elevated(f.ttftStatus()):
		if v.cause == llmdiagv1.Cause_CAUSE_UNEXPLAINED {
			if slow {
				v.summary = p.f(summaryDecodeTransfer, p.seconds(f.ttftP99.GetValue()), p.seconds(known(f.m.KvTransferSecondsMean).v))
			} else {
				v.summary = p.f(summaryDecodeTTFT, p.seconds(f.ttftP99.GetValue()))
			}
		}
		v.recs = firstNew(v.recs, p.f(recPrefillWorkers))
	case f.prefillWorker() && v.cause == llmdiagv1.Cause_CAUSE_PREFILL_BOUND:
		// Already disaggregated: the advice is more prefill workers.
		if i := slices.Index(v.recs, p.f(recDisaggregate)); i >= 0 {
			v.recs[i] = p.f(recAddPrefillWorkers)
		}
	}
	if slow {
		v.recs = firstNew(v.recs, p.f(recKVTransfer))
	}
	if elevatedInd(llmdiagv1.Indicator_INDICATOR_KV_TRANSFER_FAILURES) {
		v.recs = firstNew(v.recs, p.f(recKVFailures))
	}
}

// firstNew puts s first in list unless it is there already: what the role
// says to do comes before the cause's generic advice.
func firstNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return slices.Insert(list, 0, s)
}
