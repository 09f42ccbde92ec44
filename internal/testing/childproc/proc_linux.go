package childproc

import (
	"runtime"
	"syscall"
)

// start starts p.cmd so that the kernel kills it if the test binary dies
// without running its cleanups (a -timeout panic, a SIGKILL): Pdeathsig.
// Pdeathsig fires when the *thread* that forked exits, so the fork happens
// on a goroutine locked to its thread that stays there, reaping the child,
// until the child has exited.
func start(p *Proc) error {
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.wait()
	}()
	return <-started
}
