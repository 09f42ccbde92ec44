package diagnosetest

import (
	"strconv"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// GPU is a DCGM section of n GPUs of model with the given mean SM, tensor
// and DRAM activity (each nil-able through a negative value: not
// exported), at full clocks, no clock-event reason and no XID.
func GPU(n int, model string, sm, tensor, dram float64) *llmdiagv1.GPUMetrics {
	opt := func(v float64) *float64 {
		if v < 0 {
			return nil
		}
		return &v
	}
	g := &llmdiagv1.GPUMetrics{
		Gpus: uint32(n), ModelName: model,
		Utilization: opt(0.99), SmActive: opt(sm), TensorActive: opt(tensor), DramActive: opt(dram),
		FramebufferUsedFraction: opt(0.9),
		PowerWatts:              opt(float64(n) * 350),
		SmClockMhz:              opt(1980), SmClockMhzMin: opt(1980),
		TemperatureCelsiusMax: opt(64),
		ClockEventMask:        new(uint64),
		XidRead:               true,
	}
	if dram >= 0 {
		g.DramActiveMin, g.DramActiveMax = opt(dram-0.02), opt(dram+0.02)
	}
	return g
}

// Throttle holds the clocks of the GPUs gpus down by thermal limits
// (sw_thermal_slowdown and hw_thermal_slowdown) in g.
func Throttle(g *llmdiagv1.GPUMetrics, gpus ...int) *llmdiagv1.GPUMetrics {
	*g.ClockEventMask |= 0x60
	g.ClockEventReasons = []string{"sw_thermal_slowdown", "hw_thermal_slowdown"}
	for _, i := range gpus {
		g.ThrottledGpus = append(g.ThrottledGpus, strconv.Itoa(i))
	}
	g.SmClockMhzMin = ptr(1140)
	g.SmClockMhz = ptr((g.GetSmClockMhz()*float64(int(g.GetGpus())-len(gpus)) + 1140*float64(len(gpus))) / float64(g.GetGpus()))
	g.TemperatureCelsiusMax = ptr(92)
	return g
}

// XID records the last XID xid on GPU gpu in g.
func XID(g *llmdiagv1.GPUMetrics, gpu, xid int) *llmdiagv1.GPUMetrics {
	g.XidErrors = append(g.XidErrors, &llmdiagv1.GPUXid{Gpu: strconv.Itoa(gpu), Xid: uint32(xid)})
	return g
}

// SeedGPUInput is the seed node (SeedInput) with its DCGM exporter read,
// as the simulator's seed scenario reports it after its warm-up (sim's
// DCGM): 8 H20 GPUs, one per data-parallel rank, each with a kernel
// running 99% of the time, yet their memory interface busy ~12% of cycles
// and their tensor pipes ~18%: in lockstep (DP 8, EP 8) the ranks spend
// most of each step waiting for the one that computes a prefill.
func SeedGPUInput() diagnose.Input {
	in := SeedInput()
	g := GPU(8, "NVIDIA H20", 0.36, 0.18, 0.12)
	g.DramActiveMin, g.DramActiveMax = ptr(0.074), ptr(0.163)
	g.PowerWatts = ptr(1075)
	g.TemperatureCelsiusMax = ptr(45)
	in.Metrics.Gpu = g
	return in
}
