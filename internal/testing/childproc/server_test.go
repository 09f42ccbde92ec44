package childproc_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestPortsRetriesOnlyATakenPort: a start that fails because its port was
// taken is tried again on another; any other failure ends the attempts.
func TestPortsRetriesOnlyATakenPort(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      []string // what each failing run logs
		wantRuns  int
		wantError bool
	}{
		{name: "first port", wantRuns: 1},
		{name: "taken, then free", fail: []string{"bind: address already in use"}, wantRuns: 2},
		{name: "taken every time", fail: []string{"already in use", "already in use", "already in use"}, wantRuns: 3, wantError: true},
		{name: "another failure", fail: []string{"bad config"}, wantRuns: 1, wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srv childproc.Server
			runs, stops, next := 0, 0, 1000
			var ports []int
			port := 0
			msg := testkit.Fails(t, func(tb testing.TB) {
				port = childproc.Ports{
					Name:     "srv",
					Attempts: 3,
					Server:   &srv,
					Free:     func() (int, error) { next++; return next, nil },
					Run: func(port int) error {
						runs++
						ports = append(ports, port)
						if runs <= len(tc.fail) {
							srv.Logs.Write([]byte(tc.fail[runs-1] + "\n"))
							return errors.New("failed")
						}
						return nil
					},
					Stop:  func() { stops++ },
					About: func() string { return "about" },
				}.Start(tb)
			})
			if runs != tc.wantRuns || stops != min(len(tc.fail), tc.wantRuns) || (msg != "") != tc.wantError {
				t.Fatalf("runs %d, stops %d, failure %q; want %d runs, a stop per failure, a failure %v", runs, stops, msg, tc.wantRuns, tc.wantError)
			}
			if msg == "" && port != ports[len(ports)-1] {
				t.Fatalf("port %d, want the last one run on (%v)", port, ports)
			}
			if tc.wantError && !strings.HasPrefix(msg, "srv: start: failed") {
				t.Fatalf("failure %q, want it to name the server and the error", msg)
			}
		})
	}
}

func TestReady(t *testing.T) {
	run := func(t *testing.T, cmd string) *childproc.Proc {
		p, err := childproc.Start(exec.Command("sh", "-c", cmd))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(syscall.SIGKILL, 5*time.Second) })
		return p
	}
	checks := 0
	r := childproc.Ready{Name: "srv", Addr: "127.0.0.1:1", Timeout: time.Minute, Every: time.Millisecond,
		Check: func(context.Context) error {
			if checks++; checks < 3 {
				return errors.New("not yet")
			}
			return nil
		}}
	if err := r.Wait(run(t, "sleep 60")); err != nil || checks != 3 {
		t.Fatalf("Wait = %v after %d checks, want ready on the third", err, checks)
	}
	r.Check = func(context.Context) error { return errors.New("refused") }
	if err := r.Wait(run(t, "exit 3")); err == nil || !strings.Contains(err.Error(), "srv exited before it was ready: exit status 3") {
		t.Fatalf("Wait on an exiting server = %v", err)
	}
	r.Timeout = 50 * time.Millisecond
	if err := r.Wait(run(t, "sleep 60")); err == nil || !strings.Contains(err.Error(), "srv not ready on 127.0.0.1:1 after 50ms: refused") {
		t.Fatalf("Wait past the timeout = %v", err)
	}
}

// TestServer: one process at a time, stopped by pid, its output kept
// across starts.
func TestServer(t *testing.T) {
	var s childproc.Server
	if s.Running() || s.Proc() != nil {
		t.Fatal("a new Server runs")
	}
	p, err := s.Launch(exec.Command("sh", "-c", "echo first; exec sleep 60"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Launch(exec.Command("true")); err == nil {
		t.Fatal("a second Launch while running succeeded")
	}
	if !s.Running() || s.Proc() != p {
		t.Fatal("the launched process is not the running one")
	}
	testkit.Eventually(t, time.Minute, "the first output", func() bool { return s.Logs.Len() > 0 })
	s.Stop(syscall.SIGTERM)
	s.Stop(syscall.SIGTERM)
	if s.Running() || !p.Exited() {
		t.Fatal("Stop left the process running")
	}
	if _, err := s.Launch(exec.Command("sh", "-c", "echo second")); err != nil {
		t.Fatal(err)
	}
	<-s.Proc().Done()
	if got := s.Logs.String(); got != "first\nsecond\n" {
		t.Fatalf("Logs = %q, want both starts' output", got)
	}
	if s.Running() {
		t.Fatal("an exited process is running")
	}
}
