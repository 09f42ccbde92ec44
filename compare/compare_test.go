package compare_test

import (
	"math"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/compare"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

var inf = math.Inf(1)

func node(id, model string, bounds, counts []float64) *llmdiagv1.NodeMetrics {
	return &llmdiagv1.NodeMetrics{Node: id, Model: model, Engine: llmdiagv1.Engine_ENGINE_VLLM,
		Ttft: &llmdiagv1.Distribution{BucketBounds: bounds, BucketCounts: counts, Count: counts[len(counts)-1]}}
}

func TestCompare(t *testing.T) {
	b := []float64{1, 2, 4, inf}
	nodes := []*llmdiagv1.NodeMetrics{
		node("a", "m1", b, []float64{10, 10, 10, 10}), // everything ≤ 1
		node("b", "m1", b, []float64{0, 10, 10, 10}),  // everything in (1, 2]
		node("c", "m2", b, []float64{0, 0, 10, 10}),   // everything in (2, 4]
		node("d", "m2", b, []float64{0, 0, 0, 10}),    // everything above 4
		node("e", "m3", []float64{1, 10, inf}, []float64{5, 5, 5}),
		{Node: "f", Model: "m4"}, // no TTFT
	}
	qs := []float64{0.5, 0.99}
	ttft := llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT

	t.Run("by node", func(t *testing.T) {
		r := compare.Compare(compare.Input{Metric: ttft, Quantiles: qs, GroupBy: llmdiagv1.GroupBy_GROUP_BY_NODE, Nodes: nodes[:4]})
		// Hand-computed P50: a 0.5 (in [0,1]), b 1.5, c 3, d 4 (+Inf bucket → largest finite bound).
		want := map[string]struct {
			p50, lo, hi float64
			rank        uint32
		}{"a": {0.5, 0, 1, 1}, "b": {1.5, 1, 2, 2}, "c": {3, 2, 4, 3}, "d": {4, 4, inf, 4}}
		for _, row := range r.GetRows() {
			w := want[row.GetSubject()]
			p := row.GetValues()[0].GetPercentile()
			if p.GetValue() != w.p50 || p.GetLowerBound() != w.lo || p.GetUpperBound() != w.hi || row.GetValues()[0].GetRank() != w.rank {
				t.Errorf("%s: p50 %v rank %d; want %+v", row.GetSubject(), p, row.GetValues()[0].GetRank(), w)
			}
		}
		// Median of P50s: (1.5+3)/2 = 2.25; d's ratio 4/2.25.
		if got := r.GetRows()[3].GetValues()[0].GetRatioToMedian(); math.Abs(got-4/2.25) > 1e-12 {
			t.Errorf("ratio to median = %v", got)
		}
		// a: P99 = 0.99, P50 = 0.5: tail 1.98.
		if got := r.GetRows()[0].GetTailRatio(); math.Abs(got-1.98) > 1e-12 {
			t.Errorf("tail ratio = %v, want 1.98", got)
		}
	})

	t.Run("by model sums buckets", func(t *testing.T) {
		r := compare.Compare(compare.Input{Metric: ttft, Quantiles: qs, GroupBy: llmdiagv1.GroupBy_GROUP_BY_MODEL, Nodes: nodes[:4]})
		if len(r.GetRows()) != 2 {
			t.Fatalf("rows = %v", r.GetRows())
		}
		m1 := r.GetRows()[0]
		// m1 = a+b: 10 in [0,1], 10 in (1,2]; rank 10 of 20 is exactly 1.
		if m1.GetSubject() != "m1" || m1.GetCount() != 20 || m1.GetValues()[0].GetPercentile().GetValue() != 1 || strings.Join(m1.GetNodes(), ",") != "a,b" {
			t.Errorf("m1 = %v", m1)
		}
	})

	t.Run("mixed layouts and missing metric are notes, not numbers", func(t *testing.T) {
		mixed := append([]*llmdiagv1.NodeMetrics{}, nodes[0], node("e2", "m1", []float64{1, 10, inf}, []float64{5, 5, 5}), nodes[5])
		r := compare.Compare(compare.Input{Metric: ttft, Quantiles: qs, GroupBy: llmdiagv1.GroupBy_GROUP_BY_MODEL, Nodes: mixed})
		for _, row := range r.GetRows() {
			if row.GetNote() == "" || !math.IsNaN(row.GetValues()[0].GetPercentile().GetValue()) || row.GetValues()[0].GetRank() != 0 {
				t.Errorf("%s: note %q value %v", row.GetSubject(), row.GetNote(), row.GetValues()[0])
			}
		}
	})

	t.Run("outlier", func(t *testing.T) {
		r := compare.Compare(compare.Input{Metric: ttft, Quantiles: qs, GroupBy: llmdiagv1.GroupBy_GROUP_BY_NODE, Nodes: []*llmdiagv1.NodeMetrics{nodes[0], node("a2", "m1", b, []float64{10, 10, 10, 10}), node("a3", "m1", b, []float64{10, 10, 10, 10}), nodes[3]}})
		var flagged []string
		for _, row := range r.GetRows() {
			if row.GetOutlier() {
				flagged = append(flagged, row.GetSubject())
			}
		}
		if strings.Join(flagged, ",") != "d" {
			t.Errorf("outliers = %v, want d", flagged)
		}
	})
}
