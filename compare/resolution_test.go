package compare_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/compare"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Every node below has 10 observations over these buckets; spread(lo, mid,
// hi, top) puts that many in [0,1], (1,2], (2,4] and above 4.
var layout = []float64{1, 2, 4, inf}

func spread(c ...float64) []float64 {
	out := make([]float64, len(c))
	acc := 0.0
	for i, v := range c {
		acc += v
		out[i] = acc
	}
	return out
}

func rowsBySubject(r *llmdiagv1.ComparePercentilesResponse) map[string]*llmdiagv1.CompareRow {
	out := map[string]*llmdiagv1.CompareRow{}
	for _, row := range r.GetRows() {
		out[row.GetSubject()] = row
	}
	return out
}

func TestGroupByLabel(t *testing.T) {
	nodes := []*llmdiagv1.NodeMetrics{
		node("a", "m1", layout, spread(10, 0, 0, 0)), // P50 0.5
		node("b", "m1", layout, spread(0, 10, 0, 0)), // P50 1.5
		node("c", "m2", layout, spread(0, 0, 10, 0)), // P50 3
		node("d", "m2", layout, spread(0, 0, 0, 10)),
		node("e", "m2", layout, spread(0, 0, 0, 10)),
	}
	labels := map[string]map[string]string{
		"a": {"team": "search", "region": "eu"},
		"b": {"team": "search"},
		"c": {"team": "ads"},
		"d": {"region": "us"},
		// e has no labels at all.
	}
	tests := []struct {
		label    string
		want     []string // subjects in order
		members  map[string]string
		count    map[string]float64
		absentOK string // nodes in the absent row
	}{
		{"team", []string{"ads", "search", "(no team label)"}, map[string]string{"ads": "c", "search": "a,b"}, map[string]float64{"ads": 10, "search": 20}, "d,e"},
		{"region", []string{"eu", "us", "(no region label)"}, map[string]string{"eu": "a", "us": "d"}, map[string]float64{"eu": 10, "us": 10}, "b,c,e"},
		{"pool", []string{"(no pool label)"}, nil, nil, "a,b,c,d,e"},
	}
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			r := compare.Compare(compare.Input{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Quantiles: []float64{0.5, 0.99},
				GroupBy: llmdiagv1.GroupBy_GROUP_BY_LABEL, Label: tc.label, Nodes: nodes, Labels: labels})
			var got []string
			for _, row := range r.GetRows() {
				got = append(got, row.GetSubject())
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("subjects %q, want %q", got, tc.want)
			}
			for _, row := range r.GetRows() {
				if strings.HasPrefix(row.GetSubject(), "(no ") {
					if strings.Join(row.GetNodes(), ",") != tc.absentOK || !strings.Contains(row.GetNote(), tc.label) {
						t.Errorf("absent row: nodes %v note %q, want nodes %s", row.GetNodes(), row.GetNote(), tc.absentOK)
					}
					for _, v := range row.GetValues() {
						if !math.IsNaN(v.GetPercentile().GetValue()) || v.GetRank() != 0 || v.GetWithinResolution() {
							t.Errorf("absent row has a value: %v", v)
						}
					}
					if row.GetOutlier() || row.GetTailRatio() != 0 {
						t.Errorf("absent row flagged: %v", row)
					}
					continue
				}
				if strings.Join(row.GetNodes(), ",") != tc.members[row.GetSubject()] || row.GetCount() != tc.count[row.GetSubject()] || row.GetNote() != "" {
					t.Errorf("%s: nodes %v count %v note %q", row.GetSubject(), row.GetNodes(), row.GetCount(), row.GetNote())
				}
			}
		})
	}
	// search = a+b: 10 in [0,1], 10 in (1,2]: P50 is exactly 1; ads (c) P50 3.
	r := compare.Compare(compare.Input{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Quantiles: []float64{0.5},
		GroupBy: llmdiagv1.GroupBy_GROUP_BY_LABEL, Label: "team", Nodes: nodes, Labels: labels})
	rows := rowsBySubject(r)
	if v := rows["search"].GetValues()[0]; v.GetPercentile().GetValue() != 1 || v.GetRank() != 1 {
		t.Errorf("search P50 %v", v)
	}
	if v := rows["ads"].GetValues()[0]; v.GetPercentile().GetValue() != 3 || v.GetRank() != 2 {
		t.Errorf("ads P50 %v", v)
	}
}

