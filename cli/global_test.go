package cli_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
)

// recorder is a stand-in llmdiag service that records what each request
// carried and refuses it (503), so a client command ends at once.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
}

type hit struct{ path, auth, contentType string }

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits = append(r.hits, hit{req.URL.Path, req.Header.Get("Authorization"), req.Header.Get("Content-Type")})
		r.mu.Unlock()
		http.Error(w, "recorded", http.StatusServiceUnavailable)
	}))
	// The client speaks HTTP/2 without TLS (h2c), as to llmdiag serve.
	r.Config.Protocols = new(http.Protocols)
	r.Config.Protocols.SetHTTP1(true)
	r.Config.Protocols.SetUnencryptedHTTP2(true)
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) take() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hits
	r.hits = nil
	return h
}

// TestGlobalFlags: the client flags (--addr, --token, --protocol, --timeout)
// may come before or after the command name, LLMDIAG_ADDR and LLMDIAG_TOKEN
// set their defaults, and a flag on the command line wins over them.
func TestGlobalFlags(t *testing.T) {
	want, other := newRecorder(t), newRecorder(t)
	a, b := want.URL, other.URL
	tests := []struct {
		name      string
		vars      map[string]string
		args      []string
		auth      string // Authorization the service must see
		jsonCodec bool   // connect-json: a JSON body
	}{
		{name: "before", args: []string{"--addr", a, "nodes"}},
		{name: "after", args: []string{"nodes", "--addr", a}},
		{name: "after the argument", args: []string{"diagnose", "n", "--addr", a}},
		{name: "before, with =", args: []string{"--addr=" + a, "diagnose", "n"}},
		{name: "environment", vars: map[string]string{"LLMDIAG_ADDR": a}, args: []string{"metrics", "n"}},
		{name: "flag before wins over environment", vars: map[string]string{"LLMDIAG_ADDR": b}, args: []string{"--addr", a, "nodes"}},
		{name: "flag after wins over environment", vars: map[string]string{"LLMDIAG_ADDR": b}, args: []string{"nodes", "--addr", a}},
		{name: "after wins over before", args: []string{"--addr", b, "nodes", "--addr", a}},
		{
			name: "token and protocol before", args: []string{"--token", "s3cret", "--protocol", "connect-json", "--addr", a, "diagnose", "n"},
			auth: "Bearer s3cret", jsonCodec: true,
		},
		{
			name: "token from the environment, address before", vars: map[string]string{"LLMDIAG_TOKEN": "from-env"},
			args: []string{"--addr", a, "compare", "--metric", "e2e"}, auth: "Bearer from-env",
		},
		{
			name: "token before wins over environment", vars: map[string]string{"LLMDIAG_TOKEN": "from-env"},
			args: []string{"--token", "s3cret", "--addr", a, "nodes"}, auth: "Bearer s3cret",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, err := clitest.Run(t, tc.vars, append(tc.args, "--timeout", "5s")...)
			if err == nil || cli.ExitCode(err) != 1 {
				t.Fatalf("err = %v (exit %d), want the service's refusal (exit 1)\n%s", err, cli.ExitCode(err), errOut)
			}
			if h := other.take(); len(h) != 0 {
				t.Errorf("the other address was asked: %v", h)
			}
			hits := want.take()
			if len(hits) == 0 {
				t.Fatalf("%s was not asked (err %v)", a, err)
			}
			h := hits[0]
			if !strings.HasPrefix(h.path, "/llmdiag.v1.") {
				t.Errorf("path %q, want an llmdiag RPC", h.path)
			}
			if h.auth != tc.auth {
				t.Errorf("Authorization %q, want %q", h.auth, tc.auth)
			}
			if got := strings.Contains(h.contentType, "json"); got != tc.jsonCodec {
				t.Errorf("Content-Type %q, want JSON %v", h.contentType, tc.jsonCodec)
			}
		})
	}
}

// TestGlobalFlagsHelp: --help says the client flags may come before the
// command, and names LLMDIAG_ADDR; each client command's help says so too.
func TestGlobalFlagsHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"before or after the command name", "LLMDIAG_ADDR", "wins over the environment", "-addr", "-token"}},
		{[]string{"diagnose", "--help"}, []string{"may also come before the command", "llmdiag --addr URL diagnose"}},
	} {
		_, errOut, err := clitest.Run(t, nil, c.args...)
		if cli.ExitCode(err) != 0 {
			t.Fatalf("%q: %v", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q help lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
}
