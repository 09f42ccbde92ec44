package report_test

import (
	"slices"
	"testing"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/report"
)

func TestUnhealthy(t *testing.T) {
	n := func(id string, s llmdiagv1.Status, score float64) *llmdiagv1.Node {
		return &llmdiagv1.Node{Id: id, Status: s, LoadScore: score}
	}
	in := []*llmdiagv1.Node{
		n("ok", llmdiagv1.Status_STATUS_OK, 0.9),
		n("unknown", llmdiagv1.Status_STATUS_UNKNOWN, 0),
		n("warn-low", llmdiagv1.Status_STATUS_WARN, 0.2),
		n("down", llmdiagv1.Status_STATUS_DOWN, 0),
		n("warn-high", llmdiagv1.Status_STATUS_WARN, 0.8),
		n("unspecified", llmdiagv1.Status_STATUS_UNSPECIFIED, 0),
		n("crit-b", llmdiagv1.Status_STATUS_CRIT, 1.2),
		n("crit-a", llmdiagv1.Status_STATUS_CRIT, 1.2),
	}
	var got []string
	for _, x := range report.Unhealthy(in) {
		got = append(got, x.GetId())
	}
	want := []string{"crit-a", "crit-b", "down", "warn-high", "warn-low", "unknown", "unspecified"}
	if !slices.Equal(got, want) {
		t.Errorf("Unhealthy order = %v, want %v", got, want)
	}
	if len(report.Unhealthy([]*llmdiagv1.Node{n("ok", llmdiagv1.Status_STATUS_OK, 1)})) != 0 {
		t.Error("an OK node is listed as unhealthy")
	}
}
