package childproc

import (
	"os/exec"
	"syscall"
	"time"
)

// Proc is a started child process.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // Wait's result; read after done
}

// Start starts cmd and reaps it in the background.
func Start(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	if err := start(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process exited; valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends sig, waits up to timeout for the process to exit, then kills
// it and waits up to timeout again (a command's WaitDelay bounds its Wait
// after a kill; without one, a grandchild holding its output could keep it
// from being reaped).
func (p *Proc) Stop(sig syscall.Signal, timeout time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return
	case <-time.After(timeout):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(timeout):
	}
}

// wait reaps the process.
func (p *Proc) wait() {
	p.err = p.cmd.Wait()
	close(p.done)
}
