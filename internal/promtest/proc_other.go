//go:build !linux

package promtest

import (
	"os"
	"syscall"
)

// startProcess starts proc.cmd and reaps it in the background.
func startProcess(proc *process) error {
	if err := proc.cmd.Start(); err != nil {
		return err
	}
	go func() {
		proc.err = proc.cmd.Wait()
		close(proc.done)
	}()
	return nil
}

// terminate asks the process to shut down cleanly.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
