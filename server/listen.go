package server

import (
	"math"
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
	// SuggestedMaxConnectionsPerHost is a cap on the connections one
	// remote address holds open (serve --max-conns-per-ip, off by
	// default) for clients that each keep a few: a tenth of
	// DefaultMaxConnections, so no one address can lock the others out.
	// Clients that open a connection per call and leave it idle (one
	// process of the CLI per call, replicas polling on one host) reach it.
	SuggestedMaxConnectionsPerHost = 100
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
	// Pending bounds the connections that have sent no request yet, per
	// remote address and in time (zero: off; serve's flags default to
	// DefaultMaxPendingPerHost and DefaultHandshakeTimeout). Its
	// Refusals default to the field above.
	Pending PendingLimits
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
	// MaxPerHost is the connections one remote address (its IP) may hold
	// open at once, TLS handshakes in progress included (<= 0: no cap).
	MaxPerHost int
	// FlagPerHost names the setting of MaxPerHost (default
	// --max-conns-per-ip).
	FlagPerHost string
	// Refusals counts and logs each connection refused (reason
	// connections); nil: neither.
	Refusals *refusal.Log
}

// LimitConnections is CapConnections with the refusals counted.
func LimitConnections(ln net.Listener, o ConnLimits) net.Listener {
	if o.Max <= 0 && o.MaxPerHost <= 0 {
		return ln
	}
	if o.Flag == "" {
		o.Flag = "--max-connections"
	}
	if o.FlagPerHost == "" {
		o.FlagPerHost = "--max-conns-per-ip"
	}
	l := &capListener{Listener: ln, max: int64(o.Max), flag: o.Flag, refusals: o.Refusals,
		maxPerHost: o.MaxPerHost, flagPerHost: o.FlagPerHost, byHost: map[string]int{}}
	if l.max <= 0 {
		l.max = math.MaxInt64
	}
	return l
}

// capListener closes the connections it accepts beyond max open at once,
// or beyond maxPerHost open from one remote IP: the caller sees its
// connection closed at once, and the server's accept loop is never
// blocked, so connections that end free room at once.
type capListener struct {
	net.Listener
	max      int64
	flag     string
	refusals *refusal.Log
	open     atomic.Int64
	refused  atomic.Int64

	maxPerHost  int
	flagPerHost string
	mu          sync.Mutex
	byHost      map[string]int // open connections by remote IP, with maxPerHost
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
		host := ""
		if l.maxPerHost > 0 {
			host = remoteIP(c)
			if !l.takeHost(host) {
				l.open.Add(-1)
				l.refused.Add(1)
				l.refusals.Refuse(refusal.Connections, "connection refused", "remote", c.RemoteAddr().String(), "limit", l.flagPerHost, "max", l.maxPerHost)
				_ = c.Close()
				continue
			}
		}
		return &cappedConn{Conn: c, l: l, host: host}, nil
	}
}

// takeHost counts a connection from host, or reports that host holds
// maxPerHost already.
func (l *capListener) takeHost(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byHost[host] >= l.maxPerHost {
		return false
	}
	l.byHost[host]++
	return true
}

// releaseHost uncounts a connection takeHost counted.
func (l *capListener) releaseHost(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byHost[host]--; l.byHost[host] <= 0 {
		delete(l.byHost, host)
	}
}

// remoteIP is the IP a connection comes from (its whole address when it
// has no port).
func remoteIP(c net.Conn) string {
	addr := c.RemoteAddr().String()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// cappedConn gives its slots back once closed.
type cappedConn struct {
	net.Conn
	l    *capListener
	host string // counted per host when the listener caps them
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.l.maxPerHost > 0 {
			c.l.releaseHost(c.host)
		}
	})
	return err
}
