package diagnose

import (
	"slices"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Levels of the cache and decoding effects. They grade what the evidence
// says, never a finding's status: the effect rows are OK, informational,
// and change no verdict by themselves.
const (
	// prefixHitHigh: from this hit rate on, most prompt tokens skip
	// prefill, which explains a fast prefill (and a TTFT below what the
	// prompt rate suggests).
	prefixHitHigh = 0.5
	// prefixHitLow: below this hit rate nearly every prompt is prefilled
	// in full.
	prefixHitLow = 0.1
	// specAcceptLow: below this share of draft tokens accepted, the draft
	// model's work is mostly thrown away and speculative decoding can make
	// decode slower than without it.
	specAcceptLow = 0.3
)

// effectFindings are the rows of the cache and decoding effects the node
// exports (none for an engine that exports none): prefix-cache hit rate,
// speculative acceptance and LoRA adapters, all OK.
func (f *facts) effectFindings(p printer) []*llmdiagv1.Finding {
	var out []*llmdiagv1.Finding
	m := f.m
	if m.PrefixCacheHitRate != nil {
		r := m.GetPrefixCacheHitRate()
		c := prefixSome
		switch {
		case r >= prefixHitHigh:
			c = prefixHigh
		case r < prefixHitLow:
			c = prefixLow
		}
		out = append(out, finding(p, llmdiagv1.Indicator_INDICATOR_PREFIX_CACHE_HIT_RATE, namePrefixCache,
			percent(r), statusOK, p.f(c), f.prefixEvidence(p)))
	}
	if ev := f.specEvidence(p); ev != "" {
		c, value := specGain, p.f(valueSpec, f.specAcceptText(), f.specLengthText())
		if a := m.SpecDecodeAcceptanceRate; a != nil && *a < specAcceptLow {
			c = specLowGain
		}
		out = append(out, finding(p, llmdiagv1.Indicator_INDICATOR_SPEC_DECODE_ACCEPTANCE, nameSpec,
			value, statusOK, p.f(c), ev))
	}
	if m.LoraAdaptersRunning != nil || m.LoraAdaptersWaiting != nil {
		run, wait := f.loraCounts()
		var conclusion string
		if wait > 0 {
			conclusion = p.f(loraWaiting, count(wait))
		} else {
			conclusion = p.f(loraNoWait)
		}
		out = append(out, finding(p, llmdiagv1.Indicator_INDICATOR_LORA_ADAPTERS, nameLoRA,
			p.f(valueLoRA, count(run), count(wait)), statusOK, conclusion))
	}
	return out
}

// prefixEvidence states the prefix-cache hit rate.
func (f *facts) prefixEvidence(p printer) string {
	return p.f(evPrefixCache, percent(f.m.GetPrefixCacheHitRate()))
}

// specAcceptText and specLengthText are the acceptance and the tokens
// per step, "?" when unknown.
func (f *facts) specAcceptText() string {
	if a := f.m.SpecDecodeAcceptanceRate; a != nil {
		return percent(*a)
	}
	return "?"
}

func (f *facts) specLengthText() string {
	if l := f.m.SpecDecodeAcceptLength; l != nil {
		return trimFloat(*l, 2)
	}
	return "?"
}

// specEvidence states speculative decoding's acceptance; "" when the node
// shows none.
func (f *facts) specEvidence(p printer) string {
	m := f.m
	if m.SpecDecodeAcceptanceRate == nil && m.SpecDecodeAcceptLength == nil {
		return ""
	}
	if a := m.SpecDecodeAcceptanceRate; a != nil && *a < specAcceptLow {
		return p.f(evSpecLow, f.specAcceptText(), f.specLengthText(), exactPercent(specAcceptLow))
	}
	return p.f(evSpec, f.specAcceptText(), f.specLengthText())
}

// loraCounts are the adapters running and waited for, 0 when unknown.
func (f *facts) loraCounts() (running, waiting float64) {
	return f.m.GetLoraAdaptersRunning(), f.m.GetLoraAdaptersWaiting()
}

// loraEvidence says requests wait for LoRA adapters, when they do and
// requests are queued; nil otherwise.
func (f *facts) loraEvidence(p printer) []string {
	run, wait := f.loraCounts()
	if wait <= 0 || !(f.queue.ok && f.queue.v > 0) {
		return nil
	}
	return []string{p.f(evLoRAWaiting, count(wait), count(run))}
}

// addDecodeEffects adds to a decode verdict what speculative decoding
// says about its speed, and, with low acceptance, what to check.
func (f *facts) addDecodeEffects(p printer, v *verdict) {
	ev := f.specEvidence(p)
	if ev == "" {
		return
	}
	v.evidence = append(v.evidence, ev)
	// Speculative decoding is on already: not a thing to consider.
	already := p.f(recSpeculative)
	v.recs = slices.DeleteFunc(v.recs, func(r string) bool { return r == already })
	if a := f.m.SpecDecodeAcceptanceRate; a != nil && *a < specAcceptLow {
		v.recs = append(v.recs, p.f(recSpecDraft, percent(*a)))
	}
}

// addPrefillEffects adds to a prefill verdict the prefix-cache hit rate:
// low, the prompts are prefilled in full; high, prefill is already spared
// what a cache can spare.
func (f *facts) addPrefillEffects(p printer, v *verdict) {
	if f.m.PrefixCacheHitRate != nil {
		v.evidence = append(v.evidence, f.prefixEvidence(p))
	}
}
