package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
)

// Protocol is the wire protocol the client speaks.
type Protocol string

// The protocols a client can speak; all are served on the same port.
const (
	ProtocolConnect     Protocol = "connect"      // Connect, binary protobuf
	ProtocolConnectJSON Protocol = "connect-json" // Connect, JSON
	ProtocolGRPC        Protocol = "grpc"
	ProtocolGRPCWeb     Protocol = "grpc-web"
)

// ParseProtocol validates a protocol name.
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(strings.ToLower(s)); p {
	case ProtocolConnect, ProtocolConnectJSON, ProtocolGRPC, ProtocolGRPCWeb:
		return p, nil
	}
	return "", fmt.Errorf("unknown protocol %q (want connect, connect-json, grpc or grpc-web)", s)
}

type options struct {
	protocol    Protocol
	token       string
	tlsConfig   *tls.Config
	rootCAs     *x509.CertPool
	clientCerts []tls.Certificate
	httpClient  *http.Client
}

// Option configures a Client.
type Option func(*options)

// WithProtocol chooses the wire protocol (default ProtocolConnect).
func WithProtocol(p Protocol) Option { return func(o *options) { o.protocol = p } }

// WithBearerToken sends "Authorization: Bearer token" on every call.
func WithBearerToken(token string) Option { return func(o *options) { o.token = token } }

// WithTLSConfig sets the TLS configuration for https:// URLs. WithCA and
// WithClientCertificate, in any order, add to a copy of it.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tlsConfig = c } }

// WithHTTPClient replaces the HTTP client entirely: the TLS options are not
// used then.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// Client calls the DiagnosisService. Its methods are those of the generated
// Connect client, and Health.
type Client struct {
	llmdiagv1connect.DiagnosisServiceClient
	baseURL string
	health  *connect.Client[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse]
}

// HealthCheckProcedure is the grpc.health.v1 procedure Health calls.
const HealthCheckProcedure = "/grpc.health.v1.Health/Check"

// Health asks the service's grpc.health.v1 Health/Check about service (""
// for the server as a whole, or a dependency such as "redis"), over the
// client's connection, protocol and credentials (the check needs none): the
// probe a load balancer makes, and the floor a call can cost.
func (c *Client) Health(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := c.health.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{Service: service}))
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, err
	}
	return resp.Msg.GetStatus(), nil
}

// New returns a client for the service at baseURL, for example
// "http://127.0.0.1:8080".
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base url %q: want http://host:port or https://host:port", baseURL)
	}
	o := options{protocol: ProtocolConnect}
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := ParseProtocol(string(o.protocol)); err != nil {
		return nil, err
	}
	tlsConfig := o.tls()
	if tlsConfig != nil && u.Scheme != "https" && o.httpClient == nil {
		// Not silently: a CA or a client certificate says the caller
		// expects an encrypted, authenticated connection.
		return nil, fmt.Errorf("base url %q: TLS options need an https:// URL", baseURL)
	}
	hc := o.httpClient
	if hc == nil {
		hc = newHTTPClient(u.Scheme == "https", tlsConfig)
	}
	var copts []connect.ClientOption
	switch o.protocol {
	case ProtocolConnectJSON:
		copts = append(copts, connect.WithProtoJSON())
	case ProtocolGRPC:
		copts = append(copts, connect.WithGRPC())
	case ProtocolGRPCWeb:
		copts = append(copts, connect.WithGRPCWeb())
	}
	if o.token != "" {
		copts = append(copts, connect.WithInterceptors(bearer(o.token)))
	}
	// grpc.health.v1 in binary protobuf, even for connect-json: the server
	// (connectrpc.com/grpchealth) names its JSON enum values differently
	// (SERVING_STATUS_SERVING) from the grpc-go messages read here.
	healthOpts := copts
	if o.protocol == ProtocolConnectJSON {
		healthOpts = copts[1:] // less WithProtoJSON, the first
	}
	base := strings.TrimRight(baseURL, "/")
	return &Client{
		DiagnosisServiceClient: llmdiagv1connect.NewDiagnosisServiceClient(hc, base, copts...),
		baseURL:                baseURL,
		health:                 connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](hc, base+HealthCheckProcedure, healthOpts...),
	}, nil
}

// BaseURL returns the URL the client was made for.
func (c *Client) BaseURL() string { return c.baseURL }

// newHTTPClient speaks HTTP/2: over TLS for https (negotiated by ALPN, with
// HTTP/1.1 as the fallback the other protocols accept), cleartext (h2c) for
// http, which gRPC needs and the other protocols profit from.
func newHTTPClient(secure bool, cfg *tls.Config) *http.Client {
	var protocols http.Protocols
	if secure {
		protocols.SetHTTP2(true)
		protocols.SetHTTP1(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: &http.Transport{
		Protocols:       &protocols,
		TLSClientConfig: cfg,
		DialContext:     (&net.Dialer{}).DialContext,
	}}
}

type bearerInterceptor struct{ header string }

func bearer(token string) connect.Interceptor { return bearerInterceptor{"Bearer " + token} }

func (b bearerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", b.header)
		return next(ctx, req)
	}
}

func (b bearerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", b.header)
		return conn
	}
}

func (b bearerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
