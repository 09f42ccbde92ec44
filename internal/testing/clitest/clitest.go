package clitest

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// Env is an environment for cli.Run: variables from vars (nil for none),
// standard output and error to out and errw.
func Env(vars map[string]string, out, errw *testkit.SyncBuffer) cli.Env {
	return cli.Env{Getenv: func(k string) string { return vars[k] }, Stdout: out, Stderr: errw}
}

// Run runs one command to completion, within 30 s, and returns its
// standard output, standard error and error.
func Run(t testing.TB, vars map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errw testkit.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cli.Run(ctx, args, Env(vars, &out, &errw))
	return out.String(), errw.String(), err
}

// Background starts a long-running command and returns its standard
// error. At cleanup it cancels the command and fails the test if the
// command returned an error or did not stop within 15 s.
func Background(t testing.TB, vars map[string]string, args ...string) *testkit.SyncBuffer {
	t.Helper()
	_, errw := Start(t, vars, args...)
	return errw
}

// Start is Background with a stop of its own: stop cancels the command
// and waits for it (failing the test as Background does), at once when
// the test calls it, else at cleanup; it does so once.
func Start(t testing.TB, vars map[string]string, args ...string) (stop func(), errw *testkit.SyncBuffer) {
	t.Helper()
	var out testkit.SyncBuffer
	errw = &testkit.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, args, Env(vars, &out, errw)) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: %v\n%s", args[0], err, errw.String())
				}
			case <-time.After(15 * time.Second):
				t.Errorf("%s did not stop within 15s of cancellation", args[0])
			}
		})
	}
	t.Cleanup(stop)
	return stop, errw
}

// WaitFor waits up to d for ok, polling every 100ms (ok may run a
// command), and logs *last[0], the last answer, when it times out.
func WaitFor(t testing.TB, what string, d time.Duration, ok func() bool, last ...*string) {
	t.Helper()
	w := testkit.Wait{For: d, Every: 100 * time.Millisecond}
	if len(last) > 0 {
		w.Last = func() string { return *last[0] }
	}
	w.Until(t, what, ok)
}

// AsLLMDiag, set to "1" in a child's environment, makes a test binary
// whose TestMain calls Main run as llmdiag (cmd/llmdiag's main: cli.Run on
// the process's arguments, environment, stdout and stderr) instead of
// running tests: a real llmdiag process without a build.
const AsLLMDiag = "CLI_TEST_RUN_AS_LLMDIAG"

// Sim starts `llmdiag sim --scenario scenario` until the test ends, waits,
// up to a minute, for it to write its fleet file to fleetOut, and returns
// the fleet it wrote.
func Sim(t testing.TB, scenario, fleetOut string) *fleet.File {
	t.Helper()
	Background(t, nil, "sim", "--scenario", scenario, "--fleet-out", fleetOut, "--log-level", "warn")
	WaitFor(t, "the fleet file", time.Minute, func() bool { _, err := os.Stat(fleetOut); return err == nil })
	f, err := fleet.Load(fleetOut)
	if err != nil {
		t.Fatalf("the simulator's fleet file: %v", err)
	}
	return f
}

// Main is a TestMain: it runs the tests, or, with AsLLMDiag=1 in the
// environment, runs llmdiag and exits with its exit code.
func Main(m *testing.M) {
	if os.Getenv(AsLLMDiag) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := cli.Run(ctx, os.Args[1:], cli.Env{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
		stop()
		if err != nil {
			os.Stderr.WriteString("llmdiag: " + err.Error() + "\n")
		}
		os.Exit(cli.ExitCode(err))
	}
	os.Exit(m.Run())
}

// Tokens of auth/testdata/tokens.yaml's kind that the end-to-end tests
// write into their own token files: a reader and an admin.
const (
	ReaderToken = "reader-token-0123456789abcdef"
	AdminToken  = "admin-token-0123456789abcdef"
)

// AuthPost sends a Connect JSON call with an empty message (what curl
// does), with token as a bearer token unless it is "", and returns the
// HTTP status, 0 when there is no answer.
func AuthPost(t testing.TB, url, token string) int {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return AuthDo(t, req)
}

// AuthGet sends a GET with token as a bearer token unless it is "", and
// returns the HTTP status, 0 when there is no answer.
func AuthGet(t testing.TB, url, token string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return AuthDo(t, req)
}

// AuthDo sends req within 5 s, discards the body and returns the HTTP
// status, 0 when there is no answer.
func AuthDo(t testing.TB, req *http.Request) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// WriteFile writes text to name in a temporary directory of t and returns
// its path.
func WriteFile(t testing.TB, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// RepoPath is the path of a file of the repository, elem relative to its
// root (the directory of go.mod above the test's working directory), e.g.
// RepoPath(t, "auth", "testdata", "tokens.yaml").
func RepoPath(t testing.TB, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(append([]string{dir}, elem...)...)
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("no go.mod above %s", dir)
		}
		dir = up
	}
}

// DocHolds fails t unless the repository's page (a path from its root)
// holds text as a fenced block opened with fence ("```", "```caddyfile"):
// how a test keeps a configuration a page shows the one it runs. what
// names the block in the failure, which shows the block to paste.
func DocHolds(t testing.TB, page, fence, text, what string) {
	t.Helper()
	b, err := os.ReadFile(RepoPath(t, strings.Split(page, "/")...))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), fence+"\n"+text+"```\n") {
		t.Errorf("%s does not hold %s; it should show:\n%s\n%s```", page, what, fence, text)
	}
}
