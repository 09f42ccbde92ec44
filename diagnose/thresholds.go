package diagnose

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Thresholds are the limits the verdict rules compare indicators against. The
// yaml tags let a configuration file override any of them: decode the file
// over DefaultThresholds() so that keys it leaves out keep their defaults, then
// call Validate.
type Thresholds struct {
	// StaleAfter is the age beyond which data is no longer fresh, whatever
	// NodeMetrics.stale says.
	StaleAfter time.Duration `yaml:"stale_after"`

	// KVSaturated is the KV pressure (0..1) from which the KV finding calls
	// the cache busy, while still OK.
	KVSaturated float64 `yaml:"kv_saturated"`
	// KVWarn is the KV pressure at which the KV finding turns WARN.
	KVWarn float64 `yaml:"kv_warn"`
	// KVCrit is the KV pressure at which the cache is saturated: held for
	// RoutingHold refreshes, the node is KV_EXHAUSTED and not routable.
	KVCrit float64 `yaml:"kv_crit"`
	// PreemptionsPerSecond is the preemption rate above which the node is
	// KV_EXHAUSTED; any rate above 0 is reported as WARN.
	PreemptionsPerSecond float64 `yaml:"preemptions_per_second"`

	// QueueSaturated is the number of waiting requests above which the node
	// counts as queueing, and at which the load score reaches 1. Above it,
	// with running at MaxRunning when that is configured, the queue is
	// saturated: held for RoutingHold refreshes, the node is not routable.
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
	// queue, the current one included) that must be queueing for the
	// queue/running finding to be CRIT: queueing over most of the history.
	SustainedFraction float64 `yaml:"sustained_fraction"`
	// OverloadedAfter is how long a saturated queue must go without
	// draining for the node to be OVERLOADED rather than in a BURST,
	// however long it was watched before.
	OverloadedAfter time.Duration `yaml:"overloaded_after"`
	// RoutingHold is the number of consecutive refreshes a saturation (the
	// queue or the KV cache) must hold before the node is not routable,
	// and must be absent before it is routable again: a one-refresh blip
	// never flips routing.
	RoutingHold int `yaml:"routing_hold"`

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

	// StalledRefreshes is the number of consecutive refreshes, the current
	// one included, at which the progress counters read the same with
	// requests running or waiting for the node to be STALLED, where the
	// engine counts its work token by token (cause_stalled.go).
	StalledRefreshes int `yaml:"stalled_refreshes"`
	// StalledRequestCountersFor is how long, as well, the counters must
	// stay flat where they move only as requests start or end (no
	// inter-token histogram): a long request alone leaves them flat.
	StalledRequestCountersFor time.Duration `yaml:"stalled_request_counters_for"`
	// StalledMinFor is the least time the counters must stay flat for any
	// engine, whatever the refresh interval: at a short interval,
	// stalled_refreshes refreshes span less than one long engine step (a
	// long prefill emits no token until it ends).
	StalledMinFor time.Duration `yaml:"stalled_min_for"`

	// GPUXIDWindow is how long after it last occurred an XID counts as
	// current (xid.go): a current one that needs a GPU reset or a reboot
	// makes the node not routable; an older one is graded down.
	GPUXIDWindow time.Duration `yaml:"gpu_xid_window"`

	// SLOs are latency objectives whose error-budget burn is a finding
	// (slo.go); none by default. The file's key is "slos", a list
	// (sloconfig.go), which the scalar machinery below leaves alone.
	SLOs SLOSet `yaml:"slos"`
}

