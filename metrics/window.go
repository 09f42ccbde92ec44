package metrics

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmdiag/llmdiag/sample"
)

// Lifetime names the window from the start of the node's counters to now.
const Lifetime = "lifetime"

// MaxWindow is the longest window ParseWindow accepts.
const MaxWindow = 7 * 24 * time.Hour

// ErrInvalidWindow marks a window ParseWindow rejects.
var ErrInvalidWindow = errors.New("invalid window")

// ParseWindow reads a window: a Prometheus duration ("30s", "5m", "1h30m",
// "1d") greater than 0 and at most 7d, or "lifetime". Errors wrap
// ErrInvalidWindow.
func ParseWindow(s string) (window time.Duration, lifetime bool, err error) {
	if s == Lifetime {
		return 0, true, nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, false, fmt.Errorf("%w %q: %w", ErrInvalidWindow, s, err)
	}
	switch window = time.Duration(d); {
	case window <= 0:
		return 0, false, fmt.Errorf("%w %q: must be longer than 0", ErrInvalidWindow, s)
	case window > MaxWindow:
		return 0, false, fmt.Errorf("%w %q: longer than the maximum of 7d", ErrInvalidWindow, s)
	}
	return window, false, nil
}

// CanonicalWindow is the one spelling of a window ParseWindow accepts, so
// that equal windows key caches alike: "60m", "3600s" and "1h" are all
// "1h", "168h" and "1w" are "7d", and "lifetime" stays. Units are d, h, m, s
// and ms, largest first.
func CanonicalWindow(s string) (string, error) {
	d, lifetime, err := ParseWindow(s)
	if err != nil {
		return "", err
	}
	if lifetime {
		return Lifetime, nil
	}
	return FormatWindow(d), nil
}

// FormatWindow spells d as CanonicalWindow does; d must be positive.
func FormatWindow(d time.Duration) string {
	var b []byte
	for _, u := range [...]struct {
		unit string
		d    time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
		if n := d / u.d; n > 0 {
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, u.unit...)
			d -= n * u.d
		}
	}
	if len(b) == 0 {
		return "0s"
	}
	return string(b)
}

// Pick chooses the samples that form a window ending at the newest sample:
// newest is the sample with the latest At, and base is the newest sample read
// at or before newest.At − window, or the oldest one when the history is
// shorter than the window. base is nil when there is no older sample to use,
// or when window <= 0 (the lifetime). Samples of failed scrapes (Up false)
// carry no counters and are never a base. samples may be in any order and
// may contain nil.
func Pick(samples []*sample.Sample, window time.Duration) (newest, base *sample.Sample) {
	for _, s := range samples {
		if s != nil && (newest == nil || s.At.After(newest.At)) {
			newest = s
		}
	}
	if newest == nil || window <= 0 {
		return newest, nil
	}
	cutoff := newest.At.Add(-window)
	var oldest *sample.Sample
	for _, s := range samples {
		if s == nil || !s.Up || !s.At.Before(newest.At) {
			continue
		}
		if oldest == nil || s.At.Before(oldest.At) {
			oldest = s
		}
		if !s.At.After(cutoff) && (base == nil || s.At.After(base.At)) {
			base = s
		}
	}
	if base == nil {
		base = oldest
	}
	return newest, base
}

// Window is a window as configuration holds it: a positive duration of at
// most MaxWindow, or LifetimeWindow. It is a flag.Value that reads what
// ParseWindow reads and prints the canonical spelling (CanonicalWindow);
// on the wire, windows stay strings (String). The zero Window is unset:
// whoever takes one uses DefaultWindow in its place (Or).
type Window time.Duration

const (
	// DefaultWindow is the window verdicts are computed for when none is
	// configured: serve's --window, the rate window of `llmdiag rules` and
	// `llmdiag dashboard`.
	DefaultWindow = Window(5 * time.Minute)
	// LifetimeWindow is the window named Lifetime.
	LifetimeWindow = Window(-1)
)

// NewWindow reads s as ParseWindow does.
func NewWindow(s string) (Window, error) {
	d, lifetime, err := ParseWindow(s)
	if err != nil {
		return 0, err
	}
	if lifetime {
		return LifetimeWindow, nil
	}
	return Window(d), nil
}

// String is the canonical spelling ("5m", "1h30m", "lifetime"); "" for
// the zero Window.
func (w Window) String() string {
	switch {
	case w == LifetimeWindow:
		return Lifetime
	case w <= 0:
		return ""
	}
	return FormatWindow(time.Duration(w))
}

// Set reads s as ParseWindow does (flag.Value).
func (w *Window) Set(s string) error {
	v, err := NewWindow(s)
	if err != nil {
		return err
	}
	*w = v
	return nil
}

// Duration is the window's span; 0 for LifetimeWindow and the zero Window.
func (w Window) Duration() time.Duration { return time.Duration(max(w, 0)) }

// Lifetime reports whether w is LifetimeWindow.
func (w Window) Lifetime() bool { return w == LifetimeWindow }

// Or is w, or def when w is the zero Window.
func (w Window) Or(def Window) Window {
	if w == 0 {
		return def
	}
	return w
}
