package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
)

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
		_, _, err := clitest.Run(t, nil, args...)
		if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, %v; want a usage error saying %q", c.args, cli.ExitCode(err), err, c.want)
		}
	}
}
