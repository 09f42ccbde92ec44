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
	return figures(t, func(got, want float64) bool { return Near(got, want, tol) })
}

// FiguresAbs is Figures with an absolute tolerance: a figure agrees when
// it is within tol of its want, however large the want.
func FiguresAbs(t testing.TB, tol float64) func(name string, got, want *float64) {
	return figures(t, func(got, want float64) bool {
		return got == want || math.Abs(got-want) <= tol
	})
}

func figures(t testing.TB, near func(got, want float64) bool) func(name string, got, want *float64) {
	return func(name string, got, want *float64) {
		t.Helper()
		if (got == nil) != (want == nil) || got != nil && !near(*got, *want) {
			t.Errorf("%s = %s, want %s", name, Show(got), Show(want))
		}
	}
}
