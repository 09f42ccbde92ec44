package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmdiag/llmdiag/auth"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/refusal"
)

// MaxRequestBytes bounds one request message.
const MaxRequestBytes = 1 << 20

// Handler returns the one-port HTTP handler: the DiagnosisService (Connect,
// gRPC, gRPC-Web), grpc.health.v1, server reflection (v1 and v1alpha, so
// grpcurl works without proto files) and /metrics from gatherer.
func Handler(svc llmdiagv1connect.DiagnosisServiceHandler, health grpchealth.Checker, gatherer prometheus.Gatherer, opts ...connect.HandlerOption) http.Handler {
	return NewHandler(svc, health, Surfaces{Reflection: true, Metrics: gatherer}, opts...)
}

// Surfaces are the optional parts of the port.
type Surfaces struct {
	// Reflection serves gRPC server reflection (serve --reflection).
	Reflection bool
	// Metrics, when not nil, is served as /metrics (not with serve
	// --metrics-listen, which serves it on an address of its own).
	Metrics prometheus.Gatherer
	// Routes are further HTTP surfaces on the port (the MCP server, the
	// Alertmanager receiver, Slack's command, the runbooks), each under
	// its ServeMux pattern. What may call them is auth/policy.go's.
	Routes []Route
	// GetMaxAge is the max-age of the Cache-Control a successful GET of a
	// read carries (cache.go); serve sets --interval. Under a second: no-cache.
	GetMaxAge time.Duration
	// Refusals counts compressed requests refused for what they inflate
	// to (reason size); nil: not counted.
	Refusals *refusal.Log
}

// Route is an HTTP surface of the port: a net/http ServeMux pattern and its
// handler.
type Route struct {
	Pattern string
	Handler http.Handler
}

// NewHandler is Handler with the optional surfaces chosen.
func NewHandler(svc llmdiagv1connect.DiagnosisServiceHandler, health grpchealth.Checker, s Surfaces, opts ...connect.HandlerOption) http.Handler {
	// Requests are small; a megabyte bounds what an untrusted caller can make
	// the server read and decode.
	//
	// Answers below CompressMinBytes go out uncompressed: gzip of a few
	// kilobytes costs more CPU than the bytes it saves on a data-centre
	// network, and it was a third of GetNodeMetrics' time (BenchmarkUnary).
	//
	// Compressed requests are inflated no further than that megabyte
	// (boundedGzip, compress.go).
	opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(MaxRequestBytes), connect.WithCompressMinBytes(CompressMinBytes), boundedGzip(MaxRequestBytes, s.Refusals)}, opts...)
	mux := http.NewServeMux()
	// Unary answers reach the HTTP/2 server in one write (coalesce.go).
	co := newCoalescer()
	path, h := llmdiagv1connect.NewDiagnosisServiceHandler(svc, opts...)
	mux.Handle(path, h)
	// A stream behind the feed writes its backlog at once (stream.go).
	mux.Handle(llmdiagv1connect.DiagnosisServiceStreamHealthProcedure, holdFlushes(h))
	// GETs of the reads say how they may be cached (cache.go).
	sd := llmdiagv1.File_llmdiag_v1_diagnosis_proto.Services().ByName("DiagnosisService")
	reads := readProcedures(sd)
	for _, p := range unaryProcedures(sd) {
		var ph http.Handler = co.wrap(h)
		switch {
		case p == llmdiagv1connect.DiagnosisServiceGetRoutabilityProcedure:
			ph = cacheGetsAs("no-store", ph)
		case reads[p]:
			ph = cacheGets(s.GetMaxAge, ph)
		}
		mux.Handle(p, ph)
	}
	path, h = grpchealth.NewHandler(health, opts...)
	mux.Handle(path, h)
	mux.Handle(path+"Check", co.wrap(h)) // Check is unary; Watch streams
	if s.Reflection {
		reflector := grpcreflect.NewStaticReflector(llmdiagv1connect.DiagnosisServiceName, grpchealth.HealthV1ServiceName)
		mux.Handle(grpcreflect.NewHandlerV1(reflector, opts...))
		mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
	}
	if s.Metrics != nil {
		// OpenMetrics when the scraper asks for it: the only format that
		// carries the RPC latency exemplars (telemetry).
		mux.Handle("/metrics", promhttp.HandlerFor(s.Metrics, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	}
	mux.Handle("GET "+auth.OpenAPIPath, openAPIHandler())
	for _, r := range s.Routes {
		mux.Handle(r.Pattern, r.Handler)
	}
	return mux
}

// CompressMinBytes is the smallest answer the server compresses (when the
// client accepts gzip): a fleet listing, not a single node's metrics.
const CompressMinBytes = 16 << 10

// Dependency is a backend whose health is reported under its own service
// name (for example "redis"); it does not change the overall status.
type Dependency struct {
	Name string
	// Check returns nil while the backend answers; it should honour ctx.
	Check func(ctx context.Context) error
}

// dependencyTimeout bounds one Dependency.Check.
const dependencyTimeout = time.Second

// NewHealth returns a health checker reporting the service and the process,
// and each of deps under its own name. Until ready is closed the service
// answers NOT_SERVING; a dependency answers NOT_SERVING while its Check
// fails.
func NewHealth(ready <-chan struct{}, deps ...Dependency) grpchealth.Checker {
	return healthChecker{ready: ready, deps: deps}
}

type healthChecker struct {
	ready <-chan struct{}
	deps  []Dependency
}

func (h healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	switch req.Service {
	case "", llmdiagv1connect.DiagnosisServiceName:
	default:
		for _, d := range h.deps {
			if d.Name == req.Service {
				ctx, cancel := context.WithTimeout(ctx, dependencyTimeout)
				defer cancel()
				if d.Check(ctx) != nil {
					return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
				}
				return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	select {
	case <-h.ready:
		return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
	default:
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
}

// Serve serves h on ln over HTTP/1.1 and cleartext HTTP/2 until ctx is done,
// then shuts down gracefully within grace. ServeTLS serves over TLS. HTTP/2
// connections are bounded by opts (the first given; see ServeOptions for
// the defaults).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, grace time.Duration, opts ...ServeOptions) error {
	return serve(ctx, ln, h, log, grace, nil, opts)
}

// serve is Serve, or ServeTLS when tlsConfig is not nil.
func serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, grace time.Duration, tlsConfig *tls.Config, opts []ServeOptions) error {
	var o ServeOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	o = o.withDefaults()
	srv := &http.Server{
		Handler:           h,
		Protocols:         protocols(tlsConfig != nil),
		TLSConfig:         tlsConfig,
		HTTP2:             o.http2Config(),
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	var counted func(remote string) bool
	if o.Pending.on() {
		if o.Pending.Refusals == nil {
			o.Pending.Refusals = o.Refusals
		}
		pt := newPendingTracker(o.Pending)
		srv.ConnState, counted = pt.connState, pt.handshakeFailed
		if tlsConfig == nil {
			// Cleartext HTTP/2 is told from HTTP/1 by its first bytes.
			ln = sniffListener{ln}
		}
	}
	if o.Refusals != nil {
		// TLS handshake errors counted (once: not those the deadline
		// closed), and the caller cannot set the pace of the log.
		srv.ErrorLog = o.Refusals.ErrorLog(counted)
	}
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
