package diagnose

import (
	"math"
	"time"
)

// hold is one saturation condition (the queue, or the KV cache) read over
// the history with hysteresis: it turns on after the condition held at
// RoutingHold consecutive refreshes and off after it was absent at
// RoutingHold consecutive refreshes, so a one-refresh blip never flips it.
// The first refresh known sets the initial state (there is nothing earlier
// to hold), and so does the first after a gap longer than StaleAfter.
// Refreshes where the condition cannot be read neither extend nor end it,
// but while it cannot be read now the state is off: nothing is known now.
//
// An episode is one run of the state being on. Its length is the time the
// condition was seen to hold: from the first refresh of the run that turned
// it on to the last refresh at which it held (now, while it holds).
type hold struct {
	// on is the held state at the current refresh.
	on bool
	// now is the condition at the current refresh itself, before
	// hysteresis; known says whether it could be read.
	now, known bool
	// since is the first refresh of the current episode, seen is the last
	// refresh of it at which the condition held; set only while on.
	since, seen time.Time
	// streak counts the refreshes, up to now, at which the condition has
	// disagreed with the state: 0 when it agrees now.
	streak int

	// episodes counts the episodes in the history, the current one
	// included; longest is the longest of them.
	episodes int
	longest  time.Duration
	// last is the most recent episode that ended: its first and last
	// refreshes with the condition held, and the first refresh without.
	last struct {
		ok                   bool
		start, seen, drained time.Time
	}
}

// holdStep is one refresh as a hold reads it.
type holdStep struct {
	at        time.Time
	known, on bool
}

// readHold runs the hysteresis over steps, oldest first; the last step is
// the current refresh.
func readHold(steps []holdStep, t Thresholds) hold {
	n := max(t.RoutingHold, 1)
	var h hold
	var prev, streakStart time.Time
	started := false
	end := func(drained time.Time) {
		h.last.ok, h.last.start, h.last.seen, h.last.drained = true, h.since, h.seen, drained
		h.on = false
	}
	for i, s := range steps {
		if i == len(steps)-1 {
			h.known, h.now = s.known, s.known && s.on
		}
		if !s.known {
			continue
		}
		if started && sub(s.at, prev) > t.StaleAfter {
			// A gap: what was held before it says nothing now.
			if h.on {
				end(prev)
			}
			started = false
		}
		prev = s.at
		switch {
		case !started:
			started, h.on, h.streak = true, s.on, 0
			if s.on {
				h.since, h.seen = s.at, s.at
				h.episodes++
			}
		case s.on == h.on:
			h.streak = 0
			if s.on {
				h.seen = s.at
			}
		default:
			if h.streak == 0 {
				streakStart = s.at
			}
			if h.streak++; h.streak < n {
				break
			}
			h.streak = 0
			if h.on {
				end(streakStart)
			} else {
				h.on, h.since, h.seen = true, streakStart, s.at
				h.episodes++
			}
		}
		if h.on {
			h.longest = max(h.longest, sub(h.seen, h.since))
		}
	}
	if !h.known {
		h.on = false
	}
	return h
}

// sub is a.Sub(b) on the wall clock (a history's times carry no monotonic
// reading), without Sub's check for overflow when they are less than 2^33 s
// (some 272 years) apart: a diagnosis subtracts times some thousand times,
// and the check costs more than the subtraction.
func sub(a, b time.Time) time.Duration {
	if s := a.Unix() - b.Unix(); s > -1<<33 && s < 1<<33 {
		return time.Duration(s)*time.Second + time.Duration(a.Nanosecond()-b.Nanosecond())
	}
	return a.Sub(b)
}

// length is how long the current episode has lasted, up to now (a dip
// the hysteresis holds included); 0 when off.
func (h hold) length(now time.Time) time.Duration {
	if !h.on {
		return 0
	}
	return now.Sub(h.since)
}

// lastLength is how long the last episode that ended was seen.
func (h hold) lastLength() time.Duration { return h.last.seen.Sub(h.last.start) }

// dipping reports a state held on while the condition is absent now: the
// first refreshes of what may be the end of it.
func (h hold) dipping() bool { return h.on && h.known && !h.now }

// rising reports the condition present now while the state is still off:
// the first refreshes of what may be the start of it.
func (h hold) rising() bool { return !h.on && h.now }

// queueSaturated is the queue half of saturation: more waiting than
// QueueSaturated, with running at capacity when MaxRunning says what
// capacity is (an engine queues only what it cannot admit, so without
// MaxRunning a long queue is taken to mean the batch is full). Known when
// the queue is.
func (t Thresholds) queueSaturated(queue, running opt) (known, on bool) {
	if !queue.ok {
		return false, false
	}
	full := t.MaxRunning <= 0 || !running.ok || running.v >= t.MaxRunning
	return true, queue.v > t.QueueSaturated && full
}

// kvSaturated is the KV half: KV pressure at or above KVCrit.
func (t Thresholds) kvSaturated(kv opt) (known, on bool) {
	return kv.ok, kv.ok && kv.v >= t.KVCrit
}

// Pressure is how close the node's gauges in m are to saturation, the
// highest of queue ÷ QueueSaturated, KV pressure ÷ KVCrit and, when
// MaxRunning is configured, running ÷ MaxRunning (at most 1: running at
// capacity is full, not saturated). Unknown gauges do not count; with none
// known, or m nil, it is 0. It reads one refresh, with no hysteresis: the
// load score of a verdict is Pressure held as LoadScore says.
func Pressure(queue, running, kv *float64, t Thresholds) float64 {
	return pressure(known(queue), known(running), known(kv), t)
}

func pressure(queue, running, kv opt, t Thresholds) float64 {
	var p float64
	if queue.ok && t.QueueSaturated > 0 {
		p = math.Max(p, queue.v/t.QueueSaturated)
	}
	if kv.ok && t.KVCrit > 0 {
		p = math.Max(p, kv.v/t.KVCrit)
	}
	if running.ok && t.MaxRunning > 0 {
		p = math.Max(p, math.Min(running.v/t.MaxRunning, 1))
	}
	return p
}

// minSaturatedScore is the lowest load score of a saturated node: just above
// 1 at the score's resolution (three decimals).
const minSaturatedScore = 1.001

// loadScore is the verdict's load score: the pressure, at most 1 while the
// node is not saturated, and above 1 while it is: the highest pressure of
// the last RoutingHold refreshes (a dip the hysteresis holds keeps the
// score of the refresh before it), and at least minSaturatedScore.
func loadScore(saturated bool, recent []float64) float64 {
	if len(recent) == 0 {
		return 0
	}
	now := recent[len(recent)-1]
	if !saturated {
		return round3(math.Min(now, 1))
	}
	s := now
	for _, p := range recent {
		s = math.Max(s, p)
	}
	return round3(math.Max(s, minSaturatedScore))
}

// round3 rounds to three decimals, enough for a score and stable in JSON.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
