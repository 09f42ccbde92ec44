package promfake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/childproc"
)

// childEnv set makes ServeChild serve instead of skipping.
const childEnv = "LLMDIAG_PROMFAKE_CHILD"

// urlPrefix starts the line on which the child tells its URL.
const urlPrefix = "promfake-url: "

const (
	childStartTimeout = 2 * time.Minute // making 100 MB of answers takes a while on a loaded machine
	childStopTimeout  = 10 * time.Second
)

// Spec is what a child serves: Synth's answers of Queries for Nodes.
type Spec struct {
	Queries []Query
	Nodes   []Node
}

// StartChild runs the test binary again as a child process that serves
// spec (see ServeChild) on loopback, and returns its URL once it serves.
// test names the Test function that calls ServeChild. The child is stopped
// when the test ends: its stdin is closed, then it is signalled by pid.
func StartChild(tb testing.TB, test string, spec Spec) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatalf("promfake: %v", err)
	}
	cmd := exec.Command(exe, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatalf("promfake: %v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("promfake: %v", err)
	}
	proc, err := childproc.Start(cmd)
	if err != nil {
		tb.Fatalf("promfake: start child: %v", err)
	}
	tb.Cleanup(func() {
		stdin.Close() // the child's signal to stop
		select {
		case <-proc.Done():
		case <-time.After(childStopTimeout):
			proc.Stop(syscall.SIGTERM, childStopTimeout)
		}
	})
	go func() {
		// stdin is closed by the cleanup; an error here shows as the child
		// never telling its URL.
		_ = json.NewEncoder(stdin).Encode(spec)
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), urlPrefix); ok {
				found <- u
				break
			}
		}
		close(found)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			<-proc.Done()
			tb.Fatalf("promfake: the child ended without serving (%v): %s", proc.Err(), logs.Bytes())
		}
		return u
	case <-time.After(childStartTimeout):
		tb.Fatalf("promfake: the child did not serve within %s", childStartTimeout)
	}
	return ""
}

// ServeChild is the body of the Test function StartChild names: in the
// test binary StartChild runs, it reads a Spec from stdin, serves it on
// loopback (Synth, at each query's time), prints its URL and serves until
// stdin is closed. Anywhere else it skips the test.
func ServeChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("serves a fake Prometheus for promfake.StartChild only")
	}
	in := bufio.NewReader(os.Stdin)
	var spec Spec
	if err := json.NewDecoder(in).Decode(&spec); err != nil {
		t.Fatalf("read spec: %v", err)
	}
	synth := NewSynth(spec.Queries, spec.Nodes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &Server{synth: synth, missing: EmptyVector}, ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("%shttp://%s\n", urlPrefix, ln.Addr())
	// Until the parent closes stdin (or dies).
	_, _ = io.Copy(io.Discard, in)
	srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Error(err)
	}
}
