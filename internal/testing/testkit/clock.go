package testkit

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// Clock is a clock a test sets and moves, for code that reads its time
// from a Now method (or a func() time.Time) and waits with AfterFunc or
// After. Time moves only when the test says (Add, Set); timers then due
// fire in the goroutine that moved it, in deadline order, before Add or
// Set returns, so that what they did is there to check. Safe for
// concurrent use.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	armed  map[*Timer]struct{}
	armeds uint64 // how many times a timer was armed: orders timers due at the same time
	skip   bool
	waits  []time.Duration
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// SkipWaits makes every later wait end at once (for code that retries
// with a backoff): After and AfterFunc move the clock on by the wait, as
// if it had passed, and fire; Waits lists what was asked. It returns c.
func (c *Clock) SkipWaits() *Clock {
	c.mu.Lock()
	c.skip = true
	c.mu.Unlock()
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock on by d and fires the timers due.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	c.fire()
}

// Set moves the clock to t and fires the timers due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
	c.fire()
}

// fire calls the functions of the armed timers due, earliest first, until
// none is due (a function may arm a timer already due).
func (c *Clock) fire() {
	for {
		c.mu.Lock()
		var due []*Timer
		for t := range c.armed {
			if !t.at.After(c.t) {
				delete(c.armed, t)
				due = append(due, t)
			}
		}
		slices.SortFunc(due, func(a, b *Timer) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq)) })
		fs := make([]func(), len(due))
		for i, t := range due {
			fs[i] = t.f
		}
		c.mu.Unlock()
		if len(fs) == 0 {
			return
		}
		for _, f := range fs {
			f()
		}
	}
}

// AfterFunc arms a timer that calls f once the clock has moved d on, as
// time.AfterFunc does with the wall clock.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{c: c, f: f, at: c.t.Add(d)}
	if c.skip {
		c.t = t.at
		c.waits = append(c.waits, d)
		go f() // in its own goroutine: the caller may hold a lock f takes
		return t
	}
	c.arm(t, d)
	return t
}

// arm arms t to fire once the clock has moved d on; c.mu is held.
func (c *Clock) arm(t *Timer, d time.Duration) {
	if c.armed == nil {
		c.armed = map[*Timer]struct{}{}
	}
	c.armeds++
	t.at, t.seq = c.t.Add(d), c.armeds
	c.armed[t] = struct{}{}
}

// After returns a channel that receives its deadline once the clock has
// moved d on, as time.After does.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := c.t.Add(d)
	if c.skip {
		c.t = at
		c.waits = append(c.waits, d)
		ch <- at
		return ch
	}
	c.arm(&Timer{c: c, f: func() { ch <- at }}, d)
	return ch
}

// Waits returns the waits asked of a clock that skips them, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

// Armed returns how many timers are armed: how many waits are pending.
func (c *Clock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.armed)
}

// WaitArmed waits (on the wall clock) until at least n timers are armed:
// the code under test has reached its wait, so that moving the clock now
// ends it.
func (c *Clock) WaitArmed(t testing.TB, n int) {
	t.Helper()
	Wait{For: time.Minute, Every: time.Millisecond}.Until(t, fmt.Sprintf("%d armed timers", n), func() bool { return c.Armed() >= n })
}

// Timer is a timer of a Clock; it has *time.Timer's Reset and Stop.
type Timer struct {
	c   *Clock
	f   func()
	at  time.Time
	seq uint64
}

// Reset arms the timer to fire once the clock has moved d on from now; it
// reports whether the timer was armed.
func (t *Timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, was := t.c.armed[t]
	t.c.arm(t, d)
	return was
}

// Stop disarms the timer; it reports whether the timer was armed.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, was := t.c.armed[t]
	delete(t.c.armed, t)
	return was
}
