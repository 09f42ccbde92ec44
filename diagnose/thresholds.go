package diagnose

import (
	"errors"
	"fmt"
	"time"
)

// Thresholds are the limits the verdict rules compare indicators against. The
// yaml tags let a configuration file override any of them: decode the file
// over DefaultThresholds() so that keys it leaves out keep their defaults, then
// call Validate.
type Thresholds struct {
	// StaleAfter is the age beyond which data is no longer fresh, whatever
	// NodeMetrics.stale says.
	StaleAfter time.Duration `yaml:"stale_after"`

	// KVSaturated is the KV pressure (0..1) at which the load score reaches 1.
	KVSaturated float64 `yaml:"kv_saturated"`
	// KVWarn is the KV pressure at which the KV finding turns WARN.
	KVWarn float64 `yaml:"kv_warn"`
	// KVCrit is the KV pressure at which the node is KV_EXHAUSTED.
	KVCrit float64 `yaml:"kv_crit"`
	// PreemptionsPerSecond is the preemption rate above which the node is
	// KV_EXHAUSTED; any rate above 0 is reported as WARN.
	PreemptionsPerSecond float64 `yaml:"preemptions_per_second"`

	// QueueSaturated is the number of waiting requests above which the node
	// counts as queueing, and at which the load score reaches 1.
	QueueSaturated float64 `yaml:"queue_saturated"`
	// QueueCrit is the number of waiting requests that, held for QueueCritFor,
	// makes the queue finding CRIT.
	QueueCrit float64 `yaml:"queue_crit"`
	// QueueCritFor is how long the queue must stay above QueueCrit.
	QueueCritFor time.Duration `yaml:"queue_crit_for"`
	// QueueRunningRatioWarn is the queue/running ratio at which the ratio
	// finding turns WARN.
	QueueRunningRatioWarn float64 `yaml:"queue_running_ratio_warn"`
	// QueueRunningRatioCrit is the queue/running ratio at which the ratio
	// finding turns CRIT and the node counts as queueing whatever the queue
	// length.
	QueueRunningRatioCrit float64 `yaml:"queue_running_ratio_crit"`
	// SustainedFraction is the share of the history (refreshes with a known
	// queue, the current one included) that must be queueing for the queue to
	// count as sustained: OVERLOADED rather than BURST.
	SustainedFraction float64 `yaml:"sustained_fraction"`

	// TTFTP99Warn and TTFTP99Crit grade the P99 time to first token.
	TTFTP99Warn time.Duration `yaml:"ttft_p99_warn"`
	TTFTP99Crit time.Duration `yaml:"ttft_p99_crit"`
	// E2EP99Warn and E2EP99Crit grade the P99 end-to-end latency.
	E2EP99Warn time.Duration `yaml:"e2e_p99_warn"`
	E2EP99Crit time.Duration `yaml:"e2e_p99_crit"`
	// E2EMeanRise is the relative rise of the mean E2E latency over the
	// history (0.5 = +50%) that is reported as "rising".
	E2EMeanRise float64 `yaml:"e2e_mean_rise"`
	// ITLP99Warn and ITLP99Crit grade the P99 gap between output tokens.
	ITLP99Warn time.Duration `yaml:"itl_p99_warn"`
	ITLP99Crit time.Duration `yaml:"itl_p99_crit"`
	// QueueTimeShareWarn is the share of mean TTFT spent queued (mean
	// queue time / mean TTFT) from which TTFT counts as mostly waiting
	// rather than prefill.
	QueueTimeShareWarn float64 `yaml:"queue_time_share_warn"`
	// AbortFractionWarn and AbortFractionCrit grade the share of finished
	// requests that ended aborted or in error.
	AbortFractionWarn float64 `yaml:"abort_fraction_warn"`
	AbortFractionCrit float64 `yaml:"abort_fraction_crit"`

	// DecodeTokensPerRequestLow is the per-request decode speed (tok/s)
	// below which decode counts as slow.
	DecodeTokensPerRequestLow float64 `yaml:"decode_tokens_per_request_low"`
	// LargeModelActiveParamsBillions is the number of parameters active per
	// token (billions) from which a model counts as large enough to explain
	// slow decode by itself.
	LargeModelActiveParamsBillions float64 `yaml:"large_model_active_params_billions"`
	// PrefillDecodeRatioHigh is the prompt/generation token-rate ratio from
	// which prompts count as heavy.
	PrefillDecodeRatioHigh float64 `yaml:"prefill_decode_ratio_high"`
	// HeavyPromptTokens is the number of prompt tokens per finished request
	// from which prompts count as heavy.
	HeavyPromptTokens float64 `yaml:"heavy_prompt_tokens"`

	// OutlierRatio is how many times the peer median a node's P99 (E2E or
	// TTFT) must be for the node to be a NODE_OUTLIER.
	OutlierRatio float64 `yaml:"outlier_ratio"`
	// OutlierMinLatency is the P99 below which a node is never an outlier,
	// however it compares: sub-second differences do not need a verdict.
	OutlierMinLatency time.Duration `yaml:"outlier_min_latency"`
	// OutlierLoadMargin is how much higher than the peer median a node's load
	// score may be for the load to count as similar.
	OutlierLoadMargin float64 `yaml:"outlier_load_margin"`
	// MinPeers is the number of usable peers a comparison needs.
	MinPeers int `yaml:"min_peers"`

	// MaxRunning is the number of requests the node can run at once
	// (max_num_seqs × data-parallel ranks); 0 leaves running out of the load
	// score.
	MaxRunning float64 `yaml:"max_running"`
}

