package testkit

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

func TestSyncBufferLines(t *testing.T) {
	var b SyncBuffer
	if got := b.Lines(); got != nil {
		t.Fatalf("Lines of nothing = %q", got)
	}
	fmt.Fprint(&b, "one\ntwo\n")
	if got := b.Lines(); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("Lines = %q, want one, two", got)
	}
	fmt.Fprint(&b, "three\n")
	if got := b.Lines(); len(got) != 1 || got[0] != "three" {
		t.Fatalf("Lines = %q, want only what came since", got)
	}
}

func TestWaitLogsWhatItLastSaw(t *testing.T) {
	var logged []string
	f := &logFailer{failer: failer{TB: t}, logs: &logged}
	Wait{For: 30 * time.Millisecond, Every: time.Millisecond, Last: func() string { return "answer 42" }}.Until(f, "never", func() bool { return false })
	if f.msg == "" || len(logged) != 1 || !strings.Contains(logged[0], "answer 42") {
		t.Fatalf("Fatalf %q, logs %q; want a failure and the last answer logged", f.msg, logged)
	}
}

type logFailer struct {
	failer
	logs *[]string
}

func (f *logFailer) Logf(format string, args ...any) {
	*f.logs = append(*f.logs, fmt.Sprintf(format, args...))
}

func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	f := &failer{TB: t}
	golden(f, path, []byte("v1\n"), true)
	golden(f, path, []byte("v1\n"), false)
	if f.msg != "" {
		t.Fatalf("same content failed: %s", f.msg)
	}
	errs := &errFailer{failer: failer{TB: t}}
	golden(errs, path, []byte("v2\n"), false)
	if !strings.Contains(errs.err, "differs") || !strings.Contains(errs.err, "v2") {
		t.Fatalf("changed content: Errorf %q, want one naming the difference", errs.err)
	}
}

type errFailer struct {
	failer
	err string
}

func (f *errFailer) Errorf(format string, args ...any) { f.err = fmt.Sprintf(format, args...) }

// TestClosedAddrIsRefusedAndKept: a connection to the address is refused,
// and no listener can take the port while the test runs.
func TestClosedAddrIsRefusedAndKept(t *testing.T) {
	addr := ClosedAddr(t)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s: connected, want refused", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		t.Fatalf("listen on %s: succeeded, want the port held", addr)
	}
}

// TestFreeAddrNeverTwice: FreeAddr never gives one address twice in a
// process.
func TestFreeAddrNeverTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 300 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("%s given twice", a)
		}
		seen[a] = true
		_, port, _ := net.SplitHostPort(a)
		if p, err := strconv.Atoi(port); err != nil || p < freePortFloor || p >= ephemeralLow() {
			t.Fatalf("%s: want a port in [%d, %d), below the ephemeral range", a, freePortFloor, ephemeralLow())
		}
	}
}
