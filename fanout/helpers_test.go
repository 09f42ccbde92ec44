package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fanout"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// flakyFeed is a feed that fails while down.
type flakyFeed struct {
	*memory.Store
	down atomic.Bool
}

var errDown = errors.New("feed down")

func (f *flakyFeed) LastToken(ctx context.Context) (string, error) {
	if f.down.Load() {
		return "", errDown
	}
	return f.Store.LastToken(ctx)
}

func (f *flakyFeed) Events(ctx context.Context, token string, max int, wait time.Duration) ([]store.Event, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.Events(ctx, token, max, wait)
}

// fakeClock is a manual clock for heartbeat timing.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) fanout.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, f: f, at: c.now.Add(d), armed: true}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock and calls the functions of the timers due, in
// goroutines of their own as time.AfterFunc does.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		if t.armed && !t.at.After(c.now) {
			t.armed = false
			go t.f()
		}
	}
}

// waitTimers waits until n timers are armed (a reader is waiting).
func (c *fakeClock) waitTimers(t *testing.T, n int) {
	t.Helper()
	testkit.Wait{For: time.Minute, Every: time.Millisecond}.Until(t, fmt.Sprintf("%d armed timers", n), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		armed := 0
		for _, t := range c.timers {
			if t.armed {
				armed++
			}
		}
		return armed >= n
	})
}

type fakeTimer struct {
	c     *fakeClock
	f     func()
	at    time.Time
	armed bool
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.at, t.armed = t.c.now.Add(d), true
	return was
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}
