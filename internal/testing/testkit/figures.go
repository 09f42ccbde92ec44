package testkit

import (
	"math"
	"strconv"
	"testing"
)

// Near reports whether got is want within tol, relative to max(1, |want|):
// an absolute tolerance for figures up to 1, a relative one above. NaN is
// near NaN only.
func Near(got, want, tol float64) bool {
	switch {
	case math.IsNaN(got) || math.IsNaN(want):
		return math.IsNaN(got) && math.IsNaN(want)
	case got == want:
		return true
	}
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

// NearPtr reports whether two optional figures agree: both absent, or
// both present and Near.
func NearPtr(got, want *float64, tol float64) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return Near(*got, *want, tol)
}

// Show prints an optional figure: its value, or "absent".
func Show(p *float64) string {
	if p == nil {
		return "absent"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

// Figures returns a check of optional figures within tol: each call
// reports (Errorf) a figure whose got is not NearPtr its want, naming it:
// "queue = 3, want absent".
//
//	fig := testkit.Figures(t, 1e-12)
//	fig("queue", got.Queue, want.Queue)
func Figures(t testing.TB, tol float64) func(name string, got, want *float64) {
	return func(name string, got, want *float64) {
		t.Helper()
		if !NearPtr(got, want, tol) {
			t.Errorf("%s = %s, want %s", name, Show(got), Show(want))
		}
	}
}
