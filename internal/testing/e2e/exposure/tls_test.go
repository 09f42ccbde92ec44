package exposure_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"go/build"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// tool finds a program the test runs: on PATH, or where `go install` puts
// it; a missing one fails the test saying how to get it.
func tool(t *testing.T, name string) string {
	t.Helper()
	p := testkit.Program{Name: name, Candidates: []string{name}}
	if bin := os.Getenv("GOBIN"); bin != "" {
		p.Candidates = append(p.Candidates, filepath.Join(bin, name))
	}
	p.Candidates = append(p.Candidates, filepath.Join(build.Default.GOPATH, "bin", name))
	return testkit.Binary(t, p)
}

// runTool runs a program with a deadline and returns its output.
func runTool(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, errb.String())
	}
	return out.String(), err
}

// TestServeTLS is `llmdiag serve --tls-cert … --tls-key … --tls-client-ca …
// --auth-tokens …` asked by real grpcurl and curl (with a bearer token or a
// client certificate) and by the CLI itself, over HTTP/2; the certificate
// rewritten in place is served without a restart.
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serve over TLS asked by grpcurl and curl")
	}
	grpcurl, curl := tool(t, "grpcurl"), tool(t, "curl")
	protoDir, err := filepath.Abs(clitest.RepoPath(t, "proto"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca, clients, strangers := certtest.NewCA(t, "server CA"), certtest.NewCA(t, "client CA"), certtest.NewCA(t, "strangers")
	caFile, clientCAFile := ca.WriteFile(t, dir, "ca.pem"), clients.WriteFile(t, dir, "clients.pem")
	certFile, keyFile := ca.Server(t).WriteFiles(t, dir, "server")
	botCert, botKey := clients.Client(t, "bot").WriteFiles(t, dir, "bot")
	evilCert, evilKey := strangers.Client(t, "mallory").WriteFiles(t, dir, "mallory")

	// A reader token for the callers without a certificate; the client
	// certificate "bot" is mapped to admin (it also reads /metrics).
	const token = "rdr-tls-test-0123456789abcdef"
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: reader, role: reader, token: \""+token+"\"}\nclients:\n  - {subject: bot, role: admin}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bearer := "authorization: Bearer " + token

	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(target.Close)
	addr := testkit.FreeAddr(t)
	url := "https://" + addr
	serveLog := clitest.Background(t, nil, "serve", "--listen", addr, "--target", "tls-node="+target.URL, "--interval", "500ms",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", clientCAFile, "--auth-tokens", tokens)
	var last string
	clitest.WaitFor(t, "llmdiag nodes over https", 30*time.Second, func() bool {
		out, _, err := clitest.Run(t, nil, "--addr", url, "--ca", caFile, "--token", token, "nodes")
		last = fmt.Sprint(out, err)
		return err == nil && strings.Contains(out, "tls-node")
	}, &last)
	if !strings.Contains(serveLog.String(), "addr="+url) {
		t.Errorf("serve did not log its https address:\n%s", serveLog)
	}

	t.Run("cli", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			vars map[string]string
			args []string
		}{
			{"grpc, flags before", nil, []string{"--addr", url, "--ca", caFile, "--token", token, "--protocol", "grpc", "nodes"}},
			{"grpc-web, flags after", nil, []string{"nodes", "--protocol", "grpc-web", "--addr", url, "--ca", caFile, "--token", token}},
			{"client certificate", nil, []string{"--addr", url, "--ca", caFile, "--cert", botCert, "--key", botKey, "metrics", "tls-node"}},
			{"environment", map[string]string{"LLMDIAG_ADDR": url, "LLMDIAG_CA": caFile, "LLMDIAG_CERT": botCert, "LLMDIAG_KEY": botKey}, []string{"diagnose", "tls-node"}},
			// bench over grpc dials with grpc-go (cli/benchgrpc.go).
			{"bench, token", nil, []string{"bench", "--addr", url, "--ca", caFile, "--token", token, "--calls", "3", "--rounds", "1", "--warmup", "0", "--concurrency", "1"}},
			{"bench, client certificate", nil, []string{"bench", "--addr", url, "--ca", caFile, "--cert", botCert, "--key", botKey, "--calls", "3", "--rounds", "1", "--warmup", "0", "--concurrency", "1"}},
		} {
			if out, stderr, err := clitest.Run(t, tc.vars, tc.args...); err != nil || !strings.Contains(out, "tls-node") {
				t.Errorf("%s: %v\n%s%s", tc.name, err, out, stderr)
			}
		}
		for _, tc := range []struct {
			name string
			args []string
			code int
			want string
		}{
			{"no CA", []string{"--addr", url, "--token", token, "nodes"}, 1, "certificate"},
			{"bench, no CA", []string{"bench", "--addr", url, "--token", token, "--calls", "3", "--rounds", "1"}, 1, "certificate"},
			{"bench, no token", []string{"bench", "--addr", url, "--ca", caFile, "--calls", "3", "--rounds", "1"}, 1, "unauthenticated"},
			{"no token, no certificate", []string{"--addr", url, "--ca", caFile, "nodes"}, 1, "unauthenticated"},
			{"untrusted client certificate", []string{"--addr", url, "--ca", caFile, "--cert", evilCert, "--key", evilKey, "nodes"}, 1, ""},
			{"plaintext to the TLS port", []string{"--addr", "http://" + addr, "--protocol", "grpc", "nodes"}, 1, ""},
			{"CA with an http address", []string{"--addr", "http://" + addr, "--ca", caFile, "nodes"}, 2, "https://"},
			{"certificate without key", []string{"--addr", url, "--ca", caFile, "--cert", botCert, "nodes"}, 2, "--cert"},
			{"missing CA file", []string{"--addr", url, "--ca", filepath.Join(dir, "nope.pem"), "nodes"}, 2, "nope.pem"},
		} {
			_, stderr, err := clitest.Run(t, nil, tc.args...)
			if cli.ExitCode(err) != tc.code || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("%s: exit %d, %v, want exit %d naming %q\n%s", tc.name, cli.ExitCode(err), err, tc.code, tc.want, stderr)
			}
		}
	})

	t.Run("grpcurl", func(t *testing.T) {
		protoArgs := []string{"-import-path", protoDir, "-proto", "llmdiag/v1/diagnosis.proto", "-d", "{}"}
		call := func(extra ...string) (string, error) {
			args := append(append([]string{"-cacert", caFile}, extra...), protoArgs...)
			if len(extra) == 0 {
				args = append([]string{"-H", bearer}, args...)
			}
			return runTool(t, grpcurl, append(args, addr, "llmdiag.v1.DiagnosisService/ListNodes")...)
		}
		if out, err := call(); err != nil || !strings.Contains(out, `"tls-node"`) {
			t.Errorf("grpcurl -cacert: %v\n%s", err, out)
		}
		if out, err := call("-cert", botCert, "-key", botKey); err != nil || !strings.Contains(out, `"tls-node"`) {
			t.Errorf("grpcurl -cacert -cert -key: %v\n%s", err, out)
		}
		// (grpcurl, like every Go client, does not send a certificate the
		// server's CA list does not cover: an untrusted one is refused in
		// the curl test below, and in server.TestMTLS.)
		if out, err := runTool(t, grpcurl, append(append([]string{"-plaintext", "-connect-timeout", "2"}, protoArgs...), addr, "llmdiag.v1.DiagnosisService/ListNodes")...); err == nil {
			t.Errorf("grpcurl -plaintext (h2c) reached the TLS port:\n%s", out)
		}
	})

	t.Run("curl", func(t *testing.T) {
		rpc := url + "/llmdiag.v1.DiagnosisService/ListNodes"
		out, err := runTool(t, curl, "-sS", "--fail", "--cacert", caFile, "-H", bearer, "-H", "Content-Type: application/json", "-d", "{}",
			"-w", "\nHTTP/%{http_version}", rpc)
		if err != nil || !strings.Contains(out, `"tls-node"`) || !strings.HasSuffix(out, "HTTP/2") {
			t.Errorf("curl --cacert (Connect JSON): %v\n%s", err, out)
		}
		out, err = runTool(t, curl, "-sS", "--fail", "--http1.1", "--cacert", caFile, "--cert", botCert, "--key", botKey,
			"-w", "\nHTTP/%{http_version}", url+"/metrics")
		if err != nil || !strings.Contains(out, "llmdiag_") || !strings.HasSuffix(out, "HTTP/1.1") {
			t.Errorf("curl --http1.1 --cert /metrics: %v\n%.300s", err, out)
		}
		if out, err := runTool(t, curl, "-sS", "--fail", "--cacert", caFile, "--cert", evilCert, "--key", evilKey, "-d", "{}",
			"-H", "Content-Type: application/json", rpc); err == nil {
			t.Errorf("curl with an untrusted client certificate got in:\n%s", out)
		}
		if out, err := runTool(t, curl, "-sS", "--fail", "-d", "{}", "-H", "Content-Type: application/json", rpc); err == nil {
			t.Errorf("curl without the CA trusted the service:\n%s", out)
		}
	})

	// The certificate rewritten in place: the next handshakes present it
	// (within the reload interval, a second), the service still running.
	rotated := ca.Server(t)
	rotated.Write(t, certFile, keyFile)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	clitest.WaitFor(t, "the rewritten certificate to be served", 10*time.Second, func() bool {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(rotated.Cert.SerialNumber) == 0
	})
	if out, err := runTool(t, grpcurl, "-cacert", caFile, "-H", bearer, "-import-path", protoDir, "-proto", "llmdiag/v1/diagnosis.proto", "-d", "{}",
		addr, "llmdiag.v1.DiagnosisService/ListNodes"); err != nil || !strings.Contains(out, `"tls-node"`) {
		t.Errorf("grpcurl after the rotation: %v\n%s", err, out)
	}
	if !strings.Contains(serveLog.String(), "tls: reloaded certificate") {
		t.Errorf("the reload was not logged:\n%s", serveLog)
	}
}