// DefaultThresholds returns the defaults. Where each comes from:
//
//   - StaleAfter 5m: Prometheus's default lookback delta; PromQL itself
//     treats an older sample as gone.
//   - KVSaturated 0.80, QueueSaturated 5: request routers in the field treat
//     KV > 0.8 or queue > 5 as saturated (DESIGN.md, anchored defaults).
//   - KVWarn 0.90, KVCrit 0.95: common alert rules (DESIGN.md).
//   - QueueCrit 50 for QueueCritFor 5m: common alert rule "queue > 50 for 5
//     min" (DESIGN.md).
//   - TTFTP99Warn 10s, TTFTP99Crit 30s: common alert rules (DESIGN.md); the
//     seed calls a 40 s P99 "as good as frozen".
//   - PreemptionsPerSecond 0.01: llmdiag's choice; about three preemptions
//     in a 5-minute window, more than a one-off. Every preemption means
//     recomputed work, so any rate above 0 is at least WARN.
//   - QueueRunningRatioWarn 0.1, QueueRunningRatioCrit 1.0: llmdiag's choice;
//     the seed calls a ratio near 0 healthy; 0.1 is one request waiting for
//     every ten running, 1.0 as many waiting as running.
//   - SustainedFraction 0.5: "over most of the history" (DESIGN.md rule 3).
//   - E2EP99Warn 60s: llmdiag's choice; 60 s is the default read timeout of
//     common reverse proxies (nginx proxy_read_timeout), beyond which
//     non-streaming clients start to fail. E2EP99Crit 30m: llmdiag's choice;
//     past any interactive use. The seed's 13.3 min P99 is WARN, as the seed
//     reads it: a long tail, not an outage.
//   - E2EMeanRise 0.5: llmdiag's choice; a mean 50% above its earlier level.
//   - ITLP99Warn 200ms, ITLP99Crit 1s: llmdiag's choice; streaming text
//     reads as smooth below ~5 tokens/s of gaps, and a one-second stall
//     between tokens is visible to every reader.
//   - QueueTimeShareWarn 0.5: llmdiag's choice; more of the first token's
//     wait spent queued than prefilling.
//   - AbortFractionWarn 0.05, AbortFractionCrit 0.25: llmdiag's choice; one
//     request in twenty given up on is a symptom, one in four an outage as
//     clients see it.
//   - DecodeTokensPerRequestLow 10 tok/s: llmdiag's choice; 100 ms per output
//     token, about the pace people read at. The seed's node decodes ~3 tok/s
//     per request (121 tok/s over ~40 running requests).
//   - LargeModelActiveParamsBillions 30: llmdiag's choice; the seed's
//     DeepSeek v4 (MoE, 37B active per token) is "a large model".
//   - PrefillDecodeRatioHigh 1000: the seed calls a ~100× prompt/generation
//     gap physics, not a fault (~165× in its figures); ten times that means
//     prompts dominate. HeavyPromptTokens 8192: llmdiag's choice; an 8k
//     prompt takes seconds of prefill on a busy node.
//   - OutlierRatio 3: "several ×" the peer median (DESIGN.md rule 7);
//     OutlierMinLatency 1s, OutlierLoadMargin 0.25, MinPeers 2: llmdiag's
//     choice.
//   - MaxRunning 0: engines do not expose their concurrency limit, so running
//     counts in the load score only when configured.
func DefaultThresholds() Thresholds {
	return Thresholds{
		StaleAfter: 5 * time.Minute,

		KVSaturated:          0.80,
		KVWarn:               0.90,
		KVCrit:               0.95,
		PreemptionsPerSecond: 0.01,

		QueueSaturated:        5,
		QueueCrit:             50,
		QueueCritFor:          5 * time.Minute,
		QueueRunningRatioWarn: 0.1,
		QueueRunningRatioCrit: 1.0,
		SustainedFraction:     0.5,

		TTFTP99Warn: 10 * time.Second,
		TTFTP99Crit: 30 * time.Second,
		E2EP99Warn:  60 * time.Second,
		E2EP99Crit:  30 * time.Minute,
		E2EMeanRise: 0.5,
		ITLP99Warn:  200 * time.Millisecond,
		ITLP99Crit:  time.Second,

		QueueTimeShareWarn: 0.5,
		AbortFractionWarn:  0.05,
		AbortFractionCrit:  0.25,

		DecodeTokensPerRequestLow:      10,
		LargeModelActiveParamsBillions: 30,
		PrefillDecodeRatioHigh:         1000,
		HeavyPromptTokens:              8192,

		OutlierRatio:      3,
		OutlierMinLatency: time.Second,
		OutlierLoadMargin: 0.25,
		MinPeers:          2,
	}
}

