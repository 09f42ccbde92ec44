package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Program is a real program a test runs (a server such as prometheus, or
// a tool such as grpcurl): where to look for it and how to get it.
type Program struct {
	// Name is what messages call the program, e.g. "prometheus".
	Name string
	// Env, when set, names the environment variable whose value, when
	// set, is the program's path; nothing else is then looked at.
	Env string
	// Candidates are tried in order: a bare name is looked up on PATH, a
	// path is taken when it is an executable file. Empty means Name on
	// PATH.
	Candidates []string
	// Get says how to install the program besides `make deps`, e.g.
	// "apt-get install -y prometheus".
	Get string
}

// Binary returns the path of p for a test that runs it. Under -short it
// skips the test, saying so ("-short: skips tests that run a real
// prometheus"); when p is missing it fails the test (never skips) saying
// how to get it: a test of a real part must not pass by not running.
func Binary(t testing.TB, p Program) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: skips tests that run a real %s", p.Name)
	}
	path, err := p.Find()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return path
}

// Find looks p up as Binary does, without skipping or failing; the error
// says how to get p.
func (p Program) Find() (string, error) {
	if p.Env != "" {
		if v := os.Getenv(p.Env); v != "" {
			if executable(v) {
				return v, nil
			}
			return "", fmt.Errorf("%s=%s is not an executable file: %s", p.Env, v, p.hint())
		}
	}
	candidates := p.Candidates
	if len(candidates) == 0 {
		candidates = []string{p.Name}
	}
	var tried []string
	for _, c := range candidates {
		if !strings.ContainsRune(c, filepath.Separator) {
			if path, err := exec.LookPath(c); err == nil {
				return path, nil
			}
			tried = append(tried, c+" on PATH")
			continue
		}
		if executable(c) {
			return c, nil
		}
		tried = append(tried, c)
	}
	return "", fmt.Errorf("%s not found (looked for %s): %s", p.Name, strings.Join(tried, ", "), p.hint())
}

// hint says how to get p.
func (p Program) hint() string {
	ways := []string{"run `make deps`"}
	if p.Get != "" {
		ways = append(ways, p.Get)
	}
	if p.Env != "" {
		ways = append(ways, "set "+p.Env+" to a "+p.Name+" binary")
	}
	if len(ways) == 1 {
		return ways[0]
	}
	return strings.Join(ways[:len(ways)-1], ", ") + " or " + ways[len(ways)-1]
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// BuildLLMDiag builds the llmdiag binary into a temporary directory, with
// the race detector when race (the calling test's build has it: its
// packages are then already compiled so).
func BuildLLMDiag(t testing.TB, race bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "llmdiag")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(args, "github.com/llmdiag/llmdiag/cmd/llmdiag")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
