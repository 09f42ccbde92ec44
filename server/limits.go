package server

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"golang.org/x/time/rate"

	"github.com/llmdiag/llmdiag/internal/refusal"
)

// Defaults of Limits (and of serve's flags).
const (
	DefaultMaxStreams             = 10_000
	DefaultMaxStreamsPerPrincipal = 100
	DefaultRequestReadTimeout     = 10 * time.Second
	DefaultRateLimit              = 100
	DefaultRateBurst              = 200
	// DefaultMaxRateLimiters bounds the principals whose rate limiter is
	// remembered; the least recently seen is forgotten beyond it.
	DefaultMaxRateLimiters = 10_000
)

// Limits bound what callers can hold and how fast they can ask: streams
// (global and per principal), unary calls per principal, and the time a
// request has to arrive in full. Zero values take the defaults; a negative
// MaxStreams, MaxStreamsPerPrincipal or RateLimit disables that limit.
type Limits struct {
	// MaxStreams bounds the server-streaming calls (StreamHealth, health
	// Watch) open at once.
	MaxStreams int
	// MaxStreamsPerPrincipal bounds them per principal.
	MaxStreamsPerPrincipal int
	// RateLimit is the unary calls a second one principal may make,
	// sustained; RateBurst how many at once.
	RateLimit float64
	RateBurst int
	// MaxRateLimiters bounds the principals remembered by the rate limit.
	MaxRateLimiters int
	// RequestReadTimeout is the time a request has to arrive in full, from
	// its headers to the end of its body; a stream's deadline is lifted once
	// its request has arrived. Negative disables it.
	RequestReadTimeout time.Duration
	// Principal names the caller a request comes from (default: the remote
	// host). Per-principal limits are keyed by it.
	Principal func(*http.Request) string
	// Now is the rate limit's clock (default time.Now).
	Now func() time.Time
	// Refusals counts and logs what the limits refuse (reasons rate,
	// streams, size); nil: neither.
	Refusals *refusal.Log
}

// Limiter enforces Limits: Wrap puts it in front of a handler (read
// deadline, request body bounds, the caller's principal) and Interceptor
// in each procedure (stream caps, rate limit). Both are needed.
type Limiter struct {
	cfg Limits

	mu          sync.Mutex
	streams     int
	byPrincipal map[string]int

	rates *rateLimiters
}

// NewLimiter returns a limiter enforcing l.
func NewLimiter(l Limits) *Limiter {
	if l.MaxStreams == 0 {
		l.MaxStreams = DefaultMaxStreams
	}
	if l.MaxStreamsPerPrincipal == 0 {
		l.MaxStreamsPerPrincipal = DefaultMaxStreamsPerPrincipal
	}
	if l.RateLimit == 0 {
		l.RateLimit = DefaultRateLimit
	}
	if l.RateBurst <= 0 {
		l.RateBurst = max(DefaultRateBurst, int(l.RateLimit))
	}
	if l.MaxRateLimiters <= 0 {
		l.MaxRateLimiters = DefaultMaxRateLimiters
	}
	if l.RequestReadTimeout == 0 {
		l.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if l.Principal == nil {
		l.Principal = RemoteHost
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	return &Limiter{
		cfg:         l,
		byPrincipal: map[string]int{},
		rates:       &rateLimiters{limit: rate.Limit(l.RateLimit), burst: l.RateBurst, max: l.MaxRateLimiters, byKey: map[string]*list.Element{}, lru: list.New()},
	}
}

// RemoteHost is the default principal: the host of the request's remote
// address.
func RemoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type principalKey struct{}

// principalOf is the principal Wrap put in ctx ("" when none).
func principalOf(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// Wrap returns h behind the limiter's HTTP part: it names the request's
// principal for Interceptor, bounds the request body (MaxRequestBytes, and a
// gRPC or gRPC-Web frame promising more is refused at its header), and
// gives the request RequestReadTimeout to arrive in full. Reflection's
// bidirectional streams are not given the deadline: their requests follow
// the answers.
func (l *Limiter) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, l.cfg.Principal(r)))
		if r.Body != nil && r.Body != http.NoBody {
			body := &boundedBody{rc: r.Body, framed: framed(r.Header.Get("Content-Type")), limit: MaxRequestBytes, timeout: l.cfg.RequestReadTimeout, refusals: l.cfg.Refusals, r: r}
			if l.cfg.RequestReadTimeout > 0 && !strings.HasPrefix(r.URL.Path, "/grpc.reflection.") {
				ctl := http.NewResponseController(w)
				if ctl.SetReadDeadline(time.Now().Add(l.cfg.RequestReadTimeout)) == nil {
					body.lift = func() { _ = ctl.SetReadDeadline(time.Time{}) }
				}
			}
			r.Body = body
		}
		h.ServeHTTP(w, r)
	})
}