// Validate reports every threshold that is out of range or out of order,
// naming each by its yaml key.
func (t Thresholds) Validate() error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
		}
	}
	check(t.StaleAfter > 0, "stale_after", "must be positive, got %v", t.StaleAfter)

	check(t.KVSaturated > 0 && t.KVSaturated <= 1, "kv_saturated", "must be in (0, 1], got %v", t.KVSaturated)
	check(t.KVWarn > 0 && t.KVWarn <= 1, "kv_warn", "must be in (0, 1], got %v", t.KVWarn)
	check(t.KVCrit > 0 && t.KVCrit <= 1, "kv_crit", "must be in (0, 1], got %v", t.KVCrit)
	check(t.KVWarn < t.KVCrit, "kv_warn", "must be below kv_crit (%v), got %v", t.KVCrit, t.KVWarn)
	check(t.PreemptionsPerSecond >= 0, "preemptions_per_second", "must not be negative, got %v", t.PreemptionsPerSecond)

	check(t.QueueSaturated > 0, "queue_saturated", "must be positive, got %v", t.QueueSaturated)
	check(t.QueueCrit > t.QueueSaturated, "queue_crit", "must be above queue_saturated (%v), got %v", t.QueueSaturated, t.QueueCrit)
	check(t.QueueCritFor >= 0, "queue_crit_for", "must not be negative, got %v", t.QueueCritFor)
	check(t.QueueRunningRatioWarn > 0, "queue_running_ratio_warn", "must be positive, got %v", t.QueueRunningRatioWarn)
	check(t.QueueRunningRatioWarn < t.QueueRunningRatioCrit, "queue_running_ratio_warn", "must be below queue_running_ratio_crit (%v), got %v", t.QueueRunningRatioCrit, t.QueueRunningRatioWarn)
	check(t.SustainedFraction > 0 && t.SustainedFraction <= 1, "sustained_fraction", "must be in (0, 1], got %v", t.SustainedFraction)

	check(t.TTFTP99Warn > 0, "ttft_p99_warn", "must be positive, got %v", t.TTFTP99Warn)
	check(t.TTFTP99Warn < t.TTFTP99Crit, "ttft_p99_warn", "must be below ttft_p99_crit (%v), got %v", t.TTFTP99Crit, t.TTFTP99Warn)
	check(t.E2EP99Warn > 0, "e2e_p99_warn", "must be positive, got %v", t.E2EP99Warn)
	check(t.E2EP99Warn < t.E2EP99Crit, "e2e_p99_warn", "must be below e2e_p99_crit (%v), got %v", t.E2EP99Crit, t.E2EP99Warn)
	check(t.E2EMeanRise > 0, "e2e_mean_rise", "must be positive, got %v", t.E2EMeanRise)
	check(t.ITLP99Warn > 0, "itl_p99_warn", "must be positive, got %v", t.ITLP99Warn)
	check(t.ITLP99Warn < t.ITLP99Crit, "itl_p99_warn", "must be below itl_p99_crit (%v), got %v", t.ITLP99Crit, t.ITLP99Warn)
	check(t.QueueTimeShareWarn > 0 && t.QueueTimeShareWarn <= 1, "queue_time_share_warn", "must be in (0, 1], got %v", t.QueueTimeShareWarn)
	check(t.AbortFractionWarn > 0 && t.AbortFractionWarn <= 1, "abort_fraction_warn", "must be in (0, 1], got %v", t.AbortFractionWarn)
	check(t.AbortFractionWarn < t.AbortFractionCrit && t.AbortFractionCrit <= 1, "abort_fraction_warn", "must be below abort_fraction_crit (%v, at most 1), got %v", t.AbortFractionCrit, t.AbortFractionWarn)

	check(t.DecodeTokensPerRequestLow > 0, "decode_tokens_per_request_low", "must be positive, got %v", t.DecodeTokensPerRequestLow)
	check(t.LargeModelActiveParamsBillions > 0, "large_model_active_params_billions", "must be positive, got %v", t.LargeModelActiveParamsBillions)
	check(t.PrefillDecodeRatioHigh > 1, "prefill_decode_ratio_high", "must be above 1, got %v", t.PrefillDecodeRatioHigh)
	check(t.HeavyPromptTokens > 0, "heavy_prompt_tokens", "must be positive, got %v", t.HeavyPromptTokens)

	check(t.OutlierRatio > 1, "outlier_ratio", "must be above 1, got %v", t.OutlierRatio)
	check(t.OutlierMinLatency >= 0, "outlier_min_latency", "must not be negative, got %v", t.OutlierMinLatency)
	check(t.OutlierLoadMargin >= 0, "outlier_load_margin", "must not be negative, got %v", t.OutlierLoadMargin)
	check(t.MinPeers >= 1, "min_peers", "must be at least 1, got %v", t.MinPeers)

	check(t.MaxRunning >= 0, "max_running", "must not be negative, got %v", t.MaxRunning)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid thresholds: %w", err)
	}
	return nil
}
