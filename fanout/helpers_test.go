package fanout_test

import (
	"context"
	"errors"
	"sync/atomic"
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

// fakeClock is a manual clock for heartbeat timing: testkit's, whose
// timers are fanout.Timers.
type fakeClock struct{ *testkit.Clock }

func newFakeClock() fakeClock { return fakeClock{testkit.NewClock(time.Unix(1_800_000_000, 0))} }

func (c fakeClock) AfterFunc(d time.Duration, f func()) fanout.Timer { return c.Clock.AfterFunc(d, f) }