// DefaultThresholds returns the defaults. Where each comes from is said
// once, in thresholdDocs below, which `llmdiag thresholds` prints as the
// comments of the YAML file (WriteThresholds).
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
		OverloadedAfter:       30 * time.Second,
		RoutingHold:           2,

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

		StalledRefreshes:          3,
		StalledRequestCountersFor: 2 * time.Minute,
		StalledMinFor:             8 * time.Second,

		GPUXIDWindow: time.Hour,
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
	check(t.GPUXIDWindow > 0, "gpu_xid_window", "must be positive, got %v", t.GPUXIDWindow)

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
	check(t.OverloadedAfter >= 0, "overloaded_after", "must not be negative, got %v", t.OverloadedAfter)
	check(t.RoutingHold >= 1, "routing_hold", "must be at least 1, got %v", t.RoutingHold)

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
	check(t.StalledRefreshes >= 2, "stalled_refreshes", "must be at least 2, got %v", t.StalledRefreshes)
	check(t.StalledRequestCountersFor >= 0, "stalled_request_counters_for", "must not be negative, got %v", t.StalledRequestCountersFor)
	check(t.StalledMinFor >= 0, "stalled_min_for", "must not be negative, got %v", t.StalledMinFor)
	errs = append(errs, validateSLOs(t.SLOs.List())...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid thresholds: %w", err)
	}
	return nil
}

