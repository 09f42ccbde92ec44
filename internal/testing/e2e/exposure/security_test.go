package exposure_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// reflectionCode lists services by gRPC reflection (grpcurl list).
func reflectionCode(t *testing.T, addr, token string) codes.Code {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	s, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err == nil {
		err = s.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}})
	}
	// Send answers io.EOF when the server has already ended the stream
	// (a refusal can beat the request): Recv then says with what status.
	if err == nil || errors.Is(err, io.EOF) {
		_, err = s.Recv()
	}
	return status.Code(err)
}

// TestServeAuth runs serve with --auth-tokens and --metrics-listen, and
// serve with neither (open, the zero-config default) and --reflection.
func TestServeAuth(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: grafana, role: reader, token: "+clitest.ReaderToken+"}\n  - {name: oncall, role: admin, token: "+clitest.AdminToken+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := "node-under-test=http://" + testkit.ClosedAddr(t) + "/metrics" // the node reads UNKNOWN
	addr, metricsAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", addr, "--target", target, "--auth-tokens", tokens, "--metrics-listen", metricsAddr, "--log-level", "warn")
	openAddr := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", openAddr, "--target", target, "--reflection", "--log-level", "warn")
	for _, a := range []string{addr, openAddr} {
		clitest.WaitFor(t, "serve on "+a, 30*time.Second, func() bool {
			return clitest.AuthPost(t, "http://"+a+"/grpc.health.v1.Health/Check", "") == http.StatusOK
		})
	}

	list := "/llmdiag.v1.DiagnosisService/ListNodes"
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"ListNodes, no token", clitest.AuthPost(t, "http://"+addr+list, ""), http.StatusUnauthorized},
		{"ListNodes, unknown token", clitest.AuthPost(t, "http://"+addr+list, "x-0123456789abcdefghij"), http.StatusUnauthorized},
		{"ListNodes, reader", clitest.AuthPost(t, "http://"+addr+list, clitest.ReaderToken), http.StatusOK},
		{"StreamHealth, reader", clitest.AuthPost(t, "http://"+addr+"/llmdiag.v1.DiagnosisService/StreamHealth", clitest.ReaderToken), http.StatusForbidden},
		{"/metrics on --listen, admin (moved to --metrics-listen)", clitest.AuthGet(t, "http://"+addr+"/metrics", clitest.AdminToken), http.StatusNotFound},
		{"/metrics on --listen, anonymous", clitest.AuthGet(t, "http://"+addr+"/metrics", ""), http.StatusUnauthorized},
		{"/metrics on --metrics-listen", clitest.AuthGet(t, "http://"+metricsAddr+"/metrics", ""), http.StatusOK},
		{"open: ListNodes, no token", clitest.AuthPost(t, "http://"+openAddr+list, ""), http.StatusOK},
		{"open: /metrics", clitest.AuthGet(t, "http://"+openAddr+"/metrics", ""), http.StatusOK},
	} {
		if c.got != c.want {
			t.Errorf("%s: HTTP %d, want %d", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		name, addr, token string
		want              codes.Code
	}{
		{"reflection off by default, admin", addr, clitest.AdminToken, codes.Unimplemented},
		{"reflection, reader", addr, clitest.ReaderToken, codes.PermissionDenied},
		{"reflection, anonymous", addr, "", codes.Unauthenticated},
		{"--reflection, open", openAddr, "", codes.OK},
	} {
		if got := reflectionCode(t, c.addr, c.token); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The CLI's --token reaches the check.
	vars := map[string]string{"LLMDIAG_ADDR": "http://" + addr}
	if _, _, err := clitest.Run(t, vars, "nodes"); err == nil || !strings.Contains(err.Error(), "unauthenticated") {
		t.Errorf("nodes without --token: %v", err)
	}
	if out, _, err := clitest.Run(t, vars, "--token", clitest.ReaderToken, "nodes"); err != nil || !strings.Contains(out, "node-under-test") {
		t.Errorf("nodes --token: %v\n%s", err, out)
	}
}
