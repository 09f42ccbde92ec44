package histogram

import (
	"math"
	"slices"
	"testing"
)

// TestAttainmentByHand checks attainment bounds worked out by hand on a
// fixture of 100 TTFT observations in vLLM's buckets around 1–5 s:
//
//	le     0.5  1   2.5  5   +Inf
//	count  50   30  15   4   1     (per bucket)
//	cum.   50   80  95   99  100
func TestAttainmentByHand(t *testing.T) {
	fixture := bk(0.5, 50, 1, 80, 2.5, 95, 5, 99, inf, 100)
	nan := math.NaN()
	for _, tc := range []struct {
		name         string
		target       float64
		buckets      []Bucket
		lower, upper float64
		bLo, bHi     float64
		exact        bool
	}{
		// 95 of 100 observations are at or under 2.5 s: known exactly.
		{"target on a bound", 2.5, fixture, 0.95, 0.95, 2.5, 2.5, true},
		// 2 s lies inside (1, 2.5]: its 15 observations may be hits or
		// misses, so 80/100 to 95/100.
		{"target inside a bucket", 2, fixture, 0.80, 0.95, 1, 2.5, false},
		// Below the first bound: none is known to be under 0.1 s, at most
		// the first bucket's 50.
		{"target below the first bound", 0.1, fixture, 0, 0.50, math.Inf(-1), 0.5, false},
		// Above the largest finite bound: 99 known, the +Inf bucket's one
		// may be anything.
		{"target in the +Inf bucket", 10, fixture, 0.99, 1, 5, inf, false},
		{"target +Inf", inf, fixture, 1, 1, inf, inf, true},
		{"first bound exactly", 0.5, fixture, 0.5, 0.5, 0.5, 0.5, true},
		// Buckets out of order and a repeated bound (merged, as
		// histogram_quantile does): le=1 holds 40+40.
		{"unsorted, repeated bound", 2, bk(inf, 100, 1, 40, 0.5, 50, 2.5, 95, 1, 40), 0.80, 0.95, 1, 2.5, false},
		// A count below its predecessor is raised to it (80 at le=2.5).
		{"non-monotonic", 2.5, bk(0.5, 50, 1, 80, 2.5, 70, inf, 100), 0.80, 0.80, 2.5, 2.5, true},
		{"no observations", 2, bk(0.5, 0, 1, 0, inf, 0), nan, nan, nan, nan, false},
		{"no +Inf bucket", 2, bk(0.5, 50, 1, 80), nan, nan, nan, nan, false},
		{"one bucket", 2, bk(inf, 10), nan, nan, nan, nan, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.buckets)
			a := AttainmentAt(tc.target, tc.buckets)
			if !sameFloat(a.Lower, tc.lower) || !sameFloat(a.Upper, tc.upper) {
				t.Errorf("attainment [%v, %v], want [%v, %v]", a.Lower, a.Upper, tc.lower, tc.upper)
			}
			if !sameFloat(a.BucketLower, tc.bLo) || !sameFloat(a.BucketUpper, tc.bHi) {
				t.Errorf("bucket (%v, %v], want (%v, %v]", a.BucketLower, a.BucketUpper, tc.bLo, tc.bHi)
			}
			if !math.IsNaN(tc.lower) {
				if a.Exact() != tc.exact {
					t.Errorf("Exact() = %v, want %v", a.Exact(), tc.exact)
				}
				if a.GoodLower != a.Lower*a.Total || a.GoodUpper != a.Upper*a.Total {
					t.Errorf("counts %v, %v of %v disagree with shares %v, %v", a.GoodLower, a.GoodUpper, a.Total, a.Lower, a.Upper)
				}
			}
			if !slices.Equal(orig, tc.buckets) {
				t.Error("input modified")
			}
		})
	}
}

// TestAttainmentBoundsQuantile: the bounds bracket what histogram_quantile
// implies. When the q-quantile estimate is at or under the target, at least
// q of the observations may be at or under it (Upper >= q); when it is above
// the target, fewer than q are known to be (Lower <= q).
func TestAttainmentBoundsQuantile(t *testing.T) {
	fixture := bk(0.5, 50, 1, 80, 2.5, 95, 5, 99, inf, 100)
	for _, target := range []float64{0.1, 0.5, 0.7, 1, 2, 2.5, 3, 5, 10} {
		a := AttainmentAt(target, fixture)
		if a.Lower > a.Upper {
			t.Fatalf("target %v: lower %v above upper %v", target, a.Lower, a.Upper)
		}
		for q := 0.01; q <= 0.995; q += 0.01 {
			e := Quantile(q, fixture)
			if e.Value <= target && a.Upper < q-1e-12 {
				t.Errorf("target %v: P%.0f = %v is under it, yet upper attainment %v < %v", target, q*100, e.Value, a.Upper, q)
			}
			if e.Value > target && a.Lower > q+1e-12 {
				t.Errorf("target %v: P%.0f = %v is above it, yet lower attainment %v > %v", target, q*100, e.Value, a.Lower, q)
			}
		}
	}
}
