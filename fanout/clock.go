package fanout

import "time"

// Clock is the time source heartbeats are timed with.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, as
	// time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer (made by time.AfterFunc) heartbeats use:
// Reset re-arms it to call its function after d, Stop disarms it.
type Timer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

var _ Clock = RealClock{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
