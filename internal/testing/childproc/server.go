package childproc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Ports starts a server for a test on a free loopback port, and on
// another when the one it picked was taken before the server could bind
// it.
type Ports struct {
	// Name starts the failure message, e.g. "promtest: prometheus".
	Name string
	// Attempts bounds the ports tried; 0 means 3.
	Attempts int
	// Server is the server's; a start is tried again only when its output
	// says, since the start, that the port was "already in use".
	Server *Server
	// Free picks a port; nil means FreePort.
	Free func() (int, error)
	// Run starts the server on port and waits until it is ready; Stop
	// stops it, after a Run that failed and when the test ends.
	Run  func(port int) error
	Stop func()
	// About says, when the test has failed, where the server listened
	// and how it was configured; its output follows.
	About func() string
}

// Start starts the server and returns its port. When t ends the server
// is stopped and, if t failed, About and its output are logged. t fails
// when the server does not come up.
func (p Ports) Start(t testing.TB) int {
	t.Helper()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s: %s\n--- output ---\n%s", p.Name, p.About(), &p.Server.Logs)
		}
	})
	free := p.Free
	if free == nil {
		free = FreePort
	}
	var err error
	attempts := p.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	for range attempts {
		port, ferr := free()
		if ferr != nil {
			t.Fatalf("%s: %v", p.Name, ferr)
		}
		mark := p.Server.Logs.Len()
		if err = p.Run(port); err == nil {
			return port
		}
		p.Stop()
		if !p.Server.Logs.ContainsSince(mark, "already in use") {
			break
		}
	}
	t.Fatalf("%s: start: %v (its output is logged below)", p.Name, err)
	return 0
}

// Ready waits for a started server to be ready.
type Ready struct {
	// Name and Addr name the server in errors.
	Name, Addr string
	// Timeout bounds the wait; Every paces the checks (0 means 100ms).
	Timeout, Every time.Duration
	// Check reports whether the server is ready (nil) or why not.
	Check func(ctx context.Context) error
}

// Wait checks until the server is ready, and fails when proc exits first
// or Timeout passes, naming the last check's error.
func (r Ready) Wait(proc *Proc) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
	defer cancel()
	every := r.Every
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	for {
		last := r.Check(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("%s exited before it was ready: %v", r.Name, proc.Err())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready on %s after %v: %v", r.Name, r.Addr, r.Timeout, last)
		case <-time.After(every):
		}
	}
}

// HTTPReady is a Ready check: GET url answers 200 OK within a second.
func HTTPReady(c *http.Client, url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// Server is a real server a test runs as a child process, one process at
// a time: it can be stopped and started again, and its output is kept
// across starts. Safe for concurrent use.
type Server struct {
	// Logs keeps the end of the output of every start.
	Logs LogTail

	mu   sync.Mutex
	proc *Proc // nil while stopped
}

// Launch starts cmd, its output going to Logs, unless a process runs.
func (s *Server) Launch(cmd *exec.Cmd) (*Proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil, errors.New("already running")
	}
	cmd.Stdout, cmd.Stderr = &s.Logs, &s.Logs
	cmd.WaitDelay = 5 * time.Second // bounds the output copy after exit
	proc, err := Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", cmd.Path, err)
	}
	s.proc = proc
	return proc, nil
}

// Proc is the process started last, or nil once stopped.
func (s *Server) Proc() *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// Running reports whether a process was started, not stopped, and has not
// exited.
func (s *Server) Running() bool {
	p := s.Proc()
	return p != nil && !p.Exited()
}

// StopTimeout is how long Server.Stop waits for the process to exit after
// its signal, and then after SIGKILL.
const StopTimeout = 10 * time.Second

// Stop sends sig to the process, kills it if it has not exited within
// StopTimeout, and reaps it. Stopping a stopped server does nothing.
func (s *Server) Stop(sig syscall.Signal) {
	s.mu.Lock()
	proc := s.proc
	s.proc = nil
	s.mu.Unlock()
	if proc != nil {
		proc.Stop(sig, StopTimeout)
	}
}
