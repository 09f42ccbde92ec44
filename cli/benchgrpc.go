package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// benchCaller makes the calls bench measures on one connection.
type benchCaller interface {
	health(ctx context.Context) error
	metrics(ctx context.Context, req *llmdiagv1.GetNodeMetricsRequest) error
	diagnose(ctx context.Context, req *llmdiagv1.DiagnoseNodeRequest) error
}

// connectCaller calls through llmdiag's Go client (connect-go), for
// --protocol connect, connect-json and grpc-web.
type connectCaller struct{ c *client.Client }

func (c connectCaller) health(ctx context.Context) error { return checkServing(ctx, c.c) }

func (c connectCaller) metrics(ctx context.Context, req *llmdiagv1.GetNodeMetricsRequest) error {
	_, err := c.c.GetNodeMetrics(ctx, connect.NewRequest(req))
	return err
}

func (c connectCaller) diagnose(ctx context.Context, req *llmdiagv1.DiagnoseNodeRequest) error {
	_, err := c.c.DiagnoseNode(ctx, connect.NewRequest(req))
	return err
}

// grpcCaller calls through grpc-go, for --protocol grpc: the client ghz and
// most routers use. Its cost per answer is what such callers pay; connect-go
// over net/http decodes an 8 KB DiagnoseNode answer at a higher cost, which,
// with the bench on the server's cores, read as 1.55–1.71× the health check
// at concurrency 8 where grpc-go read 1.25–1.33×.
type grpcCaller struct {
	hc  healthpb.HealthClient
	svc llmdiagv1.DiagnosisServiceClient
}

func (c grpcCaller) health(ctx context.Context) error {
	resp, err := c.hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fromGRPC(err)
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health check: %v", st)
	}
	return nil
}

func (c grpcCaller) metrics(ctx context.Context, req *llmdiagv1.GetNodeMetricsRequest) error {
	_, err := c.svc.GetNodeMetrics(ctx, req)
	return fromGRPC(err)
}

func (c grpcCaller) diagnose(ctx context.Context, req *llmdiagv1.DiagnoseNodeRequest) error {
	_, err := c.svc.DiagnoseNode(ctx, req)
	return fromGRPC(err)
}

// fromGRPC gives a grpc-go error the connect code of its status (the two
// number their codes alike), so bench reads errors one way.
func fromGRPC(err error) error {
	if err == nil {
		return nil
	}
	return connect.NewError(connect.Code(status.Code(err)), err)
}

// dialGRPC opens a grpc-go connection to cf.addr with cf's TLS files and
// token.
func dialGRPC(cf *clientFlags) (*grpc.ClientConn, error) {
	u, err := url.Parse(cf.addr)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, usageError{fmt.Errorf("--addr %q: bench over grpc wants scheme://host:port with no path", cf.addr)}
	}
	host := u.Host
	var creds credentials.TransportCredentials
	switch u.Scheme {
	case "http":
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
		creds = insecure.NewCredentials()
	case "https":
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "443")
		}
		cfg, err := client.TLSFiles{CAFile: cf.ca, CertFile: cf.cert, KeyFile: cf.key}.Config()
		if err != nil {
			return nil, usageError{fmt.Errorf("--ca, --cert, --key: %w", err)}
		}
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(cfg)
	default:
		return nil, usageError{fmt.Errorf("--addr %q: want http:// or https://", cf.addr)}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if cf.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(cf.token)))
	}
	cc, err := grpc.NewClient(host, opts...)
	if err != nil {
		return nil, usageError{fmt.Errorf("--addr %q: %w", cf.addr, err)}
	}
	return cc, nil
}

// bearer sends a bearer token with every call, as llmdiag's client does
// (plaintext included, for loopback).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
