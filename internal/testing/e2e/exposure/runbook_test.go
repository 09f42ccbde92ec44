package exposure_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestServeRunbooks runs serve with authentication on and reads the
// runbooks without a token: they are public documentation on the service's
// port, while the procedures beside them still want a token.
func TestServeRunbooks(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: grafana, role: reader, token: "+clitest.ReaderToken+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := "node-under-test=http://" + testkit.ClosedAddr(t) + "/metrics"
	addr := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", addr, "--target", target, "--auth-tokens", tokens, "--log-level", "warn")
	clitest.WaitFor(t, "serve on "+addr, 30*time.Second, func() bool {
		return clitest.AuthPost(t, "http://"+addr+"/grpc.health.v1.Health/Check", "") == http.StatusOK
	})
	base := "http://" + addr
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"index, anonymous", clitest.AuthGet(t, base+"/runbooks/", ""), http.StatusOK},
		{"overloaded, anonymous", clitest.AuthGet(t, base+"/runbooks/overloaded", ""), http.StatusOK},
		{"kv-exhausted in Chinese, anonymous", clitest.AuthGet(t, base+"/runbooks/kv-exhausted?lang=zh", ""), http.StatusOK},
		{"stalled, reader", clitest.AuthGet(t, base+"/runbooks/stalled", clitest.ReaderToken), http.StatusOK},
		{"unknown runbook", clitest.AuthGet(t, base+"/runbooks/no-such-cause", ""), http.StatusNotFound},
		{"POST to a runbook", clitest.AuthPost(t, base+"/runbooks/overloaded", ""), http.StatusMethodNotAllowed},
		{"ListNodes still wants a token", clitest.AuthPost(t, base+"/llmdiag.v1.DiagnosisService/ListNodes", ""), http.StatusUnauthorized},
	} {
		if c.got != c.want {
			t.Errorf("%s: HTTP %d, want %d", c.name, c.got, c.want)
		}
	}
	resp, err := http.Get(base + "/runbooks/decode-bound")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q through serve", csp)
	}
}
