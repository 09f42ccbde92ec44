package server

import (
	"bytes"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmdiag/llmdiag/internal/refusal"
)

// Defaults of serve's pending-connection limits (PendingLimits).
const (
	// DefaultMaxPendingPerHost is the connections one remote address may
	// hold that have sent no request yet: a client that connects and
	// calls needs one at a time, a browser six, so only a client holding
	// connections it does not use reaches it.
	DefaultMaxPendingPerHost = 32
	// DefaultHandshakeTimeout is how long a connection may take from
	// accept to its first request (TLS handshake and the request's
	// headers, or the first HTTP/2 stream) while its address holds more
	// than DefaultTimeoutAbove pending.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultTimeoutAbove is the pending connections an address may hold
	// before the deadline applies to them: a client that is not flooding
	// (one or a few connections opening at once, a browser's six) keeps
	// net/http's own deadlines, so a slow network or a loaded client host
	// does not cost it its call; an address holding more is served the
	// short one, as Envoy's overload manager shortens timeouts under
	// pressure.
	DefaultTimeoutAbove = 8
)

// PendingLimits bound the connections that have not yet sent a request: a
// TCP connection accepted, its TLS handshake in progress or done, but no
// request's headers read (HTTP/1) and no stream opened (HTTP/2). Once it
// has sent one it is no longer pending, whatever it does next (an idle
// keep-alive connection is not pending). Zero values are off.
type PendingLimits struct {
	// MaxPerHost is the pending connections one remote IP may hold; a new
	// connection beyond is closed as soon as it is accepted (refusal
	// reason connections). <= 0: no cap.
	MaxPerHost int
	// Timeout closes a connection still pending this long after it was
	// accepted, if its address then holds more than TimeoutAbove pending
	// (refusal reason handshake). <= 0: no deadline beyond net/http's
	// own.
	Timeout time.Duration
	// TimeoutAbove is the pending connections an address may hold that
	// Timeout leaves to net/http's deadlines (serve: DefaultTimeoutAbove;
	// 0: Timeout closes every connection pending that long).
	TimeoutAbove int
	// FlagPerHost and FlagTimeout name the settings in refusals' log
	// lines (default --max-pending-conns-per-ip, --handshake-timeout).
	FlagPerHost, FlagTimeout string
	// Refusals counts and logs each connection refused or closed; nil:
	// neither.
	Refusals *refusal.Log
	// AfterFunc starts Timeout's timer (default time.AfterFunc).
	AfterFunc func(d time.Duration, f func()) Stopper
}

// Stopper stops a timer (a *time.Timer).
type Stopper interface{ Stop() bool }

var _ Stopper = (*time.Timer)(nil)

func (p PendingLimits) on() bool { return p.MaxPerHost > 0 || p.Timeout > 0 }

// pendingTracker follows each connection through http.Server.ConnState
// until it has sent a request. net/http calls the hook with:
//
//   - StateNew synchronously in the accept loop, before the connection's
//     goroutine starts (so a connection refused here is closed before
//     anything is read from it);
//   - HTTP/1 (plaintext or TLS): StateActive once the first request's
//     headers are read (or bytes of a malformed one), not before;
//   - HTTP/2 (TLS by ALPN, or cleartext with prior knowledge): StateActive
//     then StateIdle once the client preface is read, and StateActive
//     again when the first stream opens: on HTTP/2 the second StateActive
//     is the first request;
//   - StateClosed or StateHijacked at the end.
//
// Every hook gets the same net.Conn (http.conn's rwc: the *tls.Conn with
// TLS; the accepted connection otherwise, which the HTTP/2 server unwraps
// again for cleartext HTTP/2). Whether a connection speaks HTTP/2 is its
// ALPN protocol with TLS; in cleartext, whether its first bytes were the
// HTTP/2 preface (sniffConn).
type pendingTracker struct {
	lim PendingLimits

	mu     sync.Mutex
	conns  map[net.Conn]*pendingConn
	byHost map[string]int          // pending connections by remote IP; no entry at 0
	remote map[string]*pendingConn // pending connections by remote address
	// closed is the connections the deadline closed, by remote address,
	// until net/http reports them closed: the handshake error it may log
	// for one meanwhile is counted already.
	closed map[string]bool
}

// pendingConn is one pending connection.
type pendingConn struct {
	host    string
	remote  string // the remote address
	preface bool   // an HTTP/2 connection's preface was read
	timer   Stopper
	// failed: net/http logged its handshake failing (and counted it), so
	// the deadline closes it without counting it again.
	failed bool
}

func newPendingTracker(lim PendingLimits) *pendingTracker {
	if lim.FlagPerHost == "" {
		lim.FlagPerHost = "--max-pending-conns-per-ip"
	}
	if lim.FlagTimeout == "" {
		lim.FlagTimeout = "--handshake-timeout"
	}
	if lim.AfterFunc == nil {
		lim.AfterFunc = func(d time.Duration, f func()) Stopper { return time.AfterFunc(d, f) }
	}
	return &pendingTracker{lim: lim, conns: map[net.Conn]*pendingConn{}, byHost: map[string]int{}, remote: map[string]*pendingConn{}, closed: map[string]bool{}}
}

// connState is the http.Server.ConnState hook.
func (t *pendingTracker) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		t.accept(c)
	case http.StateActive:
		t.active(c)
	case http.StateClosed, http.StateHijacked:
		t.release(c)
	}
}

