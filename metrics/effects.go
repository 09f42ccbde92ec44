package metrics

import (
	"slices"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// setEffects fills the cache and decoding effects of nm from newest and
// base (nil for the lifetime), differencing counters as rater does.
func setEffects(nm *llmdiagv1.NodeMetrics, r rater) {
	e := func(s *sample.Sample) *sample.Effects { return &s.Effects }
	inc := sample.Effects{
		PrefixCacheQueries: r.delta(func(s *sample.Sample) *float64 { return e(s).PrefixCacheQueries }),
		PrefixCacheHits:    r.delta(func(s *sample.Sample) *float64 { return e(s).PrefixCacheHits }),
		SpecDrafts:         r.delta(func(s *sample.Sample) *float64 { return e(s).SpecDrafts }),
		SpecDraftTokens:    r.delta(func(s *sample.Sample) *float64 { return e(s).SpecDraftTokens }),
		SpecAcceptedTokens: r.delta(func(s *sample.Sample) *float64 { return e(s).SpecAcceptedTokens }),
	}
	SetEffects(nm, &inc, &r.newest.Effects)
}

// SetEffects fills the cache and decoding effects of nm. inc holds the
// increases of the effect counters over the window (the whole counter for
// the lifetime; rates do as well, only their ratios are used), nil where
// unknown; newest is the newest read, for the gauges, the LoRA adapters,
// the offload tier, and which counters the engine exports. A ratio over
// counters that did not move in the window (no prompt looked up, no draft
// proposed) is absent, as is everything newest does not export. Where the
// engine gives both counters and its own gauge, the counters win. The
// direct scrape (Compute) and the Prometheus source both fill the effects
// here.
func SetEffects(nm *llmdiagv1.NodeMetrics, inc, newest *sample.Effects) {
	ne := newest
	hits, queries := inc.PrefixCacheHits, inc.PrefixCacheQueries
	switch {
	case hits != nil && queries != nil && *queries > 0:
		nm.PrefixCacheHitRate = sample.F(min(*hits / *queries, 1))
	case ne.PrefixCacheQueries == nil:
		nm.PrefixCacheHitRate = clone(ne.PrefixCacheHitRate)
	}

	accepted, drafted, drafts := inc.SpecAcceptedTokens, inc.SpecDraftTokens, inc.SpecDrafts
	switch {
	case accepted != nil && drafted != nil && *drafted > 0:
		nm.SpecDecodeAcceptanceRate = sample.F(min(*accepted / *drafted, 1))
	case ne.SpecDraftTokens == nil:
		nm.SpecDecodeAcceptanceRate = clone(ne.SpecAcceptRate)
	}
	switch {
	case accepted != nil && drafts != nil && *drafts > 0:
		// Each step emits the accepted drafts and one token of the target
		// model's own.
		nm.SpecDecodeAcceptLength = sample.F(1 + *accepted / *drafts)
	case ne.SpecDrafts == nil:
		nm.SpecDecodeAcceptLength = clone(ne.SpecAcceptLength)
	}

	nm.LoraAdaptersRunning = clone(ne.LoRAAdaptersRunning)
	nm.LoraAdaptersWaiting = clone(ne.LoRAAdaptersWaiting)
	nm.LoraRunningAdapters = slices.Clone(ne.LoRARunning)
	nm.LoraWaitingAdapters = slices.Clone(ne.LoRAWaiting)
	nm.MaxLora = clone(ne.LoRAMax)
	nm.KvOffload = ne.KVOffload
}

// delta is the increase of the counter get reads over the window (the
// whole counter for the lifetime); nil when rate would be.
func (r rater) delta(get func(*sample.Sample) *float64) *float64 {
	now := get(r.newest)
	if now == nil {
		return nil
	}
	if r.base == nil {
		return sample.F(*now)
	}
	then := get(r.base)
	if then == nil && !r.fromZero {
		return nil
	}
	return sample.F(increase(*now, then))
}
