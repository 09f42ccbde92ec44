package testkit

import (
	"slices"
	"sync"
	"testing"
	"time"
)

var epoch = time.Unix(1_800_000_000, 0)

// TestClockFiresTimersDueInOrder: moving the clock fires the timers due,
// earliest first, before Add returns; the others wait.
func TestClockFiresTimersDueInOrder(t *testing.T) {
	c := NewClock(epoch)
	var fired []string
	c.AfterFunc(3*time.Second, func() { fired = append(fired, "3s") })
	c.AfterFunc(time.Second, func() { fired = append(fired, "1s") })
	c.AfterFunc(time.Second, func() { fired = append(fired, "1s again") })
	late := c.AfterFunc(10*time.Second, func() { fired = append(fired, "10s") })
	if c.Armed() != 4 {
		t.Fatalf("Armed = %d, want 4", c.Armed())
	}
	c.Add(999 * time.Millisecond)
	if len(fired) != 0 {
		t.Fatalf("fired %v before any deadline", fired)
	}
	c.Add(5 * time.Second)
	if want := []string{"1s", "1s again", "3s"}; !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	if got, want := c.Now(), epoch.Add(5999*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Now = %v, want %v", got, want)
	}
	if !late.Stop() || late.Stop() {
		t.Fatal("Stop reports whether the timer was armed: true, then false")
	}
	c.Set(epoch.Add(time.Hour))
	if len(fired) != 3 || c.Armed() != 0 {
		t.Fatalf("a stopped timer fired (%v) or timers remain armed (%d)", fired, c.Armed())
	}
}

// TestClockTimerReset: Reset re-arms from the clock's time, fired or not,
// and a function may arm a timer that is already due.
func TestClockTimerReset(t *testing.T) {
	c := NewClock(epoch)
	n := 0
	tm := c.AfterFunc(time.Second, func() { n++ })
	if !tm.Reset(2 * time.Second) {
		t.Fatal("Reset of an armed timer reported it unarmed")
	}
	c.Add(time.Second)
	if n != 0 {
		t.Fatal("a reset timer fired at its old deadline")
	}
	c.Add(time.Second)
	if n != 1 || tm.Reset(time.Second) {
		t.Fatalf("fired %d times (want 1), or Reset of a fired timer reported it armed", n)
	}
	c.Add(time.Second)
	if n != 2 {
		t.Fatalf("fired %d times after Reset, want 2", n)
	}
	var chain []time.Duration
	c.AfterFunc(time.Second, func() {
		chain = append(chain, 1)
		c.AfterFunc(0, func() { chain = append(chain, 2) })
	})
	c.Add(time.Second)
	if len(chain) != 2 {
		t.Fatalf("a timer armed due by a timer's function did not fire in the same Add: %v", chain)
	}
}

func TestClockAfter(t *testing.T) {
	c := NewClock(epoch)
	ch := c.After(time.Minute)
	c.WaitArmed(t, 1)
	select {
	case <-ch:
		t.Fatal("After fired before the clock moved")
	default:
	}
	c.Add(2 * time.Minute)
	if got := <-ch; !got.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("After sent %v, want its deadline", got)
	}
}

// TestClockSkipWaits: on a clock that skips waits, every wait ends at
// once, the clock moves on by it, and the waits are listed.
func TestClockSkipWaits(t *testing.T) {
	c := NewClock(epoch).SkipWaits()
	if got := <-c.After(time.Second); !got.Equal(epoch.Add(time.Second)) {
		t.Fatalf("After sent %v", got)
	}
	done := make(chan struct{})
	c.AfterFunc(2*time.Second, func() { close(done) })
	<-done
	if got, want := c.Waits(), []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("Waits = %v, want %v", got, want)
	}
	if got := c.Now(); !got.Equal(epoch.Add(3 * time.Second)) {
		t.Fatalf("Now = %v, want 3s on", got)
	}
}

// TestClockConcurrent: the clock is moved, read and waited on from many
// goroutines at once (run with -race).
func TestClockConcurrent(t *testing.T) {
	c := NewClock(epoch)
	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := 0
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.AfterFunc(time.Millisecond, func() { mu.Lock(); fired++; mu.Unlock() })
				_, _ = c.Now(), c.Armed()
				c.Add(time.Millisecond)
			}
		})
	}
	wg.Wait()
	c.Add(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if fired != 800 || c.Armed() != 0 {
		t.Fatalf("fired %d of 800 timers, %d still armed", fired, c.Armed())
	}
}
