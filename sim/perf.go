package sim

import (
	"math"
	"strings"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
)

// GPU is the part of an accelerator's datasheet the performance model uses.
type GPU struct {
	// MemBandwidthTBs is HBM bandwidth in TB/s (decode reads every weight
	// once per step).
	MemBandwidthTBs float64
	// DenseTFLOPS is dense FP8 (or BF16 where FP8 is absent) tensor
	// throughput in TFLOPS (prefill is compute-bound).
	DenseTFLOPS float64
	// MemoryGB is HBM capacity.
	MemoryGB float64
	// Name is the modelName the DCGM exporter labels the GPU with;
	// TDPWatts its board power limit and MaxSMClockMHz its highest SM
	// clock (the simulator's DCGM figures).
	Name          string
	TDPWatts      float64
	MaxSMClockMHz float64
}

// GPUSpec returns the datasheet figures of a known GPU (H20, H100, H200,
// H800, A100, B200, L40S; case-insensitive) and whether it was known; unknown
// names get H100 figures.
func GPUSpec(name string) (GPU, bool) {
	switch strings.ToUpper(strings.TrimSpace(name)) {
	case "H20":
		return GPU{MemBandwidthTBs: 4.0, DenseTFLOPS: 296, MemoryGB: 96, Name: "NVIDIA H20", TDPWatts: 400, MaxSMClockMHz: 1980}, true
	case "H100":
		return GPU{MemBandwidthTBs: 3.35, DenseTFLOPS: 1979, MemoryGB: 80, Name: "NVIDIA H100 80GB HBM3", TDPWatts: 700, MaxSMClockMHz: 1980}, true
	case "H800":
		return GPU{MemBandwidthTBs: 3.35, DenseTFLOPS: 1979, MemoryGB: 80, Name: "NVIDIA H800", TDPWatts: 700, MaxSMClockMHz: 1980}, true
	case "H200":
		return GPU{MemBandwidthTBs: 4.8, DenseTFLOPS: 1979, MemoryGB: 141, Name: "NVIDIA H200", TDPWatts: 700, MaxSMClockMHz: 1980}, true
	case "A100":
		return GPU{MemBandwidthTBs: 2.0, DenseTFLOPS: 312, MemoryGB: 80, Name: "NVIDIA A100-SXM4-80GB", TDPWatts: 400, MaxSMClockMHz: 1410}, true
	case "B200":
		return GPU{MemBandwidthTBs: 8.0, DenseTFLOPS: 4500, MemoryGB: 180, Name: "NVIDIA B200", TDPWatts: 1000, MaxSMClockMHz: 1965}, true
	case "L40S":
		return GPU{MemBandwidthTBs: 0.864, DenseTFLOPS: 733, MemoryGB: 48, Name: "NVIDIA L40S", TDPWatts: 350, MaxSMClockMHz: 2520}, true
	}
	return GPU{MemBandwidthTBs: 3.35, DenseTFLOPS: 1979, MemoryGB: 80, Name: "NVIDIA H100 80GB HBM3", TDPWatts: 700, MaxSMClockMHz: 1980}, false
}

// Performance-model constants of EstimatePerf.
const (
	launchOverhead   = 5 * time.Millisecond    // kernel launches, sampling, scheduling per step
	tpOverheadPerLog = 1500 * time.Microsecond // all-reduce cost per doubling of TP
	epOverhead       = 24 * time.Millisecond   // MoE all-to-all dispatch + combine, ~200µs each × ~60 layers
	bytesPerParam    = 1.0                     // FP8 weights
	decodeMFU        = 0.25                    // compute efficiency of the per-sequence part of decode
	prefillMFU       = 0.4                     // compute efficiency of prefill
	kvBytesPerToken  = 70e3                    // MLA-class KV footprint, read by attention
)

// EstimatePerf derives step timings from a deployment profile with a
// roofline-style model; the caller sets the capacity fields (MaxNumSeqs,
// MaxBatchedTokens, KVCapacityTokens, …), which depend on memory settings
// the profile does not carry. For one engine core spanning g = TP×PP GPUs:
//
//	StepBase            = 5ms + 1.5ms·log2(TP) + 24ms·[EP>1] + active_params·1B / (g·bandwidth)
//	StepPerSeq          = 2·active_params FLOP / (g·TFLOPS·0.25)
//	StepPerKContext     = 1000·70kB / (g·bandwidth)
//	PrefillTokensPerSec = g·TFLOPS·0.4 / (2·active_params)
//	Lockstep            = DP>1 && EP>1
//
// Tensor parallelism divides the weight read, so single-request decode gets
// faster; data parallelism leaves each core's timings unchanged and only
// adds cores. Attention compute, which long contexts make dominant on
// compute-poor GPUs, depends on the architecture: EstimatePerf leaves
// PrefillPerKContext 0 and StepPerKContext memory-bound; the caller may
// raise them (the seed scenario does for MLA on H20).
func EstimatePerf(p fleet.Profile) Perf {
	gpu, _ := GPUSpec(p.GPU)
	tp := max(float64(p.TensorParallel), 1)
	g := tp * max(float64(p.PipelineParallel), 1)
	active := p.ActiveParamsBillions * 1e9
	if active <= 0 {
		active = 8e9
	}
	bw := gpu.MemBandwidthTBs * 1e12
	flops := gpu.DenseTFLOPS * 1e12
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	base := launchOverhead + time.Duration(math.Log2(tp)*float64(tpOverheadPerLog))
	if p.ExpertParallel > 1 {
		base += epOverhead
	}
	base += secs(active * bytesPerParam / (g * bw))
	return Perf{
		StepBase:            base,
		StepPerSeq:          secs(2 * active / (g * flops * decodeMFU)),
		StepPerKContext:     secs(1000 * kvBytesPerToken / (g * bw)),
		PrefillTokensPerSec: g * flops * prefillMFU / (2 * active),
		Lockstep:            p.DataParallel > 1 && p.ExpertParallel > 1,
	}
}