// accept tracks c, or closes it when its host holds MaxPerHost pending.
func (t *pendingTracker) accept(c net.Conn) {
	host := remoteIP(c)
	t.mu.Lock()
	if t.lim.MaxPerHost > 0 && t.byHost[host] >= t.lim.MaxPerHost {
		t.mu.Unlock()
		closeRaw(c)
		t.lim.Refusals.Refuse(refusal.Connections, "connection refused", "remote", c.RemoteAddr().String(), "limit", t.lim.FlagPerHost, "max", t.lim.MaxPerHost)
		return
	}
	p := &pendingConn{host: host, remote: c.RemoteAddr().String()}
	t.conns[c] = p
	t.remote[p.remote] = p
	t.byHost[host]++
	if t.lim.Timeout > 0 {
		// Under the lock: the timer cannot find c before p.timer is set.
		p.timer = t.lim.AfterFunc(t.lim.Timeout, func() { t.expire(c, p) })
	}
	t.mu.Unlock()
}

// active ends c's pending state at its first request.
func (t *pendingTracker) active(c net.Conn) {
	t.mu.Lock()
	p := t.conns[c]
	if p == nil {
		t.mu.Unlock()
		return
	}
	if !p.preface && isHTTP2(c) {
		// The preface's StateActive (followed at once by StateIdle): no
		// request yet.
		p.preface = true
		t.mu.Unlock()
		return
	}
	t.untrackLocked(c, p)
	t.mu.Unlock()
}

// release stops tracking c, closed or hijacked.
func (t *pendingTracker) release(c net.Conn) {
	t.mu.Lock()
	if p := t.conns[c]; p != nil {
		t.untrackLocked(c, p)
	}
	delete(t.closed, c.RemoteAddr().String())
	t.mu.Unlock()
}

// handshakeFailed is told, by net/http's error log, of the TLS handshake
// of the connection from remote failing: it reports whether the deadline
// closed and counted that connection already, and otherwise keeps the
// deadline from counting it again (the error log counts it). Each refused
// connection counts once, whichever of the client's close and the
// deadline came first.
func (t *pendingTracker) handshakeFailed(remote string) (counted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed[remote] {
		return true
	}
	if p := t.remote[remote]; p != nil {
		p.failed = true
	}
	return false
}

// expire closes c if it is still pending (as p: the timer of a connection
// no longer tracked does nothing) and its address holds more than
// TimeoutAbove pending; otherwise c stays pending, under net/http's own
// deadlines.
func (t *pendingTracker) expire(c net.Conn, p *pendingConn) {
	t.mu.Lock()
	if t.conns[c] != p || t.byHost[p.host] <= t.lim.TimeoutAbove {
		t.mu.Unlock()
		return
	}
	t.untrackLocked(c, p)
	if p.failed {
		t.mu.Unlock()
		closeRaw(c)
		return
	}
	t.closed[p.remote] = true
	t.mu.Unlock()
	closeRaw(c)
	t.lim.Refusals.Refuse(refusal.Handshake, "connection closed before its first request", "remote", c.RemoteAddr().String(), "limit", t.lim.FlagTimeout, "timeout", t.lim.Timeout)
}

func (t *pendingTracker) untrackLocked(c net.Conn, p *pendingConn) {
	delete(t.conns, c)
	delete(t.remote, p.remote)
	if p.timer != nil {
		p.timer.Stop()
	}
	if t.byHost[p.host]--; t.byHost[p.host] <= 0 {
		delete(t.byHost, p.host)
	}
}

// pending is the pending connections of host, and how many hosts hold any.
func (t *pendingTracker) pending(host string) (n, hosts int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byHost[host], len(t.byHost)
}

// closeRaw closes c's transport: below TLS, so that closing never waits
// on a handshake in progress or sends an alert to a client that reads
// nothing. net/http's goroutine of c then fails its read and ends it; a
// TLS handshake it was in is not a refusal of its own (refusal.ErrorLog
// leaves handshakes ended by a close uncounted).
func closeRaw(c net.Conn) {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		_ = nc.NetConn().Close()
		return
	}
	_ = c.Close()
}

// isHTTP2 reports whether c speaks HTTP/2: negotiated by ALPN over TLS,
// or begun with the preface in cleartext.
func isHTTP2(c net.Conn) bool {
	switch c := c.(type) {
	case *tls.Conn:
		// Its handshake is done when the hook is called for StateActive.
		return c.ConnectionState().NegotiatedProtocol == "h2"
	case *sniffConn:
		return c.h2.Load()
	}
	return false
}

// h2Preface starts every cleartext HTTP/2 connection (RFC 9113, 3.4).
var h2Preface = []byte("PRI * HTTP/2.0\r\n")

// sniffListener accepts sniffConns.
type sniffListener struct{ net.Listener }

func (l sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c}, nil
}

// sniffConn notes whether the first bytes read from it are HTTP/2's
// preface. net/http reads a connection from one goroutine at a time.
type sniffConn struct {
	net.Conn
	head []byte // the first bytes read, until decided
	done bool
	h2   atomic.Bool
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.head = append(c.head, p[:min(n, len(h2Preface)-len(c.head))]...)
		if !bytes.HasPrefix(h2Preface, c.head) {
			c.done, c.head = true, nil
		} else if len(c.head) == len(h2Preface) {
			c.done, c.head = true, nil
			c.h2.Store(true)
		}
	}
	return n, err
}

// CloseWrite half-closes the connection when the accepted one can (net/http
// uses it to end an HTTP/1 connection cleanly after an error answer).
func (c *sniffConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
