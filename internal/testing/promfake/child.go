package promfake

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
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
	return childproc.StartTest(tb, childproc.TestChild{Name: "promfake", Test: test, Env: childEnv, Spec: spec,
		Prefix: urlPrefix, Start: childStartTimeout, Stop: childStopTimeout})
}

// ServeChild is the body of the Test function StartChild names: in the
// test binary StartChild runs, it reads a Spec from stdin, serves it on
// loopback (Synth, at each query's time), prints its URL and serves until
// stdin is closed. Anywhere else it skips the test.
func ServeChild(t *testing.T) {
	var spec Spec
	wait := childproc.ServeTest(t, childEnv, "serves a fake Prometheus for promfake.StartChild only", &spec)
	synth := NewSynth(spec.Queries, spec.Nodes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &Server{synth: synth, missing: EmptyVector}, ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("%shttp://%s\n", urlPrefix, ln.Addr())
	wait()
	srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Error(err)
	}
}
