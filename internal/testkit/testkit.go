package testkit

import (
	"bytes"
	"net"
	"sync"
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
	start := time.Now()
	deadline := start.Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
			return time.Since(start)
		}
		time.Sleep(Poll)
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

// Len returns how many bytes were written so far.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// ClosedAddr is a loopback host:port nothing listens on (a listener opened
// and closed): connecting to it is refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
