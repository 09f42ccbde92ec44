package deploy_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealthv1 "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestServeRunsWithTheManifestArgs runs serve with the single overlay's
// container args, each mounted file in a temp dir (the ConfigMap's
// thresholds, a certificate, the Secret layout's empty tokens file) and each
// port on a free loopback one: the probe's plaintext gRPC health check
// reads SERVING on --health-listen, Prometheus reads /metrics on
// --metrics-listen without a token, and the API port wants one.
func TestServeRunsWithTheManifestArgs(t *testing.T) {
	m := decode(t, render(t, overlays[0].dir))
	if t.Failed() {
		return
	}
	c := *container(&m)
	dir := t.TempDir()
	files := map[string]string{} // mount path → temp dir
	for _, vm := range c.VolumeMounts {
		files[vm.MountPath] = filepath.Join(dir, vm.Name)
		if err := os.Mkdir(files[vm.MountPath], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range m.configMaps[0].Data {
		if err := os.WriteFile(filepath.Join(dir, "config", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The shipped fleet is an example whose node is not on this machine:
	// check it loads, and watch a loopback port nothing listens on instead.
	if _, err := fleet.Load(filepath.Join(dir, "config", "fleet.yaml")); err != nil {
		t.Fatalf("base/fleet.yaml: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "fleet.yaml"), []byte("nodes:\n  - id: vllm-0\n    url: http://"+testkit.ClosedAddr(t)+"/metrics\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ca := certtest.NewCA(t, "cluster CA")
	ca.Server(t).Write(t, filepath.Join(dir, "tls", "tls.crt"), filepath.Join(dir, "tls", "tls.key"))
	if err := os.WriteFile(filepath.Join(dir, "auth", "tokens.yaml"), []byte(secretLayouts(t)["llmdiag-auth"].StringData["tokens.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}

	addrs := map[string]string{} // flag → loopback address
	args := []string{c.Args[0]}
	for _, a := range c.Args[1:] {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch name {
		case "listen", "health-listen", "metrics-listen":
			addrs[name] = testkit.FreeAddr(t)
			value = addrs[name]
		}
		for mount, tmp := range files {
			if rest, ok := strings.CutPrefix(value, mount+"/"); ok {
				value = filepath.Join(tmp, rest)
			}
		}
		args = append(args, "--"+name+"="+value)
	}
	var stderr testkit.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(ctx, args, cli.Env{Getenv: func(string) string { return "" }, Stdout: &stderr, Stderr: &stderr})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not stop within 20s of cancellation")
		}
	})

	conn, err := grpc.NewClient(addrs["health-listen"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last := ""
	testkit.Wait{For: 30 * time.Second, Last: func() string { return last + "\n" + stderr.String() }}.Until(t, "SERVING on --health-listen", func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v\n%s", err, stderr.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := grpchealthv1.NewHealthClient(conn).Check(ctx, &grpchealthv1.HealthCheckRequest{})
		last = r.GetStatus().String()
		if err != nil {
			last = err.Error()
		}
		return r.GetStatus() == grpchealthv1.HealthCheckResponse_SERVING
	})
	resp, err := http.Get("http://" + addrs["metrics-listen"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics on --metrics-listen: HTTP %d, want 200 without a token", resp.StatusCode)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	resp, err = hc.Post("https://"+addrs["listen"]+"/llmdiag.v1.DiagnosisService/ListNodes", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("ListNodes over TLS on --listen without a token: HTTP %d, want 401", resp.StatusCode)
	}
}
