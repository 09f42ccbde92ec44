package diagnose

import (
	"math"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Routing is the routing half of a diagnosis re-read from newer gauges: the
// routable flag and load score Diagnose would give in, with everything but
// saturation taken from full, the node's last whole diagnosis. A fast lane
// (refresh/fast.go) reads only queue, running and KV pressure several times
// between two refreshes: in.Metrics is the refresh's metrics with those
// gauges (and observed_at, staleness, up) overwritten by the fast read, and
// in.History holds the fast reads' points among the refreshes'.
//
// The saturation rules, their hysteresis over RoutingHold points and the
// load score are Diagnose's own code (readHolds, the part of readHistory
// they need, and discountOffload); what else holds a node out of routing
// (down or no data, a stalled engine, a GPU fault) is read from full's
// status and cause and in.Metrics's GPU, since only a whole refresh can
// tell (routableApart). A fast read that finds the node down or stale
// makes it unroutable at once, as a refresh would.
func Routing(in Input, full *llmdiagv1.Diagnosis, t Thresholds) (routable bool, score float64) {
	m := in.Metrics
	switch {
	case m == nil:
		return false, 0
	case isStale(m, t) || !m.GetUp() || !routableApart(full.GetStatus(), full.GetRootCause(), m, t):
		return false, round3(math.Min(Pressure(m.Queue, m.Running, m.KvPressure, t), 1))
	}
	m, _ = consistent(in)
	f := &facts{t: t, m: m, profile: in.Profile}
	if f.profile == nil {
		f.profile = &llmdiagv1.Profile{}
	}
	f.kv = known(m.KvPressure)
	f.queue = known(m.Queue)
	f.running = known(m.Running)
	f.ratio = queueRatio(f.queue, f.running, known(m.QueueRunningRatio))
	f.preempt = known(m.PreemptionsPerSecond)
	sc := historyScratches.Get().(*historyScratch)
	f.hist, _ = f.readHolds(in.History, sc)
	historyScratches.Put(sc)
	f.discountOffload()
	return !f.hist.saturated, f.hist.score
}

// routableApart reports whether a node with this verdict and metrics may
// take requests as far as anything but saturation says: it is up and read
// (not UNKNOWN or DOWN), its engine is not stalled (requests sent to a hung
// engine wait without end) and its GPUs report no fault (the node is to be
// drained: a current XID that needs a GPU reset or a reboot, xid.go).
func routableApart(status llmdiagv1.Status, cause llmdiagv1.Cause, m *llmdiagv1.NodeMetrics, t Thresholds) bool {
	return status != llmdiagv1.Status_STATUS_UNKNOWN && status != llmdiagv1.Status_STATUS_DOWN &&
		cause != llmdiagv1.Cause_CAUSE_STALLED &&
		!xidDrains(m, t.GPUXIDWindow)
}
