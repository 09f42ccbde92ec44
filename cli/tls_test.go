package cli_test

import (
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
)

// TestServeTLSUsage: the TLS flags that do not fit together are usage
// errors, and files that do not load stop serve before it listens.
func TestServeTLSUsage(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	certFile, keyFile := ca.Server(t).WriteFiles(t, dir, "server")
	caFile := ca.WriteFile(t, dir, "ca.pem")
	target := []string{"serve", "--target", "a=http://127.0.0.1:1/metrics", "--listen", "127.0.0.1:0"}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tls-cert", certFile}, 2, "--tls-key"},
		{[]string{"--tls-key", keyFile}, 2, "--tls-cert"},
		{[]string{"--tls-client-ca", caFile}, 2, "--tls-cert"},
		{[]string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-cert-required"}, 2, "--tls-client-ca"},
		{[]string{"--tls-cert", certFile, "--tls-key", certFile}, 1, "--tls-key"},
		{[]string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", keyFile}, 1, "--tls-client-ca"},
	} {
		_, _, err := clitest.Run(t, nil, append(target, tc.args...)...)
		if cli.ExitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, %v; want exit %d naming %s", tc.args, cli.ExitCode(err), err, tc.code, tc.want)
		}
	}
}
