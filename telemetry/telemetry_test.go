package telemetry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/telemetry"
)

// Node churn is counted, and never grows the registry: no series names a
// node, so thousands of nodes joining and leaving leave as many series as
// one refresh did.
func TestNodeChurnIsCountedNotNamed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.New(reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	series := func() (int, map[string]float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n, vals := 0, map[string]float64{}
		for _, mf := range mfs {
			for _, met := range mf.GetMetric() {
				n++
				for _, l := range met.GetLabel() {
					if l.GetName() == "node" || l.GetName() == "instance" {
						t.Errorf("%s has a %s label: per-node series grow with churn", mf.GetName(), l.GetName())
					}
				}
				switch {
				case met.GetCounter() != nil:
					vals[mf.GetName()] = met.GetCounter().GetValue()
				case met.GetGauge() != nil && len(met.GetLabel()) == 0:
					vals[mf.GetName()] = met.GetGauge().GetValue()
				}
			}
		}
		return n, vals
	}
	refreshOnce := func(r int) {
		var removed []string
		for i := range 1000 {
			removed = append(removed, fmt.Sprintf("pod-%d-%d", r, i))
		}
		m.SetNodeStatuses(map[llmdiagv1.Status]int{llmdiagv1.Status_STATUS_OK: 1000})
		m.ObserveNodeSet(refresh.NodeSet{Refused: 5, Invalid: 2, Removed: removed, Kept: 1000 + r})
	}
	refreshOnce(0)
	first, _ := series()
	for r := 1; r < 50; r++ {
		refreshOnce(r)
	}
	after, vals := series()
	if after != first {
		t.Errorf("%d series after 50 refreshes of churn, %d after one", after, first)
	}
	for name, want := range map[string]float64{
		"llmdiag_nodes_refused_total":    250,
		"llmdiag_nodes_invalid_id_total": 100,
		"llmdiag_nodes_removed_total":    50000,
		"llmdiag_nodes_kept":             1049,
	} {
		if vals[name] != want {
			t.Errorf("%s = %v, want %v", name, vals[name], want)
		}
	}
}
