package testkit

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Eventually(t, time.Minute, "three increments", func() bool { return n.Load() == 3 })
}

// failer records a Fatalf instead of ending the test.
type failer struct {
	testing.TB
	msg string
}

func (f *failer) Helper() {}

func (f *failer) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestEventuallyFailsNamingWhatItWaitedFor(t *testing.T) {
	f := &failer{TB: t}
	calls := 0
	Eventually(f, 50*time.Millisecond, "the impossible", func() bool { calls++; return calls > 1_000_000 })
	if f.msg == "" || !strings.Contains(f.msg, "the impossible") {
		t.Fatalf("Fatalf message %q, want one naming what it waited for", f.msg)
	}
}

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprint(&b, "x")
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if b.Len() != 800 {
		t.Fatalf("Len = %d, want 800", b.Len())
	}
}
