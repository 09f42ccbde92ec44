//go:build !linux

package redistest

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