// thresholdDocs says, for every yaml key of Thresholds in field order, what
// the threshold does and where its default comes from. It is the one copy of
// that text: WriteThresholds prints it as comments, and a test holds it to
// the fields.
var thresholdDocs = []struct{ key, doc string }{
	{"stale_after", "Data older than this is no longer fresh: the verdict is UNKNOWN. " +
		"Default 5m: Prometheus's default lookback delta; PromQL itself treats an older sample as gone. " +
		"`llmdiag serve` uses its --stale-after (30s) unless this file sets the key."},
	{"kv_saturated", "KV pressure (0..1) from which the KV finding calls the cache busy (still OK). " +
		"Default 0.80: request routers in the field treat KV > 0.8 as busy (docs/thresholds.md)."},
	{"kv_warn", "KV pressure at which the KV finding turns WARN. Default 0.90: common alert rules (docs/thresholds.md)."},
	{"kv_crit", "KV pressure at which the cache is saturated: held for routing_hold refreshes, the node is KV_EXHAUSTED (CRIT) and not routable; " +
		"the load score reaches 1 there. Default 0.95: common alert rules (docs/thresholds.md)."},
	{"preemptions_per_second", "Preemption rate above which the node is KV_EXHAUSTED (CRIT); any rate above 0 is WARN. " +
		"Default 0.01: llmdiag's choice, about three preemptions in a 5-minute window, more than a one-off; " +
		"every preemption means recomputed work."},
	{"queue_saturated", "Waiting requests above which the node counts as queueing (queue finding WARN), and at which the load score reaches 1; " +
		"above it (with running at max_running when set) for routing_hold refreshes, the node is not routable. " +
		"Default 5: request routers in the field treat queue > 5 as saturated (docs/thresholds.md)."},
	{"queue_crit", "Waiting requests that, held for queue_crit_for, make the queue finding CRIT. " +
		"Default 50: common alert rule \"queue > 50 for 5 min\" (docs/thresholds.md)."},
	{"queue_crit_for", "How long the queue must stay above queue_crit. Default 5m: the same common alert rule (docs/thresholds.md)."},
	{"queue_running_ratio_warn", "Queue/running ratio at which the ratio finding turns WARN. " +
		"Default 0.1: llmdiag's choice; a ratio near 0 is healthy, 0.1 is one request waiting for every ten running."},
	{"queue_running_ratio_crit", "Queue/running ratio from which the node counts as queueing whatever the queue length " +
		"(CRIT when sustained). Default 1.0: llmdiag's choice, as many waiting as running."},
	{"sustained_fraction", "Share of the history that must be queueing for the queue/running finding to be CRIT. " +
		"Default 0.5: \"over most of the history\"."},
	{"overloaded_after", "How long a saturated queue must go without draining for the node to be OVERLOADED rather than in a BURST, " +
		"however long the node was watched before. Default 30s: llmdiag's choice; a router must stop waiting for a burst to pass well within a minute."},
	{"routing_hold", "Consecutive refreshes a saturation (queue or KV) must hold before the node is not routable, and be absent before it is routable again. " +
		"Default 2: llmdiag's choice, the fewest that keep a one-refresh blip from flipping routing (10 s at serve's 5 s interval)."},
	{"ttft_p99_warn", "P99 time to first token at which TTFT turns WARN. Default 10s: common alert rules (docs/thresholds.md)."},
	{"ttft_p99_crit", "P99 time to first token at which TTFT turns CRIT. " +
		"Default 30s: common alert rules (docs/thresholds.md); at a 40 s P99 one user in a hundred waits long enough to call the system frozen."},
	{"e2e_p99_warn", "P99 end-to-end latency at which E2E turns WARN. " +
		"Default 60s: llmdiag's choice; the default read timeout of common reverse proxies (nginx proxy_read_timeout), " +
		"beyond which non-streaming clients start to fail."},
	{"e2e_p99_crit", "P99 end-to-end latency at which E2E turns CRIT. " +
		"Default 30m: llmdiag's choice, past any interactive use; the 13.3 min P99 of the worked example in docs/verdict-rules.md is WARN: a long tail, not an outage."},
	{"e2e_mean_rise", "Relative rise of the mean E2E latency over the history reported as \"rising\" (0.5 = +50%). " +
		"Default 0.5: llmdiag's choice."},
	{"itl_p99_warn", "P99 gap between output tokens graded WARN. " +
		"Default 200ms: llmdiag's choice; streaming text reads as smooth below ~5 tokens/s of gaps."},
	{"itl_p99_crit", "P99 gap between output tokens graded CRIT. " +
		"Default 1s: llmdiag's choice; a one-second stall between tokens is visible to every reader."},
	{"queue_time_share_warn", "Share of mean TTFT spent queued from which TTFT counts as mostly waiting rather than prefill. " +
		"Default 0.5: llmdiag's choice, more of the first token's wait spent queued than prefilling."},
	{"abort_fraction_warn", "Share of finished requests aborted or in error graded WARN. " +
		"Default 0.05: llmdiag's choice, one request in twenty given up on is a symptom."},
	{"abort_fraction_crit", "Share of finished requests aborted or in error graded CRIT. " +
		"Default 0.25: llmdiag's choice, one in four is an outage as clients see it."},
	{"decode_tokens_per_request_low", "Per-request decode speed (tok/s) below which decode counts as slow. " +
		"Default 10: llmdiag's choice, 100 ms per output token, about the pace people read at; " +
		"the worked example's node decodes ~3 tok/s per request (121 tok/s over ~40 running requests)."},
	{"large_model_active_params_billions", "Parameters active per token (billions) from which a model is large enough to explain slow decode by itself. " +
		"Default 30: llmdiag's choice; the worked example's DeepSeek v4 (MoE, 37B active per token) is a large model."},
	{"prefill_decode_ratio_high", "Prompt/generation token-rate ratio from which prompts count as heavy. " +
		"Default 1000: a ~100x gap between prefill and decode is physics, not a fault (~165x in the worked example); ten times that means prompts dominate."},
	{"heavy_prompt_tokens", "Prompt tokens per finished request from which prompts count as heavy. " +
		"Default 8192: llmdiag's choice; an 8k prompt takes seconds of prefill on a busy node."},
	{"outlier_ratio", "How many times the peer median a node's P99 (E2E or TTFT) must be for the node to be a NODE_OUTLIER. " +
		"Default 3: \"several x\" the peer median (rule 8 in docs/verdict-rules.md)."},
	{"outlier_min_latency", "P99 below which a node is never an outlier: sub-second differences need no verdict. Default 1s: llmdiag's choice."},
	{"outlier_load_margin", "How much higher than the peer median a node's load score may be for the load to count as similar. " +
		"Default 0.25: llmdiag's choice."},
	{"min_peers", "Usable peers a comparison needs. Default 2: llmdiag's choice."},
	{"max_running", "Requests the node can run at once (max_num_seqs x data-parallel ranks): a queue is saturated only with running at this; " +
		"0 leaves running out (a long queue then means the batch is full). " +
		"Default 0: engines do not expose their concurrency limit, so running counts only when configured."},
	{"stalled_refreshes", "Consecutive refreshes, the current one included, at which the progress counters (prompt and generation tokens, finished requests, " +
		"TTFT and inter-token counts) must read the same with requests running or waiting for the node to be STALLED (CRIT, not routable). " +
		"Default 3: llmdiag's choice, the counters flat for two whole intervals (10 s at serve's 5 s interval), so that a hang reads STALLED " +
		"by the third refresh after it; a working engine moves its token counters at every step, many times a second."},
	{"stalled_request_counters_for", "Where the engine counts only whole requests (no inter-token histogram: TensorRT-LLM, Triton, TGI), how long the counters must also stay flat. " +
		"Default 2m: llmdiag's choice, longer than most requests take (e2e_p99_warn is 1m), so that one long generation does not read as a hang."},
	{"stalled_min_for", "The least time the progress counters must stay flat, for any engine and at any refresh interval, for the node to be STALLED. " +
		"Default 8s: llmdiag's choice, below the 10 s that stalled_refreshes spans at serve's 5 s interval (so the default reading is unchanged) " +
		"and above the longest step a busy engine takes between tokens (a long prefill batch can hold every token for seconds): " +
		"at --interval 1s three flat refreshes span 2 s, less than such a step."},
	{"gpu_xid_window", "How long after it last occurred (its value changed, or its DCGM_EXP_XID_ERRORS_TOTAL rose) an XID counts as current. " +
		"A current XID that NVIDIA's XID catalogue says needs a GPU reset or a reboot is CRIT and the node not routable; after this window without a repeat it is graded down to WARN " +
		"and the node is routable again (an application's XID from WARN to OK). " +
		"Default 1h: llmdiag's choice; the catalogue's actions for such XIDs (reset the GPU, reboot the node) are an operator's work of minutes to an hour, " +
		"so the node stays out of rotation until someone could have acted, and an engine whose GPU is really gone is held out by its own failure (DOWN or STALLED) anyway (docs/gpu-xid.md)."},
}

