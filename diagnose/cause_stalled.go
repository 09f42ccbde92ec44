package diagnose

import (
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// STALLED: requests running or waiting while the engine makes no progress.
// /metrics answers (the process is up, unlike TARGET_DOWN), yet the
// progress counters (NodeMetrics.progress: prompt and generation tokens,
// finished requests, first-token and inter-token counts) read the same at
// StalledRefreshes refreshes in a row, each with work pending. An idle node
// (nothing running, nothing waiting) has nothing to progress and is never
// STALLED; neither is a node whose running reads 0 with nothing waiting.
// A node whose running reads 0 while requests wait is, when the counters
// are flat: a scheduler that admits nothing is as stuck as one that runs
// nothing.
//
// Like TARGET_DOWN it is decided before the rules weigh the load (Diagnose
// calls stalled first): a hung engine's queue grows and its latency
// climbs, which the load rules would otherwise read as OVERLOADED or a
// BURST. It is CRIT and never routable (Diagnose): requests sent to it
// wait without end. The counters must stay flat for StalledMinFor at
// least, whatever the refresh interval: a long prefill step emits no token
// until it ends. Where the engine counts only whole requests (no
// inter-token histogram), they must also stay flat for
// StalledRequestCountersFor: one long generation leaves them flat.

// stall is what the refreshes say about the engine's progress.
type stall struct {
	// known: the progress odometer and when it took its value are known.
	known bool
	// refreshes is the trailing run of refreshes, the current one
	// included, that read the current progress with work pending (queue
	// or running above 0); 0 when nothing is pending now.
	refreshes int
	// flat is how long the progress has read its value: from the first of
	// those refreshes to now.
	flat time.Duration
	// perToken: the engine counts its work token by token (it exposes an
	// inter-token histogram), so a flat odometer means no step completed.
	perToken bool
	// on: the node is STALLED.
	on bool
}

// pending reports requests running or waiting; false when neither is known.
func pending(queue, running opt) bool {
	return (queue.ok && queue.v > 0) || (running.ok && running.v > 0)
}

// readStall reads the stall from the current metrics and the history: the
// refreshes since progress_since, counted back from now while each has
// work pending.
func (f *facts) readStall(points []Point) stall {
	m, t := f.m, f.t
	var s stall
	if m.Progress == nil || m.GetProgressSince() == nil || m.GetObservedAt() == nil {
		return s
	}
	s.known = true
	s.perToken = m.GetInterToken() != nil
	if !pending(f.queue, f.running) {
		return s
	}
	now := m.GetObservedAt().AsTime()
	// History points keep their time to the millisecond (refresh.PointOf).
	since := m.GetProgressSince().AsTime().Truncate(time.Millisecond)
	s.refreshes, s.flat = 1, now.Sub(since)
	for i := len(points) - 1; i >= 0; i-- {
		pt := points[i]
		if !pt.At.Before(now) {
			continue // the current refresh itself
		}
		if pt.At.Before(since) || !pt.Up || !pending(known(pt.Queue), known(pt.Running)) {
			break
		}
		s.refreshes++
	}
	s.on = s.refreshes >= max(t.StalledRefreshes, 2) && s.flat >= t.StalledMinFor &&
		(s.perToken || s.flat >= t.StalledRequestCountersFor)
	return s
}

// stalledCause weighs a STALLED verdict: a hung engine accounts for every
// symptom (the queue grows, every latency climbs, the rates fall).
var stalledCause = cause{
	id:       llmdiagv1.Cause_CAUSE_STALLED,
	name:     causeNameStalled,
	explains: explainsEverything,
}

// stalled is the STALLED verdict, or false when the node is not stalled.
func (f *facts) stalled(p printer, findings []*llmdiagv1.Finding) (verdict, bool) {
	s := f.stall
	if !s.on {
		return verdict{}, false
	}
	flat := p.seconds(s.flat.Seconds())
	v := verdict{cause: llmdiagv1.Cause_CAUSE_STALLED, status: statusCrit, confidence: 0.9}
	waitingOnly := f.queue.ok && f.queue.v > 0 && f.running.ok && f.running.v == 0
	switch {
	case waitingOnly:
		v.summary = p.f(summaryStalledWaiting, count(f.queue.v), flat, s.refreshes)
	default:
		v.summary = p.f(summaryStalled, f.runningText(), f.queueText(), flat, s.refreshes)
	}
	if !s.perToken {
		v.confidence = 0.8
	}
	v.evidence = append(v.evidence, p.f(evProgressFlat, count(*f.m.Progress), s.refreshes, flat))
	if waitingOnly {
		v.evidence = append(v.evidence, p.f(evStalledNothingRunning, count(f.queue.v)))
	}
	if !s.perToken {
		v.evidence = append(v.evidence, p.f(evProgressRequestCounters, p.seconds(f.t.StalledRequestCountersFor.Seconds())))
	}
	if f.gen.ok && f.gen.v > 0 {
		v.evidence = append(v.evidence, p.f(evStalledWindowRates, rate(f.gen.v), f.m.GetWindow()))
	}
	v.evidence = append(v.evidence, p.f(evStalledAnswers))
	v.recs = []string{p.f(recStalledRouting), p.f(recStalledDump), p.f(recStalledRestart), p.f(recStalledProbe)}
	f.weigh(p, &v, &stalledCause, findings)
	f.gpuFaultRecs(p, &v, findings)
	return v, true
}

// progressFinding is the progress row, shown while the node is STALLED.
func (f *facts) progressFinding(p printer) *llmdiagv1.Finding {
	s := f.stall
	return finding(p, llmdiagv1.Indicator_INDICATOR_PROGRESS, nameProgress,
		p.f(valueProgressFlat, p.seconds(s.flat.Seconds())), statusCrit,
		p.f(progressStalled, s.refreshes, f.t.StalledRefreshes))
}
