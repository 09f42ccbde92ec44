package childproc

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Ports starts a server on a free loopback port, and on another when the
// one it picked was taken before the server could bind it.
type Ports struct {
	// Attempts bounds the ports tried (at least one).
	Attempts int
	// Logs is the server's output: a start is tried again only when it
	// says, since the start, that the port was "already in use".
	Logs *LogTail
	// Free picks a port; nil means FreePort.
	Free func() (int, error)
	// Run starts the server on port and waits until it is ready; Stop
	// stops it after a Run that failed.
	Run  func(port int) error
	Stop func()
}

// Start runs the server on a free port and returns that port, or the last
// start's error.
func (p Ports) Start() (int, error) {
	free := p.Free
	if free == nil {
		free = FreePort
	}
	var err error
	for range max(p.Attempts, 1) {
		port, ferr := free()
		if ferr != nil {
			return 0, ferr
		}
		mark := p.Logs.Len()
		if err = p.Run(port); err == nil {
			return port, nil
		}
		p.Stop()
		if !p.Logs.ContainsSince(mark, "already in use") {
			break
		}
	}
	return 0, err
}

// Ready waits for a started server to be ready.
type Ready struct {
	// Name and Addr name the server in errors.
	Name, Addr string
	// Timeout bounds the wait; Every paces the checks.
	Timeout, Every time.Duration
	// Check reports whether the server is ready (nil) or why not.
	Check func(ctx context.Context) error
}

// Wait checks until the server is ready, and fails when proc exits first
// or Timeout passes, naming the last check's error.
func (r Ready) Wait(proc *Proc) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
	defer cancel()
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
		case <-time.After(r.Every):
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
