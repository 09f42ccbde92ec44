//go:build !linux

package childproc

// start starts p.cmd and reaps it in the background.
func start(p *Proc) error {
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go p.wait()
	return nil
}
