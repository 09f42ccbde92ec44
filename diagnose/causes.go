package diagnose

import (
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// The causes, as one ordered table.
//
// A cause is a root cause the rules can name (one llmdiagv1.Cause value):
// what it explains, and why it is ruled out when another cause wins. A rule
// is one shape of evidence that names a cause: when it applies, and the
// verdict it writes (summary, status, confidence, evidence,
// recommendations). Most causes have one rule; OVERLOADED (held, then
// recovering), BURST (queueing now, then drained) and DECODE_BOUND (slow
// decode, then stalls) have two, at different places in the order.
//
// rules below is the only place the order is written. The first rule that
// applies wins (verdict); ruled-out lists the causes in the order of their
// first rule, up to the winner (ruledOut). The table in
// docs/verdict-rules.md ("The rules, in order") lists the same rules in the
// same order, and causes_test.go checks that it does.
//
// Decided elsewhere, because they come before there are facts to weigh or
// after every rule failed:
//   - NO_DATA and TARGET_DOWN: Diagnose (diagnose.go), before the rules run,
//     when there is no fresh data, the target is down, or nothing could be
//     read;
//   - STALLED: stalled (cause_stalled.go), which Diagnose asks before the
//     rules run: an engine that answers and does no work, whose growing
//     queue the load rules would otherwise weigh;
//   - HEALTHY and UNEXPLAINED: healthy (cause_healthy.go), when no rule
//     applies.
//
// # Adding a cause
//
//  1. Add its value to the Cause enum (proto/llmdiag/v1/diagnosis.proto).
//  2. Write cause_<name>.go: a cause (id, name, explains, ruledOut), and for
//     each shape of evidence an applies method and a verdict method on
//     facts, with the signatures of rule's fields. Its functions call its
//     own explains by name (explained(burstExplains, x)), never through
//     the cause variable, which Go would report as an initialization
//     cycle.
//  3. Add its catalog entries (messages.go, English and Chinese, with their
//     claims in claims.go): its name, summaries, evidence, ruled-out
//     sentences and recommendations.
//  4. Put its rule(s) in rules below, where they belong in the order, and
//     the matching row(s) in docs/verdict-rules.md.
//  5. Write its runbook (runbook/en and runbook/zh, which runbook's tests
//     check quote its recommendations) and its label in the web console.
//
// Nothing else in this package lists the causes: weighing and ruled-out
// read the table, and reports title a cause with its name (CauseName). A cause with routing or
// score effects of its own would need more: routing follows saturation
// (saturation.go) and the status (Diagnose), whatever the cause.

// A cause is what holds of a root cause whichever of its rules names it.
type cause struct {
	// id is the cause's enum value, which every verdict it wins carries.
	id llmdiagv1.Cause
	// name is the catalog entry naming the cause, as reports title it
	// (CauseName).
	name msg
	// explains reports whether the cause accounts for x being WARN or CRIT.
	// It need not test for scrape errors: no cause explains those
	// (explained).
	explains func(x *llmdiagv1.Finding) bool
	// ruledOut says why the cause does not hold when a cause after it
	// wins, or which figure was missing to check it; "" when there is
	// nothing to say.
	ruledOut func(f *facts, p printer, findings []*llmdiagv1.Finding) string
	// weighedFirst are causes later in the order that the rules weigh
	// before this one nonetheless (a rule's applies tests them), listed in
	// its ruled-out after the causes before it.
	weighedFirst []llmdiagv1.Cause
}

// A rule is one shape of evidence that names a cause.
type rule struct {
	cause *cause
	// applies reports whether the evidence fits the rule, given that no
	// rule before it in the order applied.
	applies func(f *facts, findings []*llmdiagv1.Finding) bool
	// verdict is the rule's verdict: status, confidence, summary, evidence
	// and recommendations. The cause, ruled-out and the weighing against
	// every finding are added by facts.verdict.
	verdict func(f *facts, p printer, findings []*llmdiagv1.Finding) verdict
}

// rules are the rules in the order they are tried: rules 2–8 of
// docs/verdict-rules.md, the primed ones being a cause's second shape.
//
// A package-level variable because Go has no constant composite values; it
// is read-only (nothing assigns to it or its elements), and an array so
// that nothing can append to it either.
var rules = [...]rule{
	{&kvExhaustedCause, (*facts).kvExhaustedApplies, (*facts).kvExhausted}, // 2
	{&overloadedCause, (*facts).overloadedApplies, (*facts).overloaded},    // 3
	{&burstCause, (*facts).burstNowApplies, (*facts).burst},                // 4
	{&overloadedCause, (*facts).recoveringApplies, (*facts).recovered},     // 3′
	// After the saturation rules above: a saturated queue is overload or a
	// burst whatever its requests wait for. Before prefill, decode,
	// outliers and drained bursts: the wait for an adapter slot lengthens
	// TTFT and E2E, which they would read as their own.
	{&loraContentionCause, (*facts).loraContentionApplies, (*facts).loraContention}, // 5
	{&prefillBoundCause, (*facts).prefillApplies, (*facts).prefill},                 // 6
	{&decodeBoundCause, (*facts).decodeApplies, (*facts).decode},                    // 7
	{&nodeOutlierCause, (*facts).outlierApplies, (*facts).outlier},                  // 8
	{&burstCause, (*facts).burstDrainedApplies, (*facts).burst},                     // 4′
	{&decodeBoundCause, (*facts).decodeStallsApplies, (*facts).stalls},              // 7′
}

// verdict applies the rules to fresh data from a node that answers (HEALTHY
// or UNEXPLAINED when none applies), then weighs the cause against every
// finding: what it explains, what it leaves unexplained, and how much is
// unknown.
func (f *facts) verdict(p printer, findings []*llmdiagv1.Finding) verdict {
	for i := range rules {
		r := &rules[i]
		if !r.applies(f, findings) {
			continue
		}
		v := r.verdict(f, p, findings)
		v.cause = r.cause.id
		v.ruledOut = f.ruledOut(p, r.cause.id, findings)
		f.weigh(p, &v, r.cause, findings)
		f.gpuFaultRecs(p, &v, findings)
		return v
	}
	return f.healthy(p, findings)
}

// CauseName is the name of cause c in lang (English unless Chinese), as
// reports title it: the table's for its causes, and for the causes decided
// elsewhere, theirs.
func CauseName(c llmdiagv1.Cause, lang llmdiagv1.Language) string {
	p := newPrinter(lang)
	if k := causeOf(c); k != nil {
		return p.f(k.name)
	}
	switch c {
	case llmdiagv1.Cause_CAUSE_NO_DATA:
		return p.f(causeNameNoData)
	case llmdiagv1.Cause_CAUSE_TARGET_DOWN:
		return p.f(causeNameTargetDown)
	case llmdiagv1.Cause_CAUSE_STALLED:
		return p.f(causeNameStalled)
	case llmdiagv1.Cause_CAUSE_HEALTHY:
		return p.f(causeNameHealthy)
	case llmdiagv1.Cause_CAUSE_UNEXPLAINED:
		return p.f(causeNameUnexplained)
	}
	return p.f(causeNameUnspecified)
}

// firstRule reports whether rules[i] is its cause's first rule.
func firstRule(i int) bool {
	for j := range i {
		if rules[j].cause == rules[i].cause {
			return false
		}
	}
	return true
}

// causeOf is the table's cause with id, or nil when the table has none.
func causeOf(id llmdiagv1.Cause) *cause {
	for i := range rules {
		if rules[i].cause.id == id {
			return rules[i].cause
		}
	}
	return nil
}

// ruledOut says, for each cause weighed before won, why it does not hold,
// or which figure was missing to check it: the causes in the order of their
// first rule up to won, then won's weighedFirst. For a cause not in the
// table (UNEXPLAINED), every cause.
func (f *facts) ruledOut(p printer, won llmdiagv1.Cause, findings []*llmdiagv1.Finding) []string {
	var out []string
	add := func(c *cause) {
		if s := c.ruledOut(f, p, findings); s != "" {
			out = append(out, s)
		}
	}
	for i := range rules {
		c := rules[i].cause
		if !firstRule(i) {
			continue
		}
		if c.id == won {
			for _, later := range c.weighedFirst {
				add(causeOf(later))
			}
			return out
		}
		add(c)
	}
	return out
}

// explained reports whether a cause whose own test is explains accounts for
// finding x being WARN or CRIT. Scrape errors are never explained by a load
// pattern, nor GPU faults (gpu.go).
func explained(explains func(*llmdiagv1.Finding) bool, x *llmdiagv1.Finding) bool {
	return x.GetIndicator() != llmdiagv1.Indicator_INDICATOR_SCRAPE && !gpuFault(x.GetIndicator()) && explains(x)
}

// explainsAll reports whether explains accounts for every WARN or CRIT
// finding.
func explainsAll(explains func(*llmdiagv1.Finding) bool, findings []*llmdiagv1.Finding) bool {
	for _, x := range findings {
		if elevated(x.GetStatus()) && !explained(explains, x) {
			return false
		}
	}
	return true
}

// latencyIndicator reports whether ind is a latency tail or trend that a
// cause slowing requests down explains: E2E P99, inter-token P99, the E2E
// trend.
func latencyIndicator(ind llmdiagv1.Indicator) bool {
	return ind == llmdiagv1.Indicator_INDICATOR_E2E_P99 || ind == llmdiagv1.Indicator_INDICATOR_INTER_TOKEN ||
		ind == llmdiagv1.Indicator_INDICATOR_E2E_TREND
}

// explainsEverything is the test of a cause that accounts for every symptom
// (memory exhaustion, overload: every latency suffers when requests are
// preempted or wait).
func explainsEverything(*llmdiagv1.Finding) bool { return true }
