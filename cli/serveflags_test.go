package cli_test

import (
	"testing"

	"github.com/llmdiag/llmdiag/cli"
)

// TestServeFlagSet: the exported flag set is serve's, unparsed, with its
// defaults.
func TestServeFlagSet(t *testing.T) {
	fs := cli.ServeFlagSet()
	for name, want := range map[string]string{"listen": "127.0.0.1:8080", "health-listen": "", "metrics-listen": "", "tls-cert": "", "redis": ""} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("--%s: not in serve's flag set", name)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s default %q, want %q", name, f.DefValue, want)
		}
	}
	if fs.Lookup("addr") != nil || fs.Parsed() {
		t.Errorf("serve's flag set has the client's --addr (%v) or is parsed (%v)", fs.Lookup("addr") != nil, fs.Parsed())
	}
}
