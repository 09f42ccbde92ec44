package redistest

import (
	"runtime"
	"syscall"
)

// startProcess starts proc.cmd so that the kernel kills it if the test
// binary dies without running its cleanups (Pdeathsig). Pdeathsig fires when
// the thread that forked exits, so the fork happens on a goroutine locked
// to its thread that stays there, reaping the child, until it has exited.
func startProcess(proc *process) error {
	proc.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := proc.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		proc.err = proc.cmd.Wait()
		close(proc.done)
	}()
	return <-started
}
