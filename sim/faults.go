package sim

import (
	"fmt"
	"math"
	"time"
)

// SetSlowdown makes a node's engine factor times slower from the current
// simulated instant on: every step's fixed cost, per-sequence compute and
// context reads, prefill attention and a speculative draft pass take factor
// times as long, and prefill computes factor times fewer tokens a second,
// as on GPUs held at a fraction of their clocks and memory bandwidth, so
// that the node decodes at 1/factor of its own speed (and of its peers',
// when they are alike). Capacity (batch slots, KV) is unchanged: the node
// serves the same batches, slower. The iteration in flight keeps its end;
// the next ones run at the new speed. Factor 1 restores the node's own
// speed. Unlike GPUFault's throttle, nothing in the DCGM exporter says
// why: the slowdown shows only in the engine's speed. Factor must be
// finite and at least 1.
func (f *Fleet) SetSlowdown(id string, factor float64) error {
	n, err := f.node(id)
	if err != nil {
		return err
	}
	if !(factor >= 1) || math.IsInf(factor, 0) {
		return fmt.Errorf("slowdown %v: want a finite factor ≥ 1", factor)
	}
	f.mu.Lock() // no Step in flight; taken before the node's, as Step does
	defer f.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.cores {
		c.perf = slowed(c.base, factor)
		if c.spec != nil {
			c.spec.draft = c.baseDraft * factor
		}
	}
	return nil
}

// slowed is p with every time factor times longer and prefill factor
// times slower.
func slowed(p Perf, factor float64) Perf {
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * factor) }
	p.StepBase = scale(p.StepBase)
	p.StepPerSeq = scale(p.StepPerSeq)
	p.StepPerKContext = scale(p.StepPerKContext)
	p.PrefillPerKContext = scale(p.PrefillPerKContext)
	p.PrefillTokensPerSec /= factor
	return p
}

// SetHang hangs a node's engine from the current simulated instant on, as
// a Hang window without end does (the stalled scenario): the iteration
// under way never ends and none starts, so no token is sampled and no
// request finishes or gives up; every counter and histogram stands still
// while /metrics (and /health) keep answering, its gauges showing the
// batch that was running still running and the queue growing with every
// request received. With false it clears a previous SetHang: an
// iteration held by it ends now and the engine goes on (scheduled Hang
// windows still apply).
func (f *Fleet) SetHang(id string, hang bool) error {
	n, err := f.node(id)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hung == hang {
		return nil
	}
	n.hung = hang
	if hang {
		return nil
	}
	t := f.now.Seconds()
	until, hung := n.hungAt(t)
	if !hung {
		until = t
	}
	for _, g := range n.groups {
		if g.busy && math.IsInf(g.end, 1) && until < g.end {
			g.end = until
		}
	}
	return nil
}
