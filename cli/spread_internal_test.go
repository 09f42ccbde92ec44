package cli

import (
	"testing"
	"time"
)

// TestDefaultSpread: --scrape-spread when set; otherwise none, or half the
// interval with the fast lane (at most half of --stale-after).
func TestDefaultSpread(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name                          string
		set                           bool
		spread, fast, interval, stale time.Duration
		want                          time.Duration
	}{
		{"default", false, 0, 0, 5 * s, 30 * s, 0},
		{"set", true, 2 * s, 0, 5 * s, 30 * s, 2 * s},
		{"fast lane", false, 0, 250 * time.Millisecond, 5 * s, 30 * s, 2500 * time.Millisecond},
		{"fast lane, long interval", false, 0, 250 * time.Millisecond, 30 * s, 30 * s, 15 * s},
		{"fast lane, past stale-after", false, 0, 250 * time.Millisecond, 2 * time.Minute, 30 * s, 15 * s},
		{"fast lane, set to 0", true, 0, 250 * time.Millisecond, 5 * s, 30 * s, 0},
		{"fast lane, set", true, s, 250 * time.Millisecond, 5 * s, 30 * s, s},
	}
	for _, tc := range tests {
		if got := defaultSpread(tc.set, tc.spread, tc.fast, tc.interval, tc.stale); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
