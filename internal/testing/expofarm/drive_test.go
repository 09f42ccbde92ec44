package expofarm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func urls(n int) []string {
	us := make([]string, n)
	for i := range us {
		us[i] = fmt.Sprintf("node-%d", i)
	}
	return us
}

// TestDriveCadence: every node is read once per interval, on its own
// phase, and the measured span's ticks all become reads. It runs in a
// synctest bubble: time is the bubble's, so a read takes no time and no
// tick is skipped because the machine was busy.
func TestDriveCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodes = 50
		var mu sync.Mutex
		reads := map[string]int{}
		start := time.Now()
		res, err := Drive(t.Context(), DriveConfig{
			URLs: urls(nodes), Interval: 20 * time.Millisecond, Warmup: 40 * time.Millisecond, Span: 400 * time.Millisecond,
			CPU: func() time.Duration { return time.Since(start) }, // the bubble's clock: CPU time is not the bubble's
		}, ReaderFunc(func(_ context.Context, u string) error {
			mu.Lock()
			reads[u]++
			mu.Unlock()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		// 20 ticks per node in the span, give or take one at each end (the
		// node's phase and jitter).
		if want := int64(nodes * 20); res.Due < want-nodes || res.Due > want+nodes {
			t.Errorf("%d ticks due, want about %d", res.Due, want)
		}
		if res.Reads != res.Due || res.Busy != 0 || res.NoSlot != 0 || res.Failed != 0 {
			t.Errorf("reads %d (%d failed), busy %d, no slot %d: want every one of the %d due read", res.Reads, res.Failed, res.Busy, res.NoSlot, res.Due)
		}
		if len(reads) != nodes {
			t.Errorf("%d nodes read, want %d", len(reads), nodes)
		}
		if res.Wall != 400*time.Millisecond || res.CPU != res.Wall {
			t.Errorf("wall %v, cpu %v; want the span, 400ms, both", res.Wall, res.CPU)
		}
	})
}

// TestDriveSkips: a node whose read outlasts the interval skips the ticks
// that come meanwhile, and a tick with every slot taken is skipped too;
// nothing queues.
func TestDriveSkips(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxInFlight int
		check       func(Result) error
	}{
		{"busy", 0, func(r Result) error {
			// Reads last 3 intervals: about 2 of 3 ticks are skipped.
			if r.Busy < r.Due/2 {
				return fmt.Errorf("%d of %d ticks skipped busy, want about 2/3", r.Busy, r.Due)
			}
			return nil
		}},
		{"no slot", 1, func(r Result) error {
			if r.NoSlot < r.Due/2 {
				return fmt.Errorf("%d of %d ticks found no slot, want most", r.NoSlot, r.Due)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var running, most atomic.Int64
			res, err := Drive(t.Context(), DriveConfig{
				URLs: urls(10), Interval: 10 * time.Millisecond, Warmup: 20 * time.Millisecond, Span: 300 * time.Millisecond,
				Timeout: 25 * time.Millisecond, MaxInFlight: tc.maxInFlight,
			}, ReaderFunc(func(ctx context.Context, _ string) error {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-ctx.Done() // a slow endpoint: every read times out
				return ctx.Err()
			}))
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.check(res); err != nil {
				t.Error(err)
			}
			if res.Failed != res.Reads || !strings.Contains(res.FirstError, "deadline exceeded") {
				t.Errorf("%d of %d reads failed, first %q: want all, of their deadline", res.Failed, res.Reads, res.FirstError)
			}
			if limit := int64(max(1, tc.maxInFlight)); tc.maxInFlight > 0 && most.Load() > limit {
				t.Errorf("%d reads at once, limit %d", most.Load(), limit)
			}
			if most.Load() > 10 {
				t.Errorf("%d reads at once of 10 nodes: reads queued", most.Load())
			}
		})
	}
}

func TestDriveErrors(t *testing.T) {
	nop := ReaderFunc(func(context.Context, string) error { return nil })
	for _, tc := range []struct {
		name string
		cfg  DriveConfig
		want string
	}{
		{"no urls", DriveConfig{}, "0 urls"},
		{"interval", DriveConfig{URLs: urls(1), Interval: time.Microsecond}, "interval 1µs"},
		{"jitter", DriveConfig{URLs: urls(1), Interval: time.Second, Jitter: time.Second}, "jitter 1s"},
		{"span", DriveConfig{URLs: urls(1), Span: -1}, "span -1ns"},
		{"in flight", DriveConfig{URLs: urls(1), MaxInFlight: MaxInFlight + 1}, "max in flight 4097"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Drive(t.Context(), tc.cfg, nop)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Drive: %v, want an error with %q", err, tc.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Drive(ctx, DriveConfig{URLs: urls(3)}, nop); !errors.Is(err, context.Canceled) {
		t.Errorf("Drive with its context cancelled: %v", err)
	}
}
