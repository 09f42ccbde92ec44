package cli

import (
	"errors"
	"flag"
	"strconv"
	"time"

	"github.com/llmdiag/llmdiag/server"
)

// limitConfig is serve's configuration that bounds what callers can hold
// and ask (server.Limits, server.ServeOptions, server.CapConnections).
type limitConfig struct {
	maxStreams, maxStreamsPer, rateBurst, maxConns, maxConnsPerIP, h2Streams int
	maxPendingPerIP                                                          int
	rateLimit                                                                float64
	readTimeout, handshakeTimeout                                            time.Duration
}

// register defines the limit flags on fs, filling l.
func (l *limitConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&l.maxStreams, "max-streams", server.DefaultMaxStreams, "server streams (StreamHealth, health Watch) open at once on this process; beyond, resource exhausted naming this flag (0: no cap)")
	fs.IntVar(&l.maxStreamsPer, "max-streams-per-principal", server.DefaultMaxStreamsPerPrincipal, "server streams one principal (the authenticated caller, or without authentication its remote host) may have open at once (0: no cap)")
	fs.Float64Var(&l.rateLimit, "rate-limit", server.DefaultRateLimit, "unary calls a second one principal may make, sustained; beyond, resource exhausted (0: no limit; health checks are not limited)")
	fs.IntVar(&l.rateBurst, "rate-burst", server.DefaultRateBurst, "unary calls one principal may make in a burst (the token bucket's size); with --rate-limit")
	fs.DurationVar(&l.readTimeout, "request-read-timeout", server.DefaultRequestReadTimeout, "time a request has to arrive in full, headers to end of body (a stream's request too; then the stream stays open); 0: none")
	fs.IntVar(&l.maxConns, "max-connections", server.DefaultMaxConnections, "connections open at once; beyond, a new connection is closed as soon as it is accepted (0: no cap)")
	fs.IntVar(&l.maxConnsPerIP, "max-conns-per-ip", 0, "connections one remote IP may hold open at once, TLS handshakes in progress included; beyond, its new connection is closed as soon as it is accepted, and other addresses still get in (0: no cap; "+strconv.Itoa(server.SuggestedMaxConnectionsPerHost)+" keeps one address to a tenth of --max-connections)")
	fs.IntVar(&l.maxPendingPerIP, "max-pending-conns-per-ip", server.DefaultMaxPendingPerHost, "connections one remote IP may hold that have sent no request yet (TLS handshake in progress or done, no request headers, no HTTP/2 stream); beyond, its new connection is closed as soon as it is accepted. A connection that has sent a request no longer counts, so idle keep-alive clients are never held to it; only one that opens this many at once before sending on any reaches it (a proxy fronting many users may: raise it there). 0: no cap")
	fs.DurationVar(&l.handshakeTimeout, "handshake-timeout", server.DefaultHandshakeTimeout, "time a connection has from accept to its first request (TLS handshake and the request's headers, or its first HTTP/2 stream) while its remote IP holds more than "+strconv.Itoa(server.DefaultTimeoutAbove)+" such connections; then it is closed. A client opening a few connections at once keeps net/http's own deadlines (10s for the TLS handshake and for a request's headers), however slow its network; a flood from one address is cut at this. 0: none")
	fs.IntVar(&l.h2Streams, "http2-max-streams", server.DefaultMaxConcurrentStreams, "HTTP/2 streams (calls) one connection may have open at once")
}

func (l limitConfig) check() error {
	if l.maxStreams < 0 || l.maxStreamsPer < 0 || l.rateLimit < 0 || l.rateBurst < 1 || l.maxConns < 0 || l.maxConnsPerIP < 0 || l.h2Streams < 1 || l.readTimeout < 0 || l.maxPendingPerIP < 0 || l.handshakeTimeout < 0 {
		return errors.New("--max-streams, --max-streams-per-principal, --rate-limit, --max-connections, --max-conns-per-ip, --max-pending-conns-per-ip, --request-read-timeout and --handshake-timeout must not be negative; --rate-burst and --http2-max-streams must be at least 1")
	}
	return nil
}

// limits is the server.Limits the flags ask for; 0 (no limit) becomes
// server.Limits' negative.
func (l limitConfig) limits() server.Limits {
	off := func(v int) int {
		if v == 0 {
			return -1
		}
		return v
	}
	lim := server.Limits{
		MaxStreams:             off(l.maxStreams),
		MaxStreamsPerPrincipal: off(l.maxStreamsPer),
		RateLimit:              l.rateLimit,
		RateBurst:              l.rateBurst,
		RequestReadTimeout:     l.readTimeout,
		Principal:              server.PrincipalOr(server.RemoteHost),
	}
	if lim.RateLimit == 0 {
		lim.RateLimit = -1
	}
	if lim.RequestReadTimeout == 0 {
		lim.RequestReadTimeout = -1
	}
	return lim
}

// connLimits are the connection caps the flags ask for.
func (l limitConfig) connLimits() server.ConnLimits {
	return server.ConnLimits{Max: l.maxConns, MaxPerHost: l.maxConnsPerIP}
}

func (l limitConfig) serveOptions() server.ServeOptions {
	return server.ServeOptions{MaxConcurrentStreams: l.h2Streams, Pending: server.PendingLimits{MaxPerHost: l.maxPendingPerIP, Timeout: l.handshakeTimeout, TimeoutAbove: server.DefaultTimeoutAbove}}
}
