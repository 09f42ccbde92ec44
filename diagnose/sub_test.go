package diagnose

import (
	"testing"
	"time"
)

// TestSub: sub is Sub, for times a few nanoseconds to a few centuries
// apart, either way, before 1970 and after, up to the ends of time.Time,
// where Sub saturates.
func TestSub(t *testing.T) {
	base := []time.Time{
		time.Date(2026, 12, 2, 11, 0, 0, 999_999_999, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 1, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(1<<62, 5),
		{},
	}
	gaps := []time.Duration{0, 1, -1, 999_999_999, time.Second + 1, -5 * time.Second, 2 * time.Hour,
		100 * 365 * 24 * time.Hour, -250 * 365 * 24 * time.Hour, 1<<33*time.Second - 1, -(1<<33*time.Second - 1)}
	for _, a := range base {
		for _, b := range base {
			if got, want := sub(a, b), a.Sub(b); got != want {
				t.Errorf("sub(%v, %v) = %v, want %v", a, b, got, want)
			}
			for _, g := range gaps {
				c := b.Add(g)
				if got, want := sub(c, b), c.Sub(b); got != want {
					t.Errorf("sub(%v, %v) = %v, want %v", c, b, got, want)
				}
				if got, want := sub(b, c), b.Sub(c); got != want {
					t.Errorf("sub(%v, %v) = %v, want %v", b, c, got, want)
				}
			}
		}
	}
}
