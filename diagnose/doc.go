// Package diagnose turns one node's metrics into a verdict: one finding per
// indicator, an overall status, a root cause with evidence, what was ruled
// out, recommendations, whether a router may send the node traffic, and a
// load score. Why the rules are what they are, with a worked example, is in
// docs/verdict-rules.md; where each threshold's default comes from, in
// docs/thresholds.md.
//
// The rules are pure: Diagnose reads only its arguments (no I/O, no clock, no
// randomness), so the same input always yields the same verdict. They run in
// this order, and the first cause that explains the evidence wins:
//
//  1. no fresh data → UNKNOWN / NO_DATA; target down → DOWN / TARGET_DOWN
//  2. KV cache saturated (held), or preemptions → KV_EXHAUSTED (CRIT)
//  3. queue saturated (held) for OverloadedAfter without draining →
//     OVERLOADED (CRIT); a long episode that drained within the window →
//     OVERLOADED (WARN), recovering
//  4. queue high now but not for OverloadedAfter → BURST (WARN); spikes that drained
//     (or TTFT mostly queue time with an empty queue) → BURST too, but only
//     after rules 6–8 and only when the bursts explain every finding off
//     (TTFT and E2E tails, queue time, inter-token latency, the E2E trend)
//  5. requests queued for LoRA adapters that are not loaded, every adapter
//     slot (max_lora) held by others → LORA_CONTENTION
//  6. TTFT tail high, low queue, heavy prompts → PREFILL_BOUND
//  7. low queue, normal KV, long E2E tail, slow per-request decode →
//     DECODE_BOUND, explained by model size and parallel strategy
//     (or: output stalling a second or more between tokens, inter-token P99
//     CRIT, with nothing off that decode does not explain: prefills
//     interrupting the decode batch, in lockstep across DP-attention ranks)
//  8. latency several × the median of peers serving the same model under
//     similar load → NODE_OUTLIER
//  9. nothing off → HEALTHY; a WARN or CRIT finding no cause explains →
//     UNEXPLAINED, naming the findings
//
// Rules 2–8 are one ordered table, rules in causes.go, the only place their
// order is written; each cause has its own file (cause_*.go) saying when it
// applies, what it explains, why it is ruled out and what it recommends.
// How to add a cause is written in causes.go ("Adding a cause");
// causes_test.go checks that every Cause value is in the table or decided
// elsewhere, and that docs/verdict-rules.md lists the rules in the table's
// order.
//
// Routing follows saturation, not the cause named: a queue above
// QueueSaturated with running at capacity, or KV pressure at KVCrit, held
// with hysteresis over RoutingHold refreshes (saturation.go). The load
// score is above 1 exactly when the node is saturated.
//
// After a cause is found it is weighed against every finding: each further
// finding it explains raises the confidence, each it leaves unexplained
// lowers it, is named in the evidence and can raise the status, and each
// unknown indicator lowers it. Ruled-out lists every cause weighed before the
// winner with why it does not hold, or which figure was missing to check it.
//
// Findings: the six core rows first (KV cache pressure, queue, queue/running
// ratio, prompt and generation token rates, E2E P99); then per-request decode
// speed, prefill/decode ratio, queue time in TTFT, inter-token latency P99,
// aborts, the mean E2E trend (Theil–Sen over the history) and the data's
// age, each UNKNOWN when it cannot be read (never 0); and, only when they
// carry information, TTFT P99 (WARN or CRIT), preemptions (above 0), the
// peer group (enough fresh peers serving the model) and scrape errors.
//
// Rules 6 and 7 explain slowness by the workload or the model; when peers
// serving the same model are several times faster under similar load, that
// explanation does not hold, so those rules give way to rule 8.
//
// Contradictory inputs (a negative rate, KV pressure above 1, running stuck
// at 0 while tokens come out, a mean TTFT below the mean queue time) are
// read as docs/verdict-rules.md says: each adds an evidence line naming what
// was read instead, notes the findings it affects and lowers the
// confidence (consistency.go).
//
// All human text (finding names, values, conclusions, evidence, summary,
// recommendations) comes from a small English and Chinese message catalog.
// A text asserts only what the figures say: each catalog entry declares its
// claims about them (claims.go), and the catalog test checks every claim of
// every text every variant of every rule writes, with each figure knocked
// out in turn.
// Everything structural (statuses, cause, routable, score, confidence, the
// number of findings and evidence lines) is independent of the language.
//
// Thresholds are configuration; DefaultThresholds documents each default and
// where it comes from.
package diagnose
