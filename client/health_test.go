package client_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
)

// Health reaches grpc.health.v1 over every protocol: SERVING for the server,
// NotFound for a service it does not report.
func TestHealthOverEveryProtocol(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	for _, p := range []client.Protocol{client.ProtocolConnect, client.ProtocolConnectJSON, client.ProtocolGRPC, client.ProtocolGRPCWeb} {
		t.Run(string(p), func(t *testing.T) {
			c, err := client.New(srv.URL, client.WithProtocol(p))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := c.Health(ctx, "")
			if err != nil || st != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Health(\"\") = %v, %v; want SERVING", st, err)
			}
			if _, err := c.Health(ctx, "no-such-service"); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("Health(no-such-service): %v, want NotFound", err)
			}
		})
	}
}
