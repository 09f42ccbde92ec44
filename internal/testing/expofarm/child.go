package expofarm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
)

// childEnv set makes ServeChild serve instead of skipping.
const childEnv = "LLMDIAG_EXPOFARM_CHILD"

// readyPrefix starts the line on which the child tells where it serves.
const readyPrefix = "expofarm-ready: "

const (
	childStartTimeout = time.Minute
	childStopTimeout  = 10 * time.Second
	// maxReadyLine bounds the line the child tells its URLs on.
	maxReadyLine = 64 * MaxNodes
)

// Spec is what a child serves: a farm of the seed body with Steps.
type Spec struct {
	Nodes     int   `json:"nodes"`
	Listeners int   `json:"listeners"`
	Steps     Steps `json:"steps"`
}

// ChildStats are what a child has done so far.
type ChildStats struct {
	Stats
	// CPU is the child's CPU time (user and system, every thread).
	CPU time.Duration `json:"cpu"`
}

// ready is what the child tells once it serves.
type ready struct {
	URLs  []string `json:"urls"`
	Stats string   `json:"stats"`
}

// Child is a farm served by a child process.
type Child struct {
	// URLs are the endpoints, node i's at index i.
	URLs     []string
	statsURL string
	client   *http.Client
}

// Stats asks the child for its counts and CPU time so far.
func (c *Child) Stats(ctx context.Context) (ChildStats, error) {
	var st ChildStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.statsURL, nil)
	if err != nil {
		return st, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return st, fmt.Errorf("expofarm child stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("expofarm child stats: HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<10)).Decode(&st); err != nil {
		return st, fmt.Errorf("expofarm child stats: %w", err)
	}
	return st, nil
}

// StartChild runs the test binary again as a child process that serves
// spec's farm (see ServeChild) on loopback, and returns it once it serves.
// test names the Test function that calls ServeChild. The child dies with
// this process (internal/testing/childproc) and is stopped when the test ends: its
// stdin is closed, then it is signalled by pid.
func StartChild(tb testing.TB, test string, spec Spec) *Child {
	tb.Helper()
	line := childproc.StartTest(tb, childproc.TestChild{Name: "expofarm", Test: test, Env: childEnv, Spec: spec,
		Prefix: readyPrefix, MaxLine: maxReadyLine, Start: childStartTimeout, Stop: childStopTimeout})
	var r ready
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		tb.Fatalf("expofarm: the child's ready line: %v", err)
	}
	tr := &http.Transport{MaxIdleConns: 1}
	tb.Cleanup(tr.CloseIdleConnections)
	return &Child{URLs: r.URLs, statsURL: r.Stats, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// ServeChild is the body of the Test function StartChild names: in the
// test binary StartChild runs, it reads a Spec from stdin, serves its farm
// on loopback and its stats (ChildStats as JSON) on a listener of their
// own, tells its URLs and serves until stdin is closed. Anywhere else it
// skips the test.
func ServeChild(t *testing.T) {
	var spec Spec
	wait := childproc.ServeTest(t, childEnv, "serves an exposition farm for expofarm.StartChild only", &spec)
	cfg := Config{Nodes: spec.Nodes, Listeners: spec.Listeners}
	if spec.Steps != (Steps{}) {
		cfg.Schedule = spec.Steps
	}
	farm, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := farm.Start(); err != nil {
		t.Fatal(err)
	}
	defer farm.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stats := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ChildStats{Stats: farm.Stats(), CPU: CPUTime()})
	})}
	served := make(chan error, 1)
	go func() { served <- stats.Serve(ln) }()
	var line bytes.Buffer
	if err := json.NewEncoder(&line).Encode(ready{URLs: farm.URLs(), Stats: "http://" + ln.Addr().String() + "/stats"}); err != nil {
		t.Fatal(err)
	}
	fmt.Print(readyPrefix + line.String())
	wait()
	stats.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Error(err)
	}
}