func TestRanksAndResolution(t *testing.T) {
	tests := []struct {
		name     string
		counts   map[string][]float64 // node → spread over layout
		other    map[string][]float64 // node → counts over otherLayout
		wantRank map[string]uint32    // at P50
		within   string               // nodes within resolution at P50, sorted
	}{
		{
			// P50: a 0.5, c 1.333 and b 1.5 (both in (1,2]), d 3. Median
			// (1.333+1.5)/2 lies in (1,2]. d is 4th: three lower values.
			name:     "same bucket ties",
			counts:   map[string][]float64{"a": spread(10, 0, 0, 0), "b": spread(0, 10, 0, 0), "c": spread(3, 6, 1, 0), "d": spread(0, 0, 10, 0)},
			wantRank: map[string]uint32{"a": 1, "b": 2, "c": 2, "d": 4},
			within:   "b,c",
		},
		{
			// a, b exactly equal; c, d in the +Inf bucket (value 4, bounds 4..+Inf): tied.
			name:     "equal values and the +Inf bucket",
			counts:   map[string][]float64{"a": spread(0, 0, 10, 0), "b": spread(0, 0, 10, 0), "c": spread(0, 0, 0, 10), "d": spread(1, 0, 0, 9)},
			wantRank: map[string]uint32{"a": 1, "b": 1, "c": 3, "d": 3},
			// Median (3+4)/2 = 3.5: inside a's and b's (2,4]; not in [4,+Inf).
			within: "a,b",
		},
		{
			// Every value in its own bucket; the median 2.25 is in c's (2,4].
			name:     "distinct buckets rank strictly",
			counts:   map[string][]float64{"a": spread(10, 0, 0, 0), "b": spread(0, 10, 0, 0), "c": spread(0, 0, 10, 0), "d": spread(0, 0, 0, 10)},
			wantRank: map[string]uint32{"a": 1, "b": 2, "c": 3, "d": 4},
			within:   "c",
		},
		{
			// a 1.5 in (1,2]; b 5.5 in (1,10] of another layout: a's value
			// lies in b's bucket, but the buckets differ, so no tie. The
			// median 3.5 is in b's bucket only.
			name:     "different layouts do not tie",
			counts:   map[string][]float64{"a": spread(0, 10, 0, 0)},
			other:    map[string][]float64{"b": {0, 10, 10}},
			wantRank: map[string]uint32{"a": 1, "b": 2},
			within:   "b",
		},
		{
			name:     "one subject is never within resolution",
			counts:   map[string][]float64{"a": spread(0, 10, 0, 0)},
			wantRank: map[string]uint32{"a": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []*llmdiagv1.NodeMetrics
			for id, c := range tc.counts {
				nodes = append(nodes, node(id, "m", layout, c))
			}
			for id, c := range tc.other {
				nodes = append(nodes, node(id, "m", []float64{1, 10, inf}, c))
			}
			r := compare.Compare(compare.Input{Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Quantiles: []float64{0.5}, Nodes: nodes})
			var within []string
			for _, row := range r.GetRows() {
				v := row.GetValues()[0]
				if v.GetRank() != tc.wantRank[row.GetSubject()] {
					t.Errorf("%s: rank %d (P50 %v), want %d", row.GetSubject(), v.GetRank(), v.GetPercentile(), tc.wantRank[row.GetSubject()])
				}
				if v.GetWithinResolution() {
					within = append(within, row.GetSubject())
				}
			}
			if strings.Join(within, ",") != tc.within {
				t.Errorf("within resolution: %v, want %s", within, tc.within)
			}
		})
	}
}

