package diagnose

import (
	"slices"
	"strings"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// What the GPUs' DCGM activity (NodeMetrics.gpu, means over the node's
// GPUs) says. Decode reads every weight and the KV cache once per step: at
// high batch it keeps the memory interface busy most cycles, so DRAM active
// at gpuDRAMHigh or more is the memory-bandwidth limit. Tensor pipes at
// gpuTensorHigh or more with the memory interface below that are
// compute-bound (attention over long contexts, prefill). The memory
// interface below gpuIdle and the tensor pipes too (where exported) is a
// GPU that waits: for the scheduler, the CPU, or other ranks. SM active
// counts cycles with a warp assigned, which a kernel waiting on memory or
// spinning in a collective holds too, so it weighs only when DRAM is not
// exported (below gpuIdle: waiting). Utilisation alone
// (DCGM_FI_DEV_GPU_UTIL, "a kernel ran") cannot tell these apart; below
// gpuUtilIdle it still says the GPU waits.
const (
	gpuDRAMHigh   = 0.6
	gpuTensorHigh = 0.4
	gpuIdle       = 0.3
	gpuUtilIdle   = 0.5
)

// gpuShape is what the GPUs' activity says of a node's steps.
type gpuShape int

const (
	gpuUnknown   gpuShape = iota // no activity figure
	gpuBandwidth                 // memory interface near its limit
	gpuStarved                   // SMs and memory interface mostly idle
	gpuCompute                   // SMs busy, memory interface not
	gpuMixed                     // neither limit reached
	gpuUtilOnly                  // utilisation only, and not low
)

// gpuShape reads the GPU section's activity.
func (f *facts) gpuShape() gpuShape {
	g := f.m.GetGpu()
	if g == nil {
		return gpuUnknown
	}
	sm, tensor, dram, util := known(g.SmActive), known(g.TensorActive), known(g.DramActive), known(g.Utilization)
	switch {
	case dram.ok && dram.v >= gpuDRAMHigh:
		return gpuBandwidth
	case tensor.ok && tensor.v >= gpuTensorHigh:
		return gpuCompute
	case dram.ok && dram.v < gpuIdle && (!tensor.ok || tensor.v < gpuIdle):
		return gpuStarved
	case !dram.ok && sm.ok && sm.v < gpuIdle && (!tensor.ok || tensor.v < gpuIdle):
		return gpuStarved
	case sm.ok || tensor.ok || dram.ok:
		return gpuMixed
	case util.ok && util.v < gpuUtilIdle:
		return gpuStarved
	case util.ok:
		return gpuUtilOnly
	}
	return gpuUnknown
}

// gpuFindings are the GPU rows, after the others and only for a node whose
// DCGM exporter is read: activity when any activity figure is known,
// throttling when the clock-event reasons are, XID when the XID field is.
// A node without DCGM data has none of them, so its diagnosis reads as
// before.
func (f *facts) gpuFindings(p printer) []*llmdiagv1.Finding {
	g := f.m.GetGpu()
	if g == nil {
		return nil
	}
	var out []*llmdiagv1.Finding
	if s := f.gpuShape(); s != gpuUnknown {
		out = append(out, f.gpuActivityFinding(p, s))
	}
	if g.ClockEventMask != nil {
		out = append(out, f.gpuThrottleFinding(p))
	}
	if g.GetXidRead() {
		out = append(out, f.gpuXIDFinding(p))
	}
	return out
}

// gpuActivityValue is "SM ~62% · DRAM ~85% · tensor ~19%", of the figures
// known; utilisation when no profiling figure is.
func gpuActivityValue(p printer, g *llmdiagv1.GPUMetrics) string {
	var parts []string
	if g.SmActive != nil {
		parts = append(parts, p.f(valueGPUSM, percent(g.GetSmActive())))
	}
	if g.DramActive != nil {
		parts = append(parts, p.f(valueGPUDRAM, percent(g.GetDramActive())))
	}
	if g.TensorActive != nil {
		parts = append(parts, p.f(valueGPUTensor, percent(g.GetTensorActive())))
	}
	if len(parts) == 0 && g.Utilization != nil {
		parts = append(parts, p.f(valueGPUUtil, percent(g.GetUtilization())))
	}
	return strings.Join(parts, " · ")
}

// gpuActivityFinding is OK whatever it reads: activity is evidence for
// the verdict (decode's above all), not a fault.
func (f *facts) gpuActivityFinding(p printer, s gpuShape) *llmdiagv1.Finding {
	g := f.m.GetGpu()
	con := map[gpuShape]msg{gpuBandwidth: conGPUBandwidth, gpuStarved: conGPUStarved, gpuCompute: conGPUCompute,
		gpuMixed: conGPUMixed, gpuUtilOnly: conGPUUtilOnly}[s]
	return finding(p, llmdiagv1.Indicator_INDICATOR_GPU_ACTIVITY, nameGPUActivity, gpuActivityValue(p, g), statusOK,
		p.f(con), gpuDeviceEvidence(p, g)...)
}

// gpuDeviceEvidence lists what DCGM says of the GPUs besides activity.
func gpuDeviceEvidence(p printer, g *llmdiagv1.GPUMetrics) []string {
	var ev []string
	if g.GetModelName() != "" {
		ev = append(ev, p.f(evGPUCount, int(g.GetGpus()), g.GetModelName()))
	}
	if g.Utilization != nil {
		ev = append(ev, p.f(evGPUUtil, percent(g.GetUtilization())))
	}
	if g.SmClockMhz != nil && g.SmClockMhzMin != nil {
		ev = append(ev, p.f(evGPUClock, trimFloat(g.GetSmClockMhz(), 0), trimFloat(g.GetSmClockMhzMin(), 0)))
	}
	if g.PowerWatts != nil {
		ev = append(ev, p.f(evGPUPower, thousands(g.GetPowerWatts())))
	}
	if g.TemperatureCelsiusMax != nil {
		ev = append(ev, p.f(evGPUTemp, trimFloat(g.GetTemperatureCelsiusMax(), 0)))
	}
	if g.FramebufferUsedFraction != nil {
		ev = append(ev, p.f(evGPUFramebuffer, percent(g.GetFramebufferUsedFraction())))
	}
	return ev
}

// gpuThrottled reports a thermal or power limit holding some GPU's clock
// down.
func (f *facts) gpuThrottled() bool { return len(f.m.GetGpu().GetThrottledGpus()) > 0 }

func (f *facts) gpuThrottleFinding(p printer) *llmdiagv1.Finding {
	g := f.m.GetGpu()
	var ev []string
	if len(g.GetClockEventReasons()) > 0 {
		ev = append(ev, p.f(evGPUReasons, strings.Join(g.GetClockEventReasons(), ", ")))
	}
	if g.SmClockMhz != nil && g.SmClockMhzMin != nil {
		ev = append(ev, p.f(evGPUClock, trimFloat(g.GetSmClockMhz(), 0), trimFloat(g.GetSmClockMhzMin(), 0)))
	}
	if g.TemperatureCelsiusMax != nil {
		ev = append(ev, p.f(evGPUTemp, trimFloat(g.GetTemperatureCelsiusMax(), 0)))
	}
	if g.PowerWatts != nil {
		ev = append(ev, p.f(evGPUPower, thousands(g.GetPowerWatts())))
	}
	if !f.gpuThrottled() {
		return finding(p, llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING, nameGPUThrottling, p.f(valueNone), statusOK,
			p.f(conGPUNotThrottled), ev...)
	}
	reasons := strings.Join(engine.LimitReasons(g.GetClockEventReasons()), ", ")
	gpus := strings.Join(g.GetThrottledGpus(), ", ")
	return finding(p, llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING, nameGPUThrottling, p.f(valueGPUThrottled, gpus, reasons), statusWarn,
		p.f(conGPUThrottled, reasons, gpus), ev...)
}

// xidMeanings names the XIDs an inference fleet meets most.
var xidMeanings = map[uint32]msg{13: xid13, 31: xid31, 43: xid43, 48: xid48, 63: xid63, 64: xid64,
	74: xid74, 79: xid79, 92: xid92, 94: xid94, 95: xid95, 119: xid119}

// gpuFault reports the GPU rows no load pattern explains: throttling and
// XID errors are the hardware's, whatever the cause of the rest.
func gpuFault(ind llmdiagv1.Indicator) bool {
	return ind == llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING || ind == llmdiagv1.Indicator_INDICATOR_GPU_XID
}

// gpuRec is the recommendation for a GPU row no cause explains.
func (f *facts) gpuRec(ind llmdiagv1.Indicator) (msg, bool) {
	switch ind {
	case llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING:
		return recGPUThrottle, true
	case llmdiagv1.Indicator_INDICATOR_GPU_XID:
		return f.xidRec(), true
	}
	return 0, false
}

// gpuFaultRecs puts first, for a verdict other than HEALTHY and
// UNEXPLAINED (whose recommendations follow from each finding already),
// what to do about an XID or throttling finding it leaves unexplained.
func (f *facts) gpuFaultRecs(p printer, v *verdict, findings []*llmdiagv1.Finding) {
	if v.cause == llmdiagv1.Cause_CAUSE_HEALTHY || v.cause == llmdiagv1.Cause_CAUSE_UNEXPLAINED {
		return
	}
	var recs []string
	for _, x := range findings {
		if m, ok := f.gpuRec(x.GetIndicator()); ok && elevated(x.GetStatus()) {
			recs = append(recs, p.f(m))
		}
	}
	if len(recs) > 0 {
		v.recs = append(recs, v.recs...)
	}
}

// gpuDecode adds to a DECODE_BOUND verdict what the GPUs say: the
// memory-bandwidth limit (more replicas or a smaller model, not tuning),
// GPUs starved by batching or scheduling (raise max_num_seqs, look for
// CPU-side stalls), or compute-bound steps; the summary names it, the
// evidence gives the figures and the recommendations come first. Without
// GPU activity figures it changes nothing.
func (f *facts) gpuDecode(p printer, v *verdict) {
	shape := f.gpuShape()
	if shape == gpuUnknown {
		return
	}
	g := f.m.GetGpu()
	sm, dram, tensor := pct(g.SmActive), pct(g.DramActive), pct(g.TensorActive)
	var recs []string
	switch shape {
	case gpuBandwidth:
		v.summary += p.f(decodeGPUBandwidth, dram)
		v.evidence = append(v.evidence, p.f(evGPUDecodeBandwidth, dram, exactPercent(gpuDRAMHigh), sm))
		recs = []string{p.f(recGPUBandwidth)}
	case gpuStarved:
		if g.SmActive == nil && g.DramActive == nil {
			v.summary += p.f(decodeGPUStarvedUtil, pct(g.Utilization))
			v.evidence = append(v.evidence, p.f(evGPUDecodeStarvedUtil, pct(g.Utilization), exactPercent(gpuUtilIdle)))
		} else {
			v.summary += p.f(decodeGPUStarved, dram, tensor)
			v.evidence = append(v.evidence, p.f(evGPUDecodeStarved, dram, exactPercent(gpuIdle), tensor, sm))
		}
		if dp, ep := f.profile.GetDataParallel(), f.profile.GetExpertParallel(); dp > 1 && ep > 1 {
			// The ranks wait for each other: a prefill on one stalls all.
			v.evidence = append(v.evidence, p.f(evGPULockstep, dp, ep, spread(g)))
			recs = append(recs, p.f(recSmallerChunks))
		}
		if f.queue.ok && f.queue.v > 0 {
			// Requests wait while the GPUs do: more batch slots put
			// them to work.
			recs = append(recs, p.f(recGPUStarved))
		}
		recs = append(recs, p.f(recGPUCPUStalls))
		// Fewer requests per replica would starve the GPUs further.
		v.recs = slices.DeleteFunc(v.recs, func(r string) bool { return r == p.f(recConcurrency) })
	case gpuCompute:
		v.summary += p.f(decodeGPUCompute, tensor, sm)
		v.evidence = append(v.evidence, p.f(evGPUDecodeCompute, tensor, exactPercent(gpuTensorHigh), sm, dram))
		recs = []string{p.f(recGPUCompute)}
	case gpuMixed:
		v.evidence = append(v.evidence, p.f(evGPUDecodeMixed, sm, dram))
		return
	default:
		return
	}
	v.confidence += 0.05
	v.recs = append(recs, v.recs...)
}

// spread is the DRAM activity of the least and the most active GPU:
// "~7–16%", or "?" when not exported.
func spread(g *llmdiagv1.GPUMetrics) string {
	if g.DramActiveMin == nil || g.DramActiveMax == nil {
		return "?"
	}
	return strings.TrimSuffix(percent(g.GetDramActiveMin()), "%") + "–" + strings.TrimPrefix(percent(g.GetDramActiveMax()), "~")
}

// pct formats an optional fraction, "?" when absent.
func pct(v *float64) string {
	if v == nil {
		return "?"
	}
	return percent(*v)
}
