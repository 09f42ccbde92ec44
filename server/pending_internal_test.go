package server

import (
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// fakeConn is a connection from addr that records its closing.
type fakeConn struct {
	net.Conn // nil: only what the tracker calls is implemented
	addr     string
	closed   atomic.Bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return fakeAddr(c.addr) }
func (c *fakeConn) Close() error         { c.closed.Store(true); return nil }

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// trackerFixture is a tracker on a fake clock, its refusals counted in reg
// and logged in logs.
type trackerFixture struct {
	t    *pendingTracker
	clk  *testkit.Clock
	reg  *prometheus.Registry
	logs *testkit.SyncBuffer
}

func newTrackerFixture(t *testing.T, maxPerHost int, timeout time.Duration) trackerFixture {
	t.Helper()
	return newTrackerFixtureAbove(t, maxPerHost, timeout, 0)
}

// newTrackerFixtureAbove is newTrackerFixture with PendingLimits.TimeoutAbove.
func newTrackerFixtureAbove(t *testing.T, maxPerHost int, timeout time.Duration, above int) trackerFixture {
	t.Helper()
	f := trackerFixture{clk: testkit.NewClock(time.Unix(0, 0)), reg: prometheus.NewRegistry(), logs: &testkit.SyncBuffer{}}
	rl, err := refusal.New(refusal.Options{Log: slog.New(slog.NewTextHandler(f.logs, nil)), Registerer: f.reg, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	f.t = newPendingTracker(PendingLimits{MaxPerHost: maxPerHost, Timeout: timeout, TimeoutAbove: above, Refusals: rl,
		AfterFunc: func(d time.Duration, fn func()) Stopper { return f.clk.AfterFunc(d, fn) }})
	return f
}

// conn is a new connection from host, its state New reported.
func (f trackerFixture) conn(host string, port int, h2 bool) *fakeConn {
	c := &fakeConn{addr: net.JoinHostPort(host, strconv.Itoa(port))}
	f.t.connState(f.wrap(c, h2), http.StateNew)
	return c
}

// wrap is the net.Conn the hooks see for c: a cleartext connection behind
// sniffConn, which says HTTP/2 when h2.
func (f trackerFixture) wrap(c *fakeConn, h2 bool) net.Conn {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	for k := range f.t.conns {
		if s, ok := k.(*sniffConn); ok && s.Conn == c {
			return k
		}
	}
	s := &sniffConn{Conn: c}
	s.h2.Store(h2)
	return s
}

// TestPendingTracker: pending connections are counted per remote address
// and end at the first request (HTTP/1's first StateActive, HTTP/2's
// second: its first is the preface), at close or hijack, or at the
// deadline, which closes the connection and counts it; beyond the cap a
// new connection from the address is closed and counted, and other
// addresses still get in.
func TestPendingTracker(t *testing.T) {
	const a, b = "127.0.0.1", "127.0.0.2"
	type step struct {
		states []http.ConnState // reported for the first connection from a
		h2     bool
	}
	tests := []struct {
		name string
		step
		wantPending int // a's pending connections after the states
	}{
		{"http1 request", step{[]http.ConnState{http.StateActive}, false}, 1},
		{"http1 request then idle", step{[]http.ConnState{http.StateActive, http.StateIdle}, false}, 1},
		{"closed", step{[]http.ConnState{http.StateClosed}, false}, 1},
		{"hijacked", step{[]http.ConnState{http.StateHijacked}, false}, 1},
		{"h2 preface only", step{[]http.ConnState{http.StateActive, http.StateIdle}, true}, 2},
		{"h2 first stream", step{[]http.ConnState{http.StateActive, http.StateIdle, http.StateActive}, true}, 1},
		{"h2 stream then idle", step{[]http.ConnState{http.StateActive, http.StateIdle, http.StateActive, http.StateIdle}, true}, 1},
		{"nothing", step{nil, false}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTrackerFixture(t, 2, 5*time.Second)
			first := f.conn(a, 1001, tt.h2)
			fc := f.wrap(first, tt.h2)
			second := f.conn(a, 1002, false)
			// a holds its 2: a third is closed at once and counted.
			third := f.conn(a, 1003, false)
			if !third.closed.Load() {
				t.Fatal("a's third pending connection not closed")
			}
			if n := refusedCount(t, f.reg, refusal.Connections); n != 1 {
				t.Errorf("connections refused %g, want 1", n)
			}
			if s := f.logs.String(); !strings.Contains(s, "--max-pending-conns-per-ip") || !strings.Contains(s, "refused=connections") || !strings.Contains(s, "127.0.0.1:1003") {
				t.Errorf("log %q: want the refusal naming --max-pending-conns-per-ip and the remote", s)
			}
			// Another address is not held to a's.
			if other := f.conn(b, 2001, false); other.closed.Load() {
				t.Error("b's connection closed")
			}
			for _, st := range tt.states {
				f.t.connState(fc, st)
			}
			if n, _ := f.t.pending(a); n != tt.wantPending {
				t.Errorf("a pending %d, want %d", n, tt.wantPending)
			}
			// Room again: the next connection from a is accepted.
			if tt.wantPending < 2 {
				if c := f.conn(a, 1004, false); c.closed.Load() {
					t.Error("a's connection closed though it had room")
				}
			}
			// The deadline closes what is still pending, once each, and
			// counts it; the one that sent a request stays open.
			f.clk.Add(5 * time.Second)
			if got := first.closed.Load(); got != (tt.wantPending == 2) {
				t.Errorf("first closed at the deadline %v, want %v", got, tt.wantPending == 2)
			}
			if !second.closed.Load() {
				t.Error("second (pending) not closed at the deadline")
			}
			if n, hosts := f.t.pending(a); n != 0 || hosts != 0 {
				t.Errorf("after the deadline a pending %d, %d hosts tracked; want none", n, hosts)
			}
			if len(f.t.conns) != 0 {
				t.Errorf("%d connections still tracked", len(f.t.conns))
			}
			// Pending at the deadline: second, b's, and either first or
			// the fourth.
			if n := refusedCount(t, f.reg, refusal.Handshake); n != 3 {
				t.Errorf("handshake refusals %g, want 3", n)
			}
			if s := f.logs.String(); !strings.Contains(s, "--handshake-timeout") || !strings.Contains(s, "refused=handshake") {
				t.Errorf("log %q: want the deadline's refusal naming --handshake-timeout", s)
			}
			// Their close (and a late report for any) changes nothing.
			f.t.connState(fc, http.StateClosed)
			f.clk.Add(time.Minute)
			if n := refusedCount(t, f.reg, refusal.Handshake); n != 3 {
				t.Errorf("handshake refusals %g after the close, want 3", n)
			}
		})
	}
}

// TestPendingDeadlineUnderPressure: the deadline closes an address's
// pending connections only while it holds more than TimeoutAbove; what it
// leaves stays pending (counted against the cap) for net/http's deadlines.
func TestPendingDeadlineUnderPressure(t *testing.T) {
	const a, b = "127.0.0.1", "127.0.0.2"
	tests := []struct {
		name        string
		fromA       int
		wantClosedA int // at the deadline, the oldest first
	}{
		{"one", 1, 0},
		{"at the threshold", 3, 0},
		{"one above", 4, 1},
		{"a flood", 10, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTrackerFixtureAbove(t, 10, 5*time.Second, 3)
			var conns []*fakeConn
			for i := range tt.fromA {
				conns = append(conns, f.conn(a, 1000+i, false))
			}
			other := f.conn(b, 2000, false)
			f.clk.Add(5 * time.Second)
			closed := 0
			for i, c := range conns {
				if c.closed.Load() {
					closed++
					if i >= tt.wantClosedA {
						t.Errorf("connection %d closed, want the %d oldest", i, tt.wantClosedA)
					}
				}
			}
			if closed != tt.wantClosedA {
				t.Errorf("%d of a's %d closed at the deadline, want %d", closed, tt.fromA, tt.wantClosedA)
			}
			if other.closed.Load() {
				t.Error("b's only connection closed at the deadline")
			}
			if n, _ := f.t.pending(a); n != tt.fromA-tt.wantClosedA {
				t.Errorf("a pending %d, want %d", n, tt.fromA-tt.wantClosedA)
			}
			if n := refusedCount(t, f.reg, refusal.Handshake); n != float64(tt.wantClosedA) {
				t.Errorf("handshake refusals %g, want %d", n, tt.wantClosedA)
			}
			// What the deadline left is still pending: a's first request
			// ends it as ever.
			if tt.fromA > 0 && !conns[tt.fromA-1].closed.Load() {
				f.t.connState(f.wrap(conns[tt.fromA-1], false), http.StateActive)
				if n, _ := f.t.pending(a); n != tt.fromA-tt.wantClosedA-1 {
					t.Errorf("after a request a pending %d, want %d", n, tt.fromA-tt.wantClosedA-1)
				}
			}
		})
	}
}

// TestPendingCountedOnce: a connection the deadline closes is counted
// once, whether net/http's handshake error for it (the client gave up at
// the same moment) comes after the deadline or before it.
func TestPendingCountedOnce(t *testing.T) {
	const a = "127.0.0.1"
	for _, errorFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "deadline first", true: "handshake error first"}[errorFirst], func(t *testing.T) {
			f := newTrackerFixture(t, 10, 5*time.Second)
			c := f.conn(a, 1001, false)
			remote := c.RemoteAddr().String()
			counts := 0.0 // what net/http's error log counts
			if errorFirst && !f.t.handshakeFailed(remote) {
				counts++
			}
			f.clk.Add(5 * time.Second)
			if !c.closed.Load() {
				t.Fatal("not closed at the deadline")
			}
			if !errorFirst && !f.t.handshakeFailed(remote) {
				counts++
			}
			counts += refusedCount(t, f.reg, refusal.Handshake)
			if counts != 1 {
				t.Errorf("counted %g times, want once", counts)
			}
			// Reported closed: the address may come again, and a new
			// connection's failure is its own.
			f.t.connState(f.wrap(c, false), http.StateClosed)
			if f.t.handshakeFailed(remote) || len(f.t.closed) != 0 || len(f.t.remote) != 0 {
				t.Errorf("after the close: closed %v, remote %v; want both empty", f.t.closed, f.t.remote)
			}
		})
	}
}

