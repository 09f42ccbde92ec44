package metrics

import (
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/sample"
)

func TestParseWindow(t *testing.T) {
	tests := []struct {
		in       string
		want     time.Duration
		lifetime bool
		ok       bool
	}{
		{"30s", 30 * time.Second, false, true},
		{"5m", 5 * time.Minute, false, true},
		{"1h", time.Hour, false, true},
		{"1h30m", 90 * time.Minute, false, true},
		{"1d", 24 * time.Hour, false, true},
		{"7d", 7 * 24 * time.Hour, false, true},
		{"1w", 7 * 24 * time.Hour, false, true},
		{"500ms", 500 * time.Millisecond, false, true},
		{"lifetime", 0, true, true},
		{"8d", 0, false, false},
		{"1w1ms", 0, false, false},
		{"1y", 0, false, false},
		{"0s", 0, false, false},
		{"0", 0, false, false},
		{"", 0, false, false},
		{"-5m", 0, false, false},
		{"5", 0, false, false},
		{"5 m", 0, false, false},
		{"30m1h", 0, false, false},
		{"Lifetime", 0, false, false},
		{"1h; DROP", 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, lifetime, err := ParseWindow(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseWindow(%q) error = %v, want ok %v", tc.in, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidWindow) {
				t.Errorf("error %v does not wrap ErrInvalidWindow", err)
			}
			if got != tc.want || lifetime != tc.lifetime {
				t.Errorf("ParseWindow(%q) = %v, %v; want %v, %v", tc.in, got, lifetime, tc.want, tc.lifetime)
			}
		})
	}
}

func TestCanonicalWindow(t *testing.T) {
	tests := []struct{ in, want string }{
		{"60m", "1h"},
		{"3600s", "1h"},
		{"1h", "1h"},
		{"90m", "1h30m"},
		{"1h30m", "1h30m"},
		{"300s", "5m"},
		{"168h", "7d"},
		{"1w", "7d"},
		{"7d", "7d"},
		{"36h", "1d12h"},
		{"1500ms", "1s500ms"},
		{"lifetime", "lifetime"},
	}
	for _, tc := range tests {
		got, err := CanonicalWindow(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("CanonicalWindow(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		// The canonical spelling is a window of the same length.
		d0, l0, _ := ParseWindow(tc.in)
		d1, l1, err := ParseWindow(got)
		if err != nil || d0 != d1 || l0 != l1 {
			t.Errorf("%q reads back as %v %v %v, want %v %v", got, d1, l1, err, d0, l0)
		}
	}
	for _, bad := range []string{"", "8d", "0s", "Lifetime"} {
		if _, err := CanonicalWindow(bad); !errors.Is(err, ErrInvalidWindow) {
			t.Errorf("CanonicalWindow(%q): err = %v, want ErrInvalidWindow", bad, err)
		}
	}
}

func TestPick(t *testing.T) {
	t0 := time.Date(2026, 1, 13, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration, up bool) *sample.Sample { return &sample.Sample{At: t0.Add(-ago), Up: up} }
	var (
		m10   = at(10*time.Minute, true)
		m6    = at(6*time.Minute, true)
		m5    = at(5*time.Minute, true)
		m5d   = at(5*time.Minute, false)
		m2    = at(2*time.Minute, true)
		now   = at(0, true)
		nowDn = at(0, false)
		twin  = at(0, true) // same time as now
	)
	tests := []struct {
		name         string
		samples      []*sample.Sample
		window       time.Duration
		newest, base *sample.Sample
	}{
		// The base at exactly newest − window qualifies.
		{"exact", []*sample.Sample{m2, now, m10, m5, m6}, 5 * time.Minute, now, m5},
		// Newest at or before now − 4m is m5.
		{"between samples", []*sample.Sample{m10, m6, m5, m2, now}, 4 * time.Minute, now, m5},
		// History shorter than the window: the oldest.
		{"short history", []*sample.Sample{m5, m2, now}, time.Hour, now, m5},
		// A failed scrape is never a base.
		{"down base skipped", []*sample.Sample{m6, m5d, now}, 5 * time.Minute, now, m6},
		{"only down older", []*sample.Sample{m5d, now}, 5 * time.Minute, now, nil},
		// A failed newest scrape is still the newest: the node is down.
		{"down newest", []*sample.Sample{m5, nowDn}, 5 * time.Minute, nowDn, m5},
		{"one sample", []*sample.Sample{now}, 5 * time.Minute, now, nil},
		{"same time only", []*sample.Sample{now, twin}, 5 * time.Minute, now, nil},
		{"lifetime", []*sample.Sample{m10, now}, 0, now, nil},
		{"nil entries", []*sample.Sample{nil, m5, nil, now}, 5 * time.Minute, now, m5},
		{"none", nil, 5 * time.Minute, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			newest, base := Pick(tc.samples, tc.window)
			if newest != tc.newest || base != tc.base {
				t.Errorf("Pick = %v, %v; want %v, %v", show(newest), show(base), show(tc.newest), show(tc.base))
			}
		})
	}
}

func show(s *sample.Sample) string {
	if s == nil {
		return "nil"
	}
	return s.At.Format(time.TimeOnly)
}

// TestWindowFlag: a Window reads what ParseWindow reads, prints the
// canonical spelling, and is a flag.Value; the zero Window is unset.
func TestWindowFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		dur  time.Duration
	}{
		{"5m", "5m", 5 * time.Minute},
		{"300s", "5m", 5 * time.Minute},
		{"1h30m", "1h30m", 90 * time.Minute},
		{"7d", "7d", 7 * 24 * time.Hour},
		{"lifetime", "lifetime", 0},
	} {
		var w Window
		if err := w.Set(tc.in); err != nil {
			t.Errorf("Set(%q): %v", tc.in, err)
			continue
		}
		if w.String() != tc.want || w.Duration() != tc.dur || w.Lifetime() != (tc.in == Lifetime) {
			t.Errorf("Set(%q) = %q, %v, lifetime %v; want %q, %v", tc.in, w, w.Duration(), w.Lifetime(), tc.want, tc.dur)
		}
	}
	for _, bad := range []string{"", "0s", "8d", "1.5h", "soon"} {
		w := DefaultWindow
		if err := w.Set(bad); !errors.Is(err, ErrInvalidWindow) || w != DefaultWindow {
			t.Errorf("Set(%q) = %v, left %v; want ErrInvalidWindow, unchanged", bad, err, w)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	w := DefaultWindow
	fs.Var(&w, "window", "")
	if def := fs.Lookup("window").DefValue; def != "5m" {
		t.Errorf("default %q, want 5m", def)
	}
	if err := fs.Parse([]string{"--window", "1h"}); err != nil || w != Window(time.Hour) {
		t.Errorf("--window 1h: %v, %v", err, w)
	}
	var zero Window
	if zero.String() != "" || zero.Or(DefaultWindow) != DefaultWindow || w.Or(DefaultWindow) != w {
		t.Errorf("zero Window %q, Or %v", zero, zero.Or(DefaultWindow))
	}
}
