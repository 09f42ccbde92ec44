// Package promrules writes llmdiag's thresholds as a Prometheus rule file, so
// that alerts and verdicts never disagree.
//
// The file has one rule group, evaluated in order:
//
//   - per engine, recording rules of llmdiag's per-node indicators, built by
//     prom.RuleExpressions from the same query builder a refresh uses
//     (the same selectors, aliases joined with `or on (node)`, rank collapse,
//     rates over the same window) and labelled engine="…":
//     llmdiag:node_model_info (one series per node carrying its model),
//     llmdiag:queue, llmdiag:running, llmdiag:kv_pressure,
//     llmdiag:preemptions:rate<window>, llmdiag:ttft_seconds:p99,
//     llmdiag:e2e_seconds:p99, llmdiag:inter_token_seconds:p99, the token
//     rates llmdiag:prompt_tokens:rate<window> and
//     llmdiag:generation_tokens:rate<window>, and the latency bucket rates
//     the P99s are read from, for any other percentile
//     (llmdiag:ttft_seconds_bucket:rate<window>, e2e and inter_token alike;
//     each keyed by the node label, model and engine), and
//     llmdiag:node_down (the nodes a refresh reports down);
//   - engine-independent recording rules: llmdiag:queue_running_ratio
//     (queue ÷ running, 0 with nothing waiting, +Inf with nothing running, as
//     diagnose reads it) and llmdiag:queueing (1 when the node counts as
//     queueing in diagnose's sense: queue > queue_saturated, or at least one
//     waiting at a ratio ≥ queue_running_ratio_crit);
//   - alerting rules, each mirroring one finding of diagnose.Diagnose and
//     labelled with the indicator (llmdiag_indicator), the threshold keys it
//     reads (llmdiag_threshold) and, where the finding names one, the root
//     cause (llmdiag_cause). Severity critical mirrors a CRIT finding (or a
//     DOWN node), warning a WARN one; the severity of an indicator is the
//     highest of its alerts that fire, as a warning alert keeps firing
//     beside the critical one of the same indicator (inhibit it in
//     Alertmanager if you want one notification). Each alert's runbook_url
//     annotation is Config.RunbookBaseURL + /runbooks/<slug> (package
//     runbook): its cause's runbook, or for an alert without a cause the
//     runbook of the cause its indicator leads to (listed in the file's
//     header, written by Write; LatencyRunbook for the latencies).
//
// What PromQL cannot reproduce exactly is said in the rule file's header
// (prom.RuleExprs.Notes): ranks of one SGLang replica are collapsed
// with max instead of the lowest rank, and vLLM's KV capacity, read from
// the labels of cache_config_info, cannot weight KV usage. The
// sustained-queue alert reads the fraction of queueing evaluations over
// Config.History, where a verdict reads the refreshes the store keeps.
package promrules