// TestPendingTrackerOff: a zero cap or timeout is off.
func TestPendingTrackerOff(t *testing.T) {
	tests := []struct {
		name       string
		maxPerHost int
		timeout    time.Duration
		wantClosed int // of 100 connections from one address, after an hour
	}{
		{"no cap", 0, 5 * time.Second, 100},
		{"no deadline", 10, 0, 90},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTrackerFixture(t, tt.maxPerHost, tt.timeout)
			var cs []*fakeConn
			for i := range 100 {
				cs = append(cs, f.conn("10.0.0.1", 1000+i, false))
			}
			f.clk.Add(time.Hour)
			closed := 0
			for _, c := range cs {
				if c.closed.Load() {
					closed++
				}
			}
			if closed != tt.wantClosed {
				t.Errorf("closed %d, want %d", closed, tt.wantClosed)
			}
		})
	}
}

// TestSniffConn: the HTTP/2 preface is recognised however the reads split
// it, and nothing else is taken for it.
func TestSniffConn(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   bool
	}{
		{"preface at once", []string{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, true},
		{"preface byte by byte", strings.Split("PRI * HTTP/2.0\r\n", ""), true},
		{"preface in two", []string{"PRI * HT", "TP/2.0\r\n\r\nSM"}, true},
		{"http1", []string{"GET / HTTP/1.1\r\n"}, false},
		{"almost", []string{"PRI * HTTP/1.1\r\n"}, false},
		{"short", []string{"PRI"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cli := net.Pipe()
			defer srv.Close()
			go func() {
				defer cli.Close()
				for _, c := range tt.chunks {
					if _, err := cli.Write([]byte(c)); err != nil {
						return
					}
				}
			}()
			s := &sniffConn{Conn: srv}
			buf := make([]byte, 64)
			for {
				if _, err := s.Read(buf); err != nil {
					break
				}
			}
			if got := s.h2.Load(); got != tt.want {
				t.Errorf("h2 %v, want %v", got, tt.want)
			}
		})
	}
}
