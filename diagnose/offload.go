package diagnose

// offloadTier is the node's KV offload tier: as its metrics show it
// (NodeMetrics.kv_offload), else as the fleet file declares it
// (Profile.kv_offload); "" when neither says.
func (f *facts) offloadTier() string {
	if tier := f.m.GetKvOffload(); tier != "" {
		return tier
	}
	return f.profile.GetKvOffload()
}

// offloadByDesign reports a GPU KV cache that is full by design: the node
// has an offload tier (CPU memory, LMCache), which keeps the GPU cache
// near 100% and moves blocks out instead of preempting, and nothing says
// the cache is short: KV pressure at or above KVWarn, no preemption over
// the window and no queueing now (each known). Such a node is not
// KV_EXHAUSTED, its KV half of saturation does not hold it out of routing,
// and its KV finding reads OK. Preemptions or a queue make the cache's
// fullness count again: then the offload tier is not keeping up.
func (f *facts) offloadByDesign() bool {
	return f.offloadTier() != "" && f.kv.ok && f.kv.v >= f.t.KVWarn &&
		f.preempt.ok && f.preempt.v == 0 &&
		f.queue.ok && !f.t.queueing(f.queue, f.ratio)
}

// kvHigh reports KV pressure at or above KVWarn that counts as pressure:
// not a GPU cache full by design (offloadByDesign). The decode rules (7 and
// 7′) hold only without it.
func (f *facts) kvHigh() bool {
	return f.kv.ok && f.kv.v >= f.t.KVWarn && !f.offloadByDesign()
}

// discountOffload clears the KV half of saturation when the GPU cache is
// full by design (offloadByDesign): the rules then neither read the node
// as KV_EXHAUSTED nor hold it out of routing for it, and its load score
// reads the queue alone (a GPU cache kept full says nothing of the room
// left). The queue half is left as it is.
func (f *facts) discountOffload() {
	if !f.offloadByDesign() {
		return
	}
	f.hist.kvHold = hold{}
	f.hist.saturated = f.hist.queueHold.on
	if !f.hist.saturated {
		f.hist.score = loadScore(false, []float64{pressure(f.queue, f.running, opt{}, f.t)})
	}
}
