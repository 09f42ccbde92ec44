package refusal

import (
	"bytes"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Reason is why something was refused: the value of the counter's reason
// label.
type Reason string

// The reasons the service refuses for.
const (
	// Auth is a request with no or an unknown credential (Unauthenticated).
	Auth Reason = "auth"
	// Permission is a request whose role does not grant its path
	// (PermissionDenied).
	Permission Reason = "permission"
	// Rate is a call beyond its principal's rate limit.
	Rate Reason = "rate"
	// Size is a request body, frame or inflated message larger than the
	// server reads.
	Size Reason = "size"
	// Connections is a connection closed at accept by a connection cap.
	Connections Reason = "connections"
	// Handshake is a TLS handshake that failed or timed out, or a
	// connection closed for sending no request in time.
	Handshake Reason = "handshake"
	// Streams is a stream beyond a stream cap.
	Streams Reason = "streams"
)

// Reasons are all reasons, each counted (at 0) from the start.
var Reasons = []Reason{Auth, Permission, Rate, Size, Connections, Handshake, Streams}

// Defaults of Options.
const (
	DefaultPerSecond = 2
	DefaultBurst     = 5
)

// MetricName is the counter of refusals.
const MetricName = "llmdiag_refused_total"

// Options configure a Log. Zero values take the defaults.
type Options struct {
	// Log receives the lines (default: discarded).
	Log *slog.Logger
	// Registerer gets the counter (nil: refusals are not counted).
	Registerer prometheus.Registerer
	// PerSecond is the lines a second logged for one reason, sustained;
	// Burst how many at once.
	PerSecond float64
	Burst     int
	// Now is the clock of the bound (default time.Now).
	Now func() time.Time
}

// Log counts refusals and logs them, boundedly, per reason.
type Log struct {
	log       *slog.Logger
	counter   *prometheus.CounterVec
	perSecond rate.Limit
	burst     int
	now       func() time.Time

	mu    sync.Mutex
	byKey map[string]*bound
}

// bound is one reason's (or the error log's) pace and what it held back.
type bound struct {
	lim        *rate.Limiter
	suppressed int64
}

// New returns a Log, its counter registered on o.Registerer.
func New(o Options) (*Log, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.PerSecond <= 0 {
		o.PerSecond = DefaultPerSecond
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Log{log: o.Log, perSecond: rate.Limit(o.PerSecond), burst: o.Burst, now: o.Now, byKey: map[string]*bound{}}
	if o.Registerer != nil {
		l.counter = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricName,
			Help: "Requests, calls and connections refused, by reason: auth, permission, rate, size, connections, handshake, streams.",
		}, []string{"reason"})
		if err := o.Registerer.Register(l.counter); err != nil {
			return nil, fmt.Errorf("register %s: %w", MetricName, err)
		}
		for _, r := range Reasons {
			l.counter.WithLabelValues(string(r))
		}
	}
	return l, nil
}

// Refuse counts one refusal of reason and logs msg with attrs at warn
// level, unless reason's bound holds it back; a line after held-back lines
// carries "suppressed", how many since the last line of reason.
func (l *Log) Refuse(reason Reason, msg string, attrs ...any) {
	if l == nil {
		return
	}
	if l.counter != nil {
		l.counter.WithLabelValues(string(reason)).Inc()
	}
	l.emit(string(reason), msg, append(attrs, "refused", string(reason)))
}

// emit logs msg under key's bound.
func (l *Log) emit(key, msg string, attrs []any) {
	l.mu.Lock()
	b := l.byKey[key]
	if b == nil {
		b = &bound{lim: rate.NewLimiter(l.perSecond, l.burst)}
		l.byKey[key] = b
	}
	if !b.lim.AllowN(l.now(), 1) {
		b.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := b.suppressed
	b.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.log.Warn(msg, attrs...)
}

// handshakePrefix starts net/http's line for a failed TLS handshake.
var handshakePrefix = []byte("http: TLS handshake error")

// closedByServer ends net/http's line for a TLS handshake the server
// itself broke off by closing the connection (net.ErrClosed's text): a
// connection cap or deadline that counted it already, or a shutdown.
var closedByServer = []byte("use of closed network connection")

// errorLogKey is the bound of net/http's other error lines.
const errorLogKey = "http"

// handshakeFrom precedes the remote address in net/http's line for a
// failed TLS handshake ("http: TLS handshake error from ADDR: ERR").
const handshakeFrom = "http: TLS handshake error from "

// ErrorLog returns a logger for http.Server.ErrorLog: a TLS handshake
// error is a refusal of reason Handshake (unless the server closed the
// connection itself, or counted reports, given the remote address, that
// what closed it counted it already), any other line is logged at warn
// level under a bound of its own. A nil Log returns nil (net/http's
// default).
func (l *Log) ErrorLog(counted ...func(remote string) bool) *log.Logger {
	if l == nil {
		return nil
	}
	w := errorWriter{l: l}
	if len(counted) > 0 {
		w.counted = counted[0]
	}
	return log.New(w, "", 0)
}

type errorWriter struct {
	l       *Log
	counted func(remote string) bool
}

func (w errorWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	if bytes.HasPrefix(p, handshakePrefix) {
		if bytes.Contains(p, closedByServer) {
			return len(p), nil
		}
		if w.counted != nil {
			if rest, ok := strings.CutPrefix(line, handshakeFrom); ok {
				if remote, _, ok := strings.Cut(rest, ": "); ok && w.counted(remote) {
					return len(p), nil
				}
			}
		}
		w.l.Refuse(Handshake, "TLS handshake failed", "err", line)
		return len(p), nil
	}
	w.l.emit(errorLogKey, line, nil)
	return len(p), nil
}
