package scenariotest

import (
	"testing"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// acceptDisaggregated: both workers carry their fleet-file role at every
// refresh; the decode worker never reads PREFILL_BOUND or DECODE_BOUND, the
// prefill worker never DECODE_BOUND.
func acceptDisaggregated(t *testing.T, res *Result) {
	t.Helper()
	for node, want := range map[string]llmdiagv1.Role{
		"kimi-k2.6-prefill-0": llmdiagv1.Role_ROLE_PREFILL,
		"kimi-k2.6-decode-0":  llmdiagv1.Role_ROLE_DECODE,
	} {
		for _, r := range res.Readings[node] {
			if got := r.Diagnosis.GetRole(); got != want || r.Metrics.GetRoleSource() != "fleet file" {
				t.Errorf("%s at %v: role %v from %q, want %v from the fleet file", node, r.At, got, r.Metrics.GetRoleSource(), want)
				break
			}
			c := r.Cause
			if c == llmdiagv1.Cause_CAUSE_DECODE_BOUND || node == "kimi-k2.6-decode-0" && c == llmdiagv1.Cause_CAUSE_PREFILL_BOUND {
				t.Errorf("%s at %v reads %v: %s", node, r.At, c, r.Diagnosis.GetSummary())
				break
			}
		}
	}
}