// framed reports whether a request of this content type carries
// length-prefixed frames (gRPC, gRPC-Web, Connect streaming).
func framed(contentType string) bool {
	return strings.HasPrefix(contentType, "application/grpc") || strings.HasPrefix(contentType, "application/connect+")
}

// frameOverhead is what a request body may hold beyond its one message: the
// frame header, and the end-of-stream frame a client may send.
const frameOverhead = 1 << 10

// boundedBody is a request body that refuses more than limit bytes (and
// frame overhead), a frame whose header promises more than limit, and, once
// the read deadline has passed, says which flag set it; at its end it lifts
// the deadline.
type boundedBody struct {
	rc      readCloser
	limit   int64
	timeout time.Duration
	lift    func()
	// refusals counts a body refused for its size, r is its request (what
	// the log line names).
	refusals *refusal.Log
	r        *http.Request

	read int64
	// header collects a frame's 5-byte header (hlen bytes of it so far);
	// left is what remains of the frame's payload.
	header [5]byte
	hlen   uint8
	framed bool // beside header: the body is held as long as its stream
	left   int64
	err    error
}

type readCloser interface {
	Read([]byte) (int, error)
	Close() error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if b.read > b.limit+frameOverhead {
		b.fail(connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("request body larger than %d bytes", b.limit)))
		return n, b.err
	}
	if b.framed {
		if ferr := b.frames(p[:n]); ferr != nil {
			// Hand out what was read (the frame header): the caller then
			// reads on and gets the error before the payload.
			b.fail(ferr)
			return n, nil
		}
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.fail(connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("request not received in full within %v (--request-read-timeout)", b.timeout)))
		return n, b.err
	case err == io.EOF:
		b.done()
	}
	return n, err
}

// frames follows the frame boundaries through p.
func (b *boundedBody) frames(p []byte) error {
	for len(p) > 0 {
		if b.left > 0 {
			k := min(b.left, int64(len(p)))
			b.left -= k
			p = p[k:]
			continue
		}
		k := copy(b.header[b.hlen:], p)
		b.hlen += uint8(k)
		p = p[k:]
		if b.hlen < 5 {
			return nil
		}
		size := int64(b.header[1])<<24 | int64(b.header[2])<<16 | int64(b.header[3])<<8 | int64(b.header[4])
		b.hlen = 0
		if size > b.limit {
			return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("frame of %d bytes; at most %d", size, b.limit))
		}
		b.left = size
	}
	return nil
}

// fail ends the body with err, a refusal of reason size when err is
// ResourceExhausted. The read deadline stays: net/http drains what is left
// of an HTTP/1 body after the handler, and no longer than it.
func (b *boundedBody) fail(err error) {
	b.err = err
	if connect.CodeOf(err) == connect.CodeResourceExhausted {
		b.refusals.Refuse(refusal.Size, "request refused", "procedure", loggedPath(b.r.URL.Path), "reason", err.Error(), "remote", b.r.RemoteAddr)
	}
}

// done lifts the read deadline: the request has arrived in full, and a
// deadline left on an HTTP/1 connection would end the call's context.
func (b *boundedBody) done() {
	if b.lift != nil {
		b.lift()
		b.lift = nil
	}
}

