package childproc

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChild is a child process that is the test binary itself, run again
// for one Test function (Test) that serves something (a fake Prometheus,
// an exposition farm) while the parent measures: the parent's CPU then
// counts only its own work.
type TestChild struct {
	// Name starts every failure message ("promfake", "expofarm").
	Name string
	// Test is the Test function the child runs (-test.run=^Test$); Env is
	// set to 1 in its environment, so that the function serves rather than
	// skips (ServeTest).
	Test, Env string
	// Spec is written to the child's stdin as JSON.
	Spec any
	// Prefix starts the stdout line on which the child says it serves;
	// MaxLine bounds that line (default 64 KiB).
	Prefix  string
	MaxLine int
	// Start bounds the wait for that line; Stop the wait for the child to
	// end once its stdin is closed, before it is sent SIGTERM by pid.
	Start, Stop time.Duration
}

// StartTest runs c and returns what follows c.Prefix on the child's line.
// The child dies with this process (Start) and is stopped when tb ends:
// its stdin is closed (ServeTest returns), then it is signalled by pid.
// A child that ends or stays silent fails tb, quoting the end of its
// stderr.
func StartTest(tb testing.TB, c TestChild) string {
	tb.Helper()
	if c.MaxLine <= 0 {
		c.MaxLine = 64 << 10
	}
	exe, err := os.Executable()
	if err != nil {
		tb.Fatalf("%s: %v", c.Name, err)
	}
	cmd := exec.Command(exe, "-test.run=^"+c.Test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), c.Env+"=1")
	var logs LogTail
	cmd.Stderr = &logs
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatalf("%s: %v", c.Name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("%s: %v", c.Name, err)
	}
	proc, err := Start(cmd)
	if err != nil {
		tb.Fatalf("%s: start child: %v", c.Name, err)
	}
	tb.Cleanup(func() {
		stdin.Close() // the child's signal to stop
		select {
		case <-proc.Done():
		case <-time.After(c.Stop):
			proc.Stop(syscall.SIGTERM, c.Stop)
		}
	})
	go func() {
		// stdin is closed by the cleanup; an error here shows as the child
		// never saying it serves.
		_ = json.NewEncoder(stdin).Encode(c.Spec)
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, min(c.MaxLine, 64<<10)), c.MaxLine)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), c.Prefix); ok {
				found <- rest
				break
			}
		}
		close(found)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case rest, ok := <-found:
		if !ok {
			<-proc.Done()
			tb.Fatalf("%s: the child ended without serving (%v): %s", c.Name, proc.Err(), logs.String())
		}
		return rest
	case <-time.After(c.Start):
		tb.Fatalf("%s: the child did not serve within %s: %s", c.Name, c.Start, logs.String())
	}
	return ""
}

// ServeTest is the start of the Test function a TestChild runs: unless env
// is set it skips t (saying why), else it reads the parent's spec from
// stdin into spec. Once the child serves and has printed its line, wait
// returns when the parent closes stdin (or dies).
func ServeTest(t *testing.T, env, why string, spec any) (wait func()) {
	t.Helper()
	if os.Getenv(env) == "" {
		t.Skip(why)
	}
	in := bufio.NewReader(os.Stdin)
	if err := json.NewDecoder(in).Decode(spec); err != nil {
		t.Fatalf("read spec: %v", err)
	}
	return func() { _, _ = io.Copy(io.Discard, in) }
}
