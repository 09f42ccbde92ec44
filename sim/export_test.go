package sim

// NotifyInjected makes f send on ch each time a completion request joins
// the simulation, so a test can wait for it before stepping time.
func NotifyInjected(f *Fleet, ch chan struct{}) { f.injected = ch }
