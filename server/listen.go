package server

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmdiag/llmdiag/internal/refusal"
)

// Defaults of ServeOptions.
const (
	DefaultMaxConnections = 1000
	// DefaultMaxConcurrentStreams is the HTTP/2 streams one connection may
	// have open: DefaultMaxStreamsPerPrincipal, so one connection can hold
	// a principal's streams and their unary calls still wait their turn.
	DefaultMaxConcurrentStreams = 100
	// DefaultHTTP2PingAfter is the silence on an HTTP/2 connection after
	// which the server pings it, and DefaultHTTP2PingTimeout how long the
	// answer may take before the connection is closed.
	DefaultHTTP2PingAfter   = 30 * time.Second
	DefaultHTTP2PingTimeout = 15 * time.Second
	// DefaultWriteByteTimeout closes a connection that accepts no byte of
	// what the server has to write for this long.
	DefaultWriteByteTimeout = 30 * time.Second
)

// MaxHeaderBytes bounds a request's headers (HTTP/1 header block, HTTP/2
// header list): a bearer token and gRPC metadata fit many times over.
const MaxHeaderBytes = 64 << 10

// ServeOptions bound what one connection may ask of Serve. Zero values take
// the defaults.
type ServeOptions struct {
	// MaxConcurrentStreams is the HTTP/2 streams one connection may have
	// open at once.
	MaxConcurrentStreams int
	// Refusals, when set, is the server's error log: TLS handshake errors
	// counted as refusals (reason handshake) and every line bounded (see
	// refusal.Log.ErrorLog). Nil: the log Serve is given, unbounded.
	Refusals *refusal.Log
}

// http2Config is Serve's HTTP/2 configuration.
func (o ServeOptions) http2Config() *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams: o.MaxConcurrentStreams,
		SendPingTimeout:      DefaultHTTP2PingAfter,
		PingTimeout:          DefaultHTTP2PingTimeout,
		WriteByteTimeout:     DefaultWriteByteTimeout,
		// A request is at most MaxRequestBytes: what a client may send
		// ahead of the handlers' reads is one request per stream and per
		// connection (net/http's defaults today, made explicit).
		MaxReceiveBufferPerStream:     MaxRequestBytes,
		MaxReceiveBufferPerConnection: MaxRequestBytes,
	}
}

func (o ServeOptions) withDefaults() ServeOptions {
	if o.MaxConcurrentStreams <= 0 {
		o.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	return o
}

// CapConnections returns ln accepting at most max connections open at once
// (max <= 0: ln itself). Wrap the TCP listener, below any TLS: net/http
// sees TLS only on the *tls.Conn a TLS listener accepts.
func CapConnections(ln net.Listener, max int) net.Listener {
	return LimitConnections(ln, ConnLimits{Max: max})
}

// ConnLimits bound the connections a listener keeps open.
type ConnLimits struct {
	// Max is the connections open at once (<= 0: no cap).
	Max int
	// Flag names the setting of Max in the refusal's log line (default
	// --max-connections).
	Flag string
	// Refusals counts and logs each connection refused (reason
	// connections); nil: neither.
	Refusals *refusal.Log
}

// LimitConnections is CapConnections with the refusals counted.
func LimitConnections(ln net.Listener, o ConnLimits) net.Listener {
	if o.Max <= 0 {
		return ln
	}
	if o.Flag == "" {
		o.Flag = "--max-connections"
	}
	return &capListener{Listener: ln, max: int64(o.Max), flag: o.Flag, refusals: o.Refusals}
}

// capListener closes the connections it accepts beyond max open at once:
// the caller sees its connection closed at once, and the server's accept
// loop is never blocked, so connections that end free room at once.
type capListener struct {
	net.Listener
	max      int64
	flag     string
	refusals *refusal.Log
	open     atomic.Int64
	refused  atomic.Int64
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refused.Add(1)
			l.refusals.Refuse(refusal.Connections, "connection refused", "remote", c.RemoteAddr().String(), "limit", l.flag, "max", l.max)
			_ = c.Close()
			continue
		}
		return &cappedConn{Conn: c, l: l}, nil
	}
}

// cappedConn gives its slot back once closed.
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
