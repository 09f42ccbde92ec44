package exposure_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealthv1 "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestServeHealthListen serves --listen over TLS with authentication and
// --health-listen beside it: a plaintext gRPC health client, as the
// kubelet's grpc probe is, reads SERVING on the health port and is refused
// on the TLS one, and the health port serves nothing but health.
func TestServeHealthListen(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "server CA")
	certFile, keyFile := ca.Server(t).WriteFiles(t, dir, "server")
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: grafana, role: reader, token: "+clitest.ReaderToken+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, healthAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	target := "node-under-test=http://" + testkit.ClosedAddr(t) + "/metrics"
	clitest.Background(t, nil, "serve", "--listen", addr, "--health-listen", healthAddr, "--target", target,
		"--tls-cert", certFile, "--tls-key", keyFile, "--auth-tokens", tokens, "--interval", "1s", "--log-level", "warn")

	check := func(a string) (grpchealthv1.HealthCheckResponse_ServingStatus, error) {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := grpchealthv1.NewHealthClient(conn).Check(ctx, &grpchealthv1.HealthCheckRequest{})
		return r.GetStatus(), err
	}
	var last string
	clitest.WaitFor(t, "SERVING on --health-listen", 30*time.Second, func() bool {
		st, err := check(healthAddr)
		last = st.String()
		if err != nil {
			last = err.Error()
		}
		return st == grpchealthv1.HealthCheckResponse_SERVING
	}, &last)
	if st, err := check(addr); err == nil {
		t.Errorf("plaintext gRPC health on the TLS --listen answered %v; want the connection refused", st)
	}
	for _, path := range []string{"/llmdiag.v1.DiagnosisService/ListNodes", "/metrics", "/runbooks/"} {
		resp, err := http.Post("http://"+healthAddr+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s on --health-listen: HTTP %d, want 404 (health only)", path, resp.StatusCode)
		}
	}
}
