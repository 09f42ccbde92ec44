package servertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// Options say what to serve. Zero values take the defaults.
type Options struct {
	// Store is what the service reads (default: an empty memory store).
	Store store.Store
	// Source answers windows other than the refresh's (default nil: only
	// the default window).
	Source source.Source
	// Config configures the service.
	Config server.Config
	// Handler replaces the service (Store, Source and Config are then
	// unused): a stand-in that measures the server stack alone.
	Handler llmdiagv1connect.DiagnosisServiceHandler
	// Registry is what /metrics serves (default: a new, empty one).
	Registry *prometheus.Registry
	// HandlerOptions are passed to server.Handler (interceptors).
	HandlerOptions []connect.HandlerOption
	// Now is the service's clock (default time.Now).
	Now func() time.Time
	// Log receives the service's log (default: discarded).
	Log *slog.Logger
	// Addr is where to listen (default 127.0.0.1:0, a free loopback port).
	Addr string
	// Grace bounds the shutdown (default 5s).
	Grace time.Duration
	// TLS, when set, serves over TLS with it (server.ServeTLS; see
	// server.NewTLSConfig), and URL is https://.
	TLS *tls.Config
	// Limits, when set, puts the service behind a server.Limiter as serve
	// does (its HTTP part in front of the handler, inside Wrap; its
	// interceptor after HandlerOptions' interceptors) and caps the
	// connections at server.DefaultMaxConnections: what a caller costs with
	// the caps on.
	Limits *server.Limits
	// Wrap, when set, wraps the whole handler: a test's view of what
	// reaches net/http.
	Wrap func(http.Handler) http.Handler
	// NoREST serves the handler without the REST paths in front (serve
	// always has them): to measure what they cost the other callers.
	NoREST bool
	// Conns, when set with Limits, are the connection caps (default: at
	// most server.DefaultMaxConnections).
	Conns *server.ConnLimits
	// Refusals, when set, counts and logs refusals as serve does: the
	// limits' (when Limits has none), the connection cap's, compressed
	// requests', and the server's error log (TLS handshakes).
	Refusals *refusal.Log
	// Pending bounds the connections that have sent no request yet
	// (server.ServeOptions.Pending; default off). Its refusals default
	// to Refusals.
	Pending server.PendingLimits
}

// Server is a running service.
type Server struct {
	// URL is the service's base URL, http://127.0.0.1:port (https:// with
	// Options.TLS).
	URL string
	// Service is the service being served (nil with Options.Handler).
	Service *server.Service
	// Store is what the service reads.
	Store store.Store

	cancel  context.CancelFunc
	done    chan error
	stop    sync.Once
	stopErr error
}

// Start serves the service until the test ends, then stops it (ending its
// streams) and fails the test if the server did not shut down cleanly.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// Run serves the service until Stop: for callers with no testing.TB (an
// Example).
func Run(o Options) (*Server, error) {
	if o.Store == nil {
		o.Store = memory.New(memory.Options{}, "servertest")
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Grace <= 0 {
		o.Grace = 5 * time.Second
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	scheme := "http://"
	if o.TLS != nil {
		scheme = "https://"
	}
	s := &Server{URL: scheme + ln.Addr().String(), Store: o.Store, cancel: cancel, done: make(chan error, 1)}
	h := o.Handler
	if h == nil {
		s.Service = server.NewService(o.Store, o.Source, o.Log, o.Now, o.Config, ctx.Done())
		h = s.Service
	}
	ready := make(chan struct{})
	close(ready)
	surfaces := server.Surfaces{Reflection: true, Metrics: o.Registry, Refusals: o.Refusals}
	handler := server.NewHandler(h, server.NewHealth(ready), surfaces, o.HandlerOptions...)
	if o.Limits != nil {
		limits := *o.Limits
		if limits.Refusals == nil {
			limits.Refusals = o.Refusals
		}
		lim := server.NewLimiter(limits)
		opts := append(slices.Clip(o.HandlerOptions), connect.WithInterceptors(lim.Interceptor()))
		handler = lim.Wrap(server.NewHandler(h, server.NewHealth(ready), surfaces, opts...))
		conns := server.ConnLimits{Max: server.DefaultMaxConnections}
		if o.Conns != nil {
			conns = *o.Conns
		}
		if conns.Refusals == nil {
			conns.Refusals = o.Refusals
		}
		ln = server.LimitConnections(ln, conns)
	}
	if o.Wrap != nil {
		handler = o.Wrap(handler)
	}
	if !o.NoREST { // the REST paths in front, as serve puts them
		if handler, err = server.REST(handler); err != nil {
			_ = ln.Close()
			cancel()
			return nil, err
		}
	}
	so := server.ServeOptions{Refusals: o.Refusals, Pending: o.Pending}
	go func() {
		if o.TLS != nil {
			s.done <- server.ServeTLS(ctx, ln, handler, o.Log, o.Grace, o.TLS, so)
			return
		}
		s.done <- server.Serve(ctx, ln, handler, o.Log, o.Grace, so)
	}()
	return s, nil
}

// Stop shuts the server down, ending its streams, and returns what Serve
// returned. It may be called more than once.
func (s *Server) Stop() error {
	s.stop.Do(func() {
		s.cancel()
		s.stopErr = <-s.done
	})
	return s.stopErr
}
