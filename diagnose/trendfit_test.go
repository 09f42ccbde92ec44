package diagnose

import (
	"math"
	"testing"
	"time"
)

// TestExactFrom: a fit is kept only for x that are exactly times less
// base, in order; readHistory's are.
func TestExactFrom(t *testing.T) {
	const unix = 1767225600.0
	at := func(ts ...float64) []float64 { // x from the first time, as readHistory has them
		x := make([]float64, len(ts))
		for i, s := range ts {
			x[i] = s - ts[0]
		}
		return x
	}
	for _, tc := range []struct {
		name string
		x    []float64
		base float64
		want bool
	}{
		{"times less the first", at(unix, unix+5.001, unix+10.002), unix, true},
		{"from before the first", []float64{1, 6}, unix, true},
		{"one point", []float64{0}, unix, true},
		{"none", nil, unix, false},
		{"not a time less base", []float64{0, 0.1}, unix, false},
		{"base 0", []float64{0, 5}, 0, false},
		{"base below 0", []float64{0, 5}, -unix, false},
		{"base NaN", []float64{0, 5}, math.NaN(), false},
		{"a time twice", []float64{0, 5, 5}, unix, false},
		{"out of order", []float64{0, 10, 5}, unix, false},
		{"below base", []float64{-5, 0}, unix, false},
		{"more than base again", []float64{0, 3}, 2, false},
		{"a NaN", []float64{0, math.NaN()}, unix, false},
	} {
		if got := exactFrom(tc.x, tc.base); got != tc.want {
			t.Errorf("%s: exactFrom(%v, %v) = %v, want %v", tc.name, tc.x, tc.base, got, tc.want)
		}
	}
	// readHistory's x, from times a microsecond to days apart (times
	// closer than a quarter of a microsecond are one float: no fit).
	t0 := time.Date(2026, 12, 2, 15, 4, 5, 123456789, time.UTC)
	x := []float64{0}
	for _, d := range []time.Duration{time.Microsecond, time.Millisecond + 7, 5 * time.Second, time.Hour, 49 * time.Hour} {
		x = append(x, unixSeconds(t0.Add(d))-unixSeconds(t0))
	}
	if !exactFrom(x, unixSeconds(t0)) {
		t.Errorf("readHistory's x %v from %v: not exact", x, unixSeconds(t0))
	}
}
