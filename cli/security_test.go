package cli_test

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

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

const (
	cliReaderToken = "reader-token-0123456789abcdef"
	cliAdminToken  = "admin-token-0123456789abcdef"
)

// authPost sends a Connect JSON call (what curl does) and returns the status.
func authPost(t testing.TB, url, token string) int {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return authDo(t, req)
}

func authGet(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return authDo(t, req)
}

func authDo(t testing.TB, req *http.Request) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

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
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: grafana, role: reader, token: "+cliReaderToken+"}\n  - {name: oncall, role: admin, token: "+cliAdminToken+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := "node-under-test=http://" + testkit.ClosedAddr(t) + "/metrics" // the node reads UNKNOWN
	addr, metricsAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	background(t, nil, "serve", "--listen", addr, "--target", target, "--auth-tokens", tokens, "--metrics-listen", metricsAddr, "--log-level", "warn")
	openAddr := testkit.FreeAddr(t)
	background(t, nil, "serve", "--listen", openAddr, "--target", target, "--reflection", "--log-level", "warn")
	for _, a := range []string{addr, openAddr} {
		waitFor(t, "serve on "+a, 30*time.Second, func() bool { return authPost(t, "http://"+a+"/grpc.health.v1.Health/Check", "") == http.StatusOK })
	}

	list := "/llmdiag.v1.DiagnosisService/ListNodes"
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"ListNodes, no token", authPost(t, "http://"+addr+list, ""), http.StatusUnauthorized},
		{"ListNodes, unknown token", authPost(t, "http://"+addr+list, "x-0123456789abcdefghij"), http.StatusUnauthorized},
		{"ListNodes, reader", authPost(t, "http://"+addr+list, cliReaderToken), http.StatusOK},
		{"StreamHealth, reader", authPost(t, "http://"+addr+"/llmdiag.v1.DiagnosisService/StreamHealth", cliReaderToken), http.StatusForbidden},
		{"/metrics on --listen, admin (moved to --metrics-listen)", authGet(t, "http://"+addr+"/metrics", cliAdminToken), http.StatusNotFound},
		{"/metrics on --listen, anonymous", authGet(t, "http://"+addr+"/metrics", ""), http.StatusUnauthorized},
		{"/metrics on --metrics-listen", authGet(t, "http://"+metricsAddr+"/metrics", ""), http.StatusOK},
		{"open: ListNodes, no token", authPost(t, "http://"+openAddr+list, ""), http.StatusOK},
		{"open: /metrics", authGet(t, "http://"+openAddr+"/metrics", ""), http.StatusOK},
	} {
		if c.got != c.want {
			t.Errorf("%s: HTTP %d, want %d", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		name, addr, token string
		want              codes.Code
	}{
		{"reflection off by default, admin", addr, cliAdminToken, codes.Unimplemented},
		{"reflection, reader", addr, cliReaderToken, codes.PermissionDenied},
		{"reflection, anonymous", addr, "", codes.Unauthenticated},
		{"--reflection, open", openAddr, "", codes.OK},
	} {
		if got := reflectionCode(t, c.addr, c.token); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The CLI's --token reaches the check.
	vars := map[string]string{"LLMDIAG_ADDR": "http://" + addr}
	if _, _, err := run(t, vars, "nodes"); err == nil || !strings.Contains(err.Error(), "unauthenticated") {
		t.Errorf("nodes without --token: %v", err)
	}
	if out, _, err := run(t, vars, "--token", cliReaderToken, "nodes"); err != nil || !strings.Contains(out, "node-under-test") {
		t.Errorf("nodes --token: %v\n%s", err, out)
	}
}

func TestServeSecurityUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("tokens:\n  - {name: a, role: root, token: 0123456789abcdef0123}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := "a=http://127.0.0.1:1/metrics"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, "is not a loopback address: serving it without TLS (--tls-cert, --tls-key) and authentication (--auth-tokens, --tls-client-ca) needs --insecure"},
		{[]string{"--listen", ":0", "--auth-tokens", bad}, "needs --insecure"},
		{[]string{"--auth-tokens", bad}, `--auth-tokens: ` + bad + `: tokens[0] (a): role "root"`},
		{[]string{"--auth-tokens", filepath.Join(dir, "missing.yaml")}, "--auth-tokens"},
	} {
		args := append([]string{"serve", "--target", target}, c.args...)
		_, _, err := run(t, nil, args...)
		if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, %v; want a usage error saying %q", c.args, cli.ExitCode(err), err, c.want)
		}
	}
}