// thresholdFields maps each yaml key of Thresholds to its field index.
func thresholdFields() map[string]int {
	rt := reflect.TypeFor[Thresholds]()
	out := make(map[string]int, rt.NumField())
	for i := range rt.NumField() {
		if k, _, _ := strings.Cut(rt.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			out[k] = i
		}
	}
	return out
}

// LoadThresholds reads thresholds from YAML: a mapping of the keys
// WriteThresholds prints. Keys left out keep their defaults
// (DefaultThresholds); durations are strings such as "5m" or "200ms". An
// unknown or repeated key, a value of the wrong type, or a result Validate
// rejects is an error naming the key (and its line). An empty document is
// the defaults.
func LoadThresholds(r io.Reader) (Thresholds, error) {
	th := DefaultThresholds()
	var doc yaml.Node
	if err := yaml.NewDecoder(r).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return th, nil
		}
		return th, fmt.Errorf("thresholds: %w", err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return th, nil
	}
	if root.Kind != yaml.MappingNode {
		return th, fmt.Errorf("thresholds: line %d: want a mapping of threshold keys", root.Line)
	}
	fields := thresholdFields()
	v := reflect.ValueOf(&th).Elem()
	seen := map[string]int{}
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, val := root.Content[i], root.Content[i+1]
		key := k.Value
		idx, ok := fields[key]
		switch {
		case k.Kind == yaml.ScalarNode && key == "slos" && seen[key] == 0:
			seen[key] = k.Line
			slos, serrs := decodeSLOs(val)
			th.SLOs = NewSLOSet(slos...)
			errs = append(errs, serrs...)
			continue
		case k.Kind != yaml.ScalarNode:
			errs = append(errs, fmt.Errorf("line %d: a key must be a plain name", k.Line))
			continue
		case !ok:
			errs = append(errs, fmt.Errorf("line %d: unknown key %q", k.Line, key))
			continue
		case seen[key] > 0:
			errs = append(errs, fmt.Errorf("line %d: %s: repeated (first on line %d)", k.Line, key, seen[key]))
			continue
		}
		seen[key] = k.Line
		if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
			errs = append(errs, fmt.Errorf("line %d: %s: want a single value", val.Line, key))
			continue
		}
		if err := decodeThreshold(val, v.Field(idx)); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s: %w", val.Line, key, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return th, fmt.Errorf("thresholds: %w", err)
	}
	if err := th.Validate(); err != nil {
		return th, err
	}
	return th, nil
}