func (b *boundedBody) Close() error {
	return b.rc.Close()
}

// Interceptor returns the limiter's per-procedure part: server streams
// capped globally and per principal, and unary calls rate limited per
// principal (grpc.health.v1 stays open for probes). Refusals are
// ResourceExhausted naming the limit and its flag.
func (l *Limiter) Interceptor() connect.Interceptor { return limitInterceptor{l} }

type limitInterceptor struct{ l *Limiter }

func (i limitInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !strings.HasPrefix(req.Spec().Procedure, "/"+grpchealth.HealthV1ServiceName+"/") {
			if err := i.l.allow(principalOf(ctx)); err != nil {
				return nil, err
			}
		}
		return next(ctx, req)
	}
}

func (limitInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i limitInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if conn.Spec().StreamType != connect.StreamTypeServer {
			return next(ctx, conn)
		}
		principal := principalOf(ctx)
		if err := i.l.openStream(principal); err != nil {
			return err
		}
		defer i.l.closeStream(principal)
		return next(ctx, conn)
	}
}

// openStream counts a new stream of principal, or refuses it naming the
// cap it would pass. Each stream it counts is closed once, with closeStream
// (a release closure and its sync.Once cost every stream 90 bytes).
func (l *Limiter) openStream(principal string) error {
	err := l.countStream(principal)
	if err != nil {
		l.cfg.Refusals.Refuse(refusal.Streams, "stream refused", "principal", principal, "reason", err.Error())
	}
	return err
}

// countStream is openStream under the lock.
func (l *Limiter) countStream(principal string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if max := l.cfg.MaxStreams; max > 0 && l.streams >= max {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d streams open on this server, at most %d (--max-streams)", l.streams, max))
	}
	if max := l.cfg.MaxStreamsPerPrincipal; max > 0 && l.byPrincipal[principal] >= max {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d streams open for principal %q, at most %d (--max-streams-per-principal)", l.byPrincipal[principal], principal, max))
	}
	l.streams++
	l.byPrincipal[principal]++
	return nil
}

// closeStream uncounts a stream openStream counted.
func (l *Limiter) closeStream(principal string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.streams--
	if l.byPrincipal[principal]--; l.byPrincipal[principal] <= 0 {
		delete(l.byPrincipal, principal)
	}
}

// allow takes one unary call from principal's rate, or refuses it.
func (l *Limiter) allow(principal string) error {
	if l.cfg.RateLimit < 0 {
		return nil
	}
	if l.rates.get(principal).AllowN(l.cfg.Now(), 1) {
		return nil
	}
	err := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("rate limit of principal %q: %g calls a second, bursts of %d (--rate-limit, --rate-burst)", principal, l.cfg.RateLimit, l.cfg.RateBurst))
	l.cfg.Refusals.Refuse(refusal.Rate, "call refused", "principal", principal, "reason", err.Error())
	return err
}

// rateLimiters holds one rate.Limiter per principal, the max most recently
// seen: a forgotten principal starts again with a full burst, which costs
// the server one burst, not memory.
type rateLimiters struct {
	limit rate.Limit
	burst int
	max   int

	mu    sync.Mutex
	byKey map[string]*list.Element
	lru   *list.List // of *keyedLimiter, most recent first
}

type keyedLimiter struct {
	key string
	lim *rate.Limiter
}

func (r *rateLimiters) get(key string) *rate.Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byKey[key]; ok {
		r.lru.MoveToFront(e)
		return e.Value.(*keyedLimiter).lim
	}
	if r.lru.Len() >= r.max {
		oldest := r.lru.Back()
		r.lru.Remove(oldest)
		delete(r.byKey, oldest.Value.(*keyedLimiter).key)
	}
	k := &keyedLimiter{key: key, lim: rate.NewLimiter(r.limit, r.burst)}
	r.byKey[key] = r.lru.PushFront(k)
	return k.lim
}

// len is the number of principals remembered.
func (r *rateLimiters) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}
