package testkit

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Poll is how often Eventually checks its condition.
const Poll = 20 * time.Millisecond

// Eventually waits until cond holds, checking every Poll, and fails the test
// with what (and how long it waited) when it does not hold within d. It
// returns how long it waited.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return Wait{For: d}.Until(t, what, cond)
}

// Wait is Eventually with its knobs.
type Wait struct {
	// For bounds the wait: generous, it only bounds how long a broken test
	// hangs.
	For time.Duration
	// Every is how often the condition is checked (default Poll): shorter
	// when the wait's length is measured, longer when checking is costly
	// (it runs a command).
	Every time.Duration
	// Last, when set, is logged when the wait times out: what the
	// condition saw last, to tell why.
	Last func() string
}

// Until waits until cond holds and returns how long it waited, or fails
// the test naming what it waited for.
func (w Wait) Until(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	every := w.Every
	if every <= 0 {
		every = Poll
	}
	start := time.Now()
	deadline := start.Add(w.For)
	for !cond() {
		if time.Now().After(deadline) {
			if w.Last != nil {
				t.Logf("last seen:\n%s", w.Last())
			}
			t.Fatalf("timed out after %s waiting for %s", w.For, what)
			return time.Since(start)
		}
		time.Sleep(every)
	}
	return time.Since(start)
}

// SyncBuffer is a bytes.Buffer safe for concurrent use: a process or logger
// writes to it while the test reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns the lines written since the last call of Lines, and
// forgets them: what one step of a test logged.
func (s *SyncBuffer) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := strings.TrimSpace(s.b.String())
	s.b.Reset()
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// Len returns how many bytes were written so far.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// update is go test's -update flag, for every package that compares with
// golden files.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/ instead of comparing with them")

// Golden compares got with the golden file at path; run with -update it
// rewrites the file instead.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	golden(t, path, got, *update)
}

func golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (check the change, then run go test -update):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// FreeAddr is a loopback host:port free a moment ago (a listener opened and
// closed), for a server the test starts to listen on, and never given
// before in this process. The port is drawn at random below the kernel's
// ephemeral range (ip_local_port_range), which the kernel takes ports
// from for every outgoing connection and every listener on port 0: on a
// busy machine a port from that range, free a moment ago, is soon the
// local end of some test's connection, and the server's listen then
// fails with "address already in use". Another process drawing the same
// port meanwhile is still possible, and its listen then reports it; an
// address that must refuse connections is ClosedAddr's.
func FreeAddr(t testing.TB) string {
	t.Helper()
	lo := ephemeralLow()
	for range 100 {
		addr := "127.0.0.1:" + strconv.Itoa(freePortFloor+rand.IntN(lo-freePortFloor))
		given.Lock()
		seen := given.addrs[addr]
		given.addrs[addr] = true
		given.Unlock()
		if seen {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken
		}
		ln.Close()
		return addr
	}
	t.Fatalf("FreeAddr: 100 ports drawn in [%d, %d) in a row were taken or given before", freePortFloor, lo)
	return ""
}

// freePortFloor is the lowest port FreeAddr draws: above the ports
// services listen on by default (Redis 6379, Prometheus 9090, …).
const freePortFloor = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read, Linux's default).
func ephemeralLow() int {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				lo = n
			}
		}
	}
	if lo < freePortFloor+1000 { // a range that leaves too little below it
		lo = freePortFloor + 1000
	}
	return lo
}

// given is every address FreeAddr has returned in this process (ports are
// the process's to share, not one test's).
var given = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// ClosedAddr is a loopback host:port nothing listens on until the test
// ends: connecting to it is refused. The port is held by a socket bound to
// it that never listens, so that no other test (nor process) can be given
// it meanwhile: a port merely opened and closed can be handed to the next
// listener that asks for any, and a test that wants a refusal would then
// read whatever that listener serves.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("ClosedAddr: socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("ClosedAddr: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("ClosedAddr: getsockname: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// Fails runs f with a testing.TB whose Fatal and Fatalf end f and return
// their message instead of failing t: for a test of what a helper fails
// with. It returns "" when f returned without calling them.
func Fails(t testing.TB, f func(tb testing.TB)) string {
	t.Helper()
	tb := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(fatalStop); !ok {
					panic(r)
				}
			}
		}()
		f(tb)
	}()
	return tb.msg
}

// fatalTB ends the function Fails runs at its first Fatal or Fatalf.
type fatalTB struct {
	testing.TB
	msg string
}

type fatalStop struct{}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(fatalStop{})
}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	panic(fatalStop{})
}