// decodeThreshold sets field from a scalar: a duration string for
// time.Duration fields, a number otherwise.
func decodeThreshold(n *yaml.Node, field reflect.Value) error {
	switch field.Interface().(type) {
	case time.Duration:
		if n.Tag != "!!str" {
			return fmt.Errorf("want a duration such as \"5m\" or \"200ms\", got %q", n.Value)
		}
		d, err := time.ParseDuration(n.Value)
		if err != nil {
			return fmt.Errorf("want a duration such as \"5m\" or \"200ms\", got %q", n.Value)
		}
		field.SetInt(int64(d))
	case float64:
		var f float64
		if n.Tag != "!!int" && n.Tag != "!!float" {
			return fmt.Errorf("want a number, got %q", n.Value)
		}
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("want a number, got %q", n.Value)
		}
		field.SetFloat(f)
	case int:
		var i int
		if n.Tag != "!!int" {
			return fmt.Errorf("want a whole number, got %q", n.Value)
		}
		if err := n.Decode(&i); err != nil {
			return fmt.Errorf("want a whole number, got %q", n.Value)
		}
		field.SetInt(int64(i))
	default:
		return fmt.Errorf("unsupported field type %s", field.Type())
	}
	return nil
}

// WriteThresholds writes t as the YAML LoadThresholds reads, every key
// preceded by what it does and where its default comes from.
func WriteThresholds(w io.Writer, t Thresholds) error {
	var b strings.Builder
	b.WriteString("# llmdiag thresholds. Every key is optional: a key left out keeps the default\n" +
		"# shown here. Durations are strings such as \"5m\" or \"200ms\".\n" +
		"#   llmdiag serve --thresholds FILE    verdicts\n" +
		"#   llmdiag rules --thresholds FILE    the same limits as Prometheus alerting rules\n" +
		"# Where the defaults come from: docs/thresholds.md in the llmdiag repository.\n")
	fields := thresholdFields()
	v := reflect.ValueOf(t)
	for _, d := range thresholdDocs {
		idx, ok := fields[d.key]
		if !ok {
			return fmt.Errorf("thresholds: documented key %q has no field", d.key)
		}
		b.WriteString("\n")
		for _, line := range wrap(d.doc, 76) {
			b.WriteString("# " + line + "\n")
		}
		var val string
		switch x := v.Field(idx).Interface().(type) {
		case time.Duration:
			val = strconv.Quote(ShortDuration(x))
		case float64:
			val = strconv.FormatFloat(x, 'g', -1, 64)
		case int:
			val = strconv.Itoa(x)
		default:
			return fmt.Errorf("thresholds: unsupported field type %T", x)
		}
		b.WriteString(d.key + ": " + val + "\n")
	}
	writeSLOs(&b, t.SLOs.List())
	_, err := io.WriteString(w, b.String())
	return err
}

// ShortDuration writes d as time.Duration.String does, without zero units:
// "5m", "1h30m", "200ms".
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// wrap splits text into lines of at most width bytes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