func TestBaseline(t *testing.T) {
	ttft := llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT
	now := []*llmdiagv1.NodeMetrics{
		node("a", "m1", layout, spread(0, 0, 10, 0)), // P50 3, P99 3.98
		node("b", "m1", layout, spread(0, 10, 0, 0)), // P50 1.5, P99 1.99
		node("c", "m2", layout, spread(10, 0, 0, 0)), // P50 0.5, P99 0.99
	}
	then := map[string]*llmdiagv1.NodeMetrics{
		"a": node("a", "m1", layout, spread(0, 10, 0, 0)),  // was 1.5 / 1.99: a got slower
		"b": node("b", "m1", layout, spread(0, 10, 0, 0)),  // unchanged
		"c": node("c", "m2", layout, spread(0, 0, 0, 100)), // would dominate any median it entered
	}
	qs := []float64{0.5, 0.99}
	in := compare.Input{Metric: ttft, Quantiles: qs, Nodes: now, BaselineOffset: time.Hour, Baseline: then}
	r := compare.Compare(in)
	plain := compare.Compare(compare.Input{Metric: ttft, Quantiles: qs, Nodes: now})

	// Pairs, now then baseline, in subject order.
	var order []string
	for _, row := range r.GetRows() {
		order = append(order, row.GetSubject()+"@"+row.GetOffset().AsDuration().String())
	}
	if got := strings.Join(order, " "); got != "a@0s a@1h0m0s b@0s b@1h0m0s c@0s c@1h0m0s" {
		t.Fatalf("rows %s", got)
	}
	for i := 0; i < len(r.GetRows()); i += 2 {
		nowRow, thenRow, alone := r.GetRows()[i], r.GetRows()[i+1], plain.GetRows()[i/2]
		// The rows now rank and compare as if there were no baseline.
		for qi := range qs {
			got, want := nowRow.GetValues()[qi], alone.GetValues()[qi]
			if got.GetRank() != want.GetRank() || got.GetRatioToMedian() != want.GetRatioToMedian() || got.GetWithinResolution() != want.GetWithinResolution() {
				t.Errorf("%s q%v: %v; without baseline %v", nowRow.GetSubject(), qs[qi], got, want)
			}
			if b := thenRow.GetValues()[qi]; b.GetRank() != 0 || b.GetRatioToMedian() != 0 {
				t.Errorf("%s baseline ranked: %v", thenRow.GetSubject(), b)
			}
		}
		if nowRow.GetOutlier() != alone.GetOutlier() || thenRow.GetOutlier() {
			t.Errorf("%s outlier now %v (alone %v), then %v", nowRow.GetSubject(), nowRow.GetOutlier(), alone.GetOutlier(), thenRow.GetOutlier())
		}
		if thenRow.GetTailRatio() == 0 {
			t.Errorf("%s baseline has no tail ratio", thenRow.GetSubject())
		}
		// ratio_to_baseline: now / then at P99, the same on both rows.
		want := nowRow.GetValues()[1].GetPercentile().GetValue() / thenRow.GetValues()[1].GetPercentile().GetValue()
		if nowRow.GetRatioToBaseline() != want || thenRow.GetRatioToBaseline() != want {
			t.Errorf("%s ratio to baseline %v / %v, want %v", nowRow.GetSubject(), nowRow.GetRatioToBaseline(), thenRow.GetRatioToBaseline(), want)
		}
	}
	rows := r.GetRows()
	if got := rows[0].GetRatioToBaseline(); math.Abs(got-3.98/1.99) > 1e-12 {
		t.Errorf("a: ratio to baseline %v, want 2", got)
	}
	if got := rows[2].GetRatioToBaseline(); got != 1 {
		t.Errorf("b: ratio to baseline %v, want 1", got)
	}
	// b's baseline is in the same bucket as b now: the difference is within
	// resolution; a moved from (1,2] to (2,4]: a measured difference.
	if !rows[3].GetValues()[0].GetWithinResolution() || rows[1].GetValues()[0].GetWithinResolution() {
		t.Errorf("baseline within resolution: a %v, b %v", rows[1].GetValues()[0], rows[3].GetValues()[0])
	}

	t.Run("missing baseline is a note", func(t *testing.T) {
		in := in
		in.GroupBy = llmdiagv1.GroupBy_GROUP_BY_MODEL
		in.Baseline = map[string]*llmdiagv1.NodeMetrics{"a": then["a"], "c": then["c"]}
		in.BaselineMissing = map[string]string{"b": "no samples from 1h ago"}
		r := compare.Compare(in)
		if len(r.GetRows()) != 4 {
			t.Fatalf("rows %v", r.GetRows())
		}
		m1, m1then, m2then := r.GetRows()[0], r.GetRows()[1], r.GetRows()[3]
		if m1.GetNote() != "" || math.IsNaN(m1.GetValues()[0].GetPercentile().GetValue()) {
			t.Errorf("m1 now lost its values: %v", m1)
		}
		if !strings.Contains(m1then.GetNote(), "no baseline for b: no samples from 1h ago") || !math.IsNaN(m1then.GetValues()[0].GetPercentile().GetValue()) || m1then.GetRatioToBaseline() != 0 {
			t.Errorf("m1 baseline: %v", m1then)
		}
		if m2then.GetNote() != "" || m2then.GetRatioToBaseline() == 0 {
			t.Errorf("m2 baseline: %v", m2then)
		}
	})
}
