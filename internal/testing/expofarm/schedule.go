package expofarm

import (
	"fmt"
	"time"
)

// Gauges are a node's routing gauges, summed over its engine cores
// (Waiting, Running) or the same on every core (KVUsage, 0..1), as
// engine.Extract reads them (Queue, Running, KVUsage).
type Gauges struct {
	Waiting int     `json:"waiting"`
	Running int     `json:"running"`
	KVUsage float64 `json:"kv_usage"`
}

// Schedule says what a node's gauges are at an instant. It must be safe
// for concurrent use and cheap: every request calls it.
type Schedule interface {
	Gauges(node int, at time.Time) Gauges
}

// Steps is a Schedule of square waves: node i's gauges are High for the
// first half of each Period and Low for the second, its periods starting
// i·Stagger (mod Period) after the Unix epoch's.
type Steps struct {
	Period  time.Duration `json:"period"`
	Stagger time.Duration `json:"stagger"`
	Low     Gauges        `json:"low"`
	High    Gauges        `json:"high"`
}

// Validate says what is wrong with s, naming the field.
func (s Steps) Validate() error {
	switch {
	case s.Period < 2*time.Millisecond:
		return fmt.Errorf("steps: period %s: at least 2ms", s.Period)
	case s.Period > time.Hour:
		return fmt.Errorf("steps: period %s: at most 1h", s.Period)
	case s.Stagger < 0:
		return fmt.Errorf("steps: stagger %s: negative", s.Stagger)
	}
	for _, g := range []struct {
		name string
		g    Gauges
	}{{"low", s.Low}, {"high", s.High}} {
		if err := g.g.validate(); err != nil {
			return fmt.Errorf("steps: %s: %w", g.name, err)
		}
	}
	return nil
}

// maxRequests bounds Waiting and Running: they are rendered into a
// fixed-size buffer.
const maxRequests = 1 << 20

func (g Gauges) validate() error {
	switch {
	case g.Waiting < 0 || g.Waiting > maxRequests:
		return fmt.Errorf("waiting %d: want 0..%d", g.Waiting, maxRequests)
	case g.Running < 0 || g.Running > maxRequests:
		return fmt.Errorf("running %d: want 0..%d", g.Running, maxRequests)
	case !(g.KVUsage >= 0 && g.KVUsage <= 1):
		return fmt.Errorf("kv_usage %v: want 0..1", g.KVUsage)
	}
	return nil
}

// offset is how far into its current period node is at at. node is at
// most MaxNodes and Period at most 1h (Validate): node·Stagger mod Period
// fits in an int64.
func (s Steps) offset(node int, at time.Time) time.Duration {
	p := int64(s.Period)
	shift := (int64(node) % p) * (int64(s.Stagger) % p) % p
	off := (at.UnixNano() - shift) % p
	if off < 0 {
		off += p
	}
	return time.Duration(off)
}

// Gauges implements Schedule.
func (s Steps) Gauges(node int, at time.Time) Gauges {
	if s.offset(node, at) < s.Period/2 {
		return s.High
	}
	return s.Low
}

// LastChange is the last instant at or before at when node's gauges
// changed (to what Gauges(node, at) says).
func (s Steps) LastChange(node int, at time.Time) time.Time {
	off := s.offset(node, at)
	if off >= s.Period/2 {
		off -= s.Period / 2
	}
	return at.Add(-off)
}
