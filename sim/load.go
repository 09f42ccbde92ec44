package sim

import (
	"errors"
	"fmt"
	"math"
)

// ErrClosedLoop is returned by SetRate for a node whose traffic comes from
// closed-loop sessions (Workload.Sessions, or those of the current Phase):
// it has no arrival rate to set.
var ErrClosedLoop = errors.New("node has closed-loop traffic")

// SetRate changes a node's open-loop arrival rate (Workload.Rate, requests
// per simulated second) from the current simulated instant on; a Burst
// keeps multiplying the new rate. Arrivals are Poisson, hence memoryless,
// so redrawing the next arrival from now is exact: the simulation after
// SetRate is the one a Config with a piecewise-constant rate would give.
// It lets a test drive a node into overload and back at run time; the
// node's next Phase, if any, replaces the rate set here.
func (f *Fleet) SetRate(id string, rate float64) error {
	n, err := f.node(id)
	if err != nil {
		return err
	}
	if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
		return fmt.Errorf("rate %v: want a finite rate ≥ 0", rate)
	}
	f.mu.Lock() // no Step in flight; taken before the node's, as Step does
	defer f.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg.Workload.Sessions > 0 {
		return fmt.Errorf("set rate of %s: %w", id, ErrClosedLoop)
	}
	n.cfg.Workload.Rate = rate
	n.setPeak()
	n.poisson = n.nextArrival(f.now.Seconds())
	n.setArrival()
	return nil
}
