package diagnosetest

import (
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

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

// XID records the last XID xid on GPU gpu in g, seen to occur at at (a
// change between two reads).
func XID(g *llmdiagv1.GPUMetrics, gpu, xid int, at *timestamppb.Timestamp) *llmdiagv1.GPUMetrics {
	g.XidErrors = append(g.XidErrors, &llmdiagv1.GPUXid{Gpu: strconv.Itoa(gpu), Xid: uint32(xid), Last: true, OccurredAt: at})
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

// GPUBandwidthInput is the simulator's gpu-bandwidth scenario's
// decode-bound node as llmdiag read it 12 minutes into a run (vLLM
// schema, seed 1, a 5-minute window): a dense 70B on four L40S (TP=4)
// decoding 323 long answers at once at ~8.7 tok/s each, queue 0, KV ~73%,
// E2E P99 12.5 min, and its DCGM exporter reading DRAM active ~62% (61–63%
// across the GPUs), tensor pipes ~22%: the memory-bandwidth limit of
// decode. Its history is twelve one-minute refreshes as steady.
//
// The percentiles are histogram_quantile's for the window's bucket counts:
// E2E over 434 requests, on vLLM's request-latency buckets
//
//	≤60 s: 1   ≤120 s: 42   ≤240 s: 288   ≤480 s: 424   ≤960 s: 434
//
// P50 = 120 + 120×(217−42)/246 ≈ 205 s; P99 = 480 + 480×(429.66−424)/10 ≈
// 752 s; TTFT over 438 requests, 385 of them ≤ 0.25 s and all ≤ 0.5 s, all
// queued ≤ 0.3 s; inter-token latency over 841,026 tokens, 812,720 of them
// ≤ 0.15 s and all ≤ 0.2 s.
func GPUBandwidthInput() diagnose.Input {
	at := SeedObservedAt()
	itlBounds := []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, math.Inf(1)}
	const tokens, fast = 841026.0, 812720.0
	itlCounts := make([]float64, len(itlBounds))
	for i, b := range itlBounds {
		switch {
		case b >= 0.2:
			itlCounts[i] = tokens
		case b >= 0.15:
			itlCounts[i] = fast
		}
	}
	m := &llmdiagv1.NodeMetrics{
		Node:       "llama-3.3-70b-0",
		Model:      "llama-3.3-70b",
		Engine:     llmdiagv1.Engine_ENGINE_VLLM,
		Window:     "5m",
		ObservedAt: timestamppb.New(at),
		Staleness:  durationpb.New(0),
		Up:         true,
		Ttft: &llmdiagv1.Distribution{
			Percentiles: []*llmdiagv1.Percentile{
				{Quantile: 0.50, Value: 0.1 + 0.15*219/385.0, LowerBound: 0.1, UpperBound: 0.25},
				{Quantile: 0.95, Value: 0.25 + 0.25*(416.1-385)/53, LowerBound: 0.25, UpperBound: 0.5},
				{Quantile: 0.99, Value: 0.25 + 0.25*(433.62-385)/53, LowerBound: 0.25, UpperBound: 0.5},
			},
			Mean:         ptr(0.2015),
			Count:        438,
			Sum:          88.24,
			BucketBounds: VLLMTTFTBuckets(),
			BucketCounts: []float64{0, 0, 0, 0, 0, 0, 0, 0, 385, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438},
		},
		QueueTime: &llmdiagv1.Distribution{
			Percentiles: []*llmdiagv1.Percentile{
				{Quantile: 0.50, Value: 0.15, UpperBound: 0.3},
				{Quantile: 0.95, Value: 0.285, UpperBound: 0.3},
				{Quantile: 0.99, Value: 0.297, UpperBound: 0.3},
			},
			Mean:         ptr(0.0587),
			Count:        438,
			Sum:          25.73,
			BucketBounds: VLLMRequestLatencyBuckets(),
			BucketCounts: []float64{438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438, 438},
		},
		E2E: &llmdiagv1.Distribution{
			Percentiles: []*llmdiagv1.Percentile{
				{Quantile: 0.50, Value: 120 + 120*(217-42)/246.0, LowerBound: 120, UpperBound: 240},
				{Quantile: 0.95, Value: 240 + 240*(412.3-288)/136, LowerBound: 240, UpperBound: 480},
				{Quantile: 0.99, Value: 480 + 480*(429.66-424)/10, LowerBound: 480, UpperBound: 960},
			},
			Mean:         ptr(221.4),
			Count:        434,
			Sum:          96092,
			BucketBounds: VLLMRequestLatencyBuckets(),
			BucketCounts: []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 42, 288, 424, 434, 434, 434, 434},
		},
		InterToken: &llmdiagv1.Distribution{
			Percentiles: []*llmdiagv1.Percentile{
				{Quantile: 0.50, Value: 0.1 + 0.05*(tokens/2)/fast, LowerBound: 0.1, UpperBound: 0.15},
				{Quantile: 0.99, Value: 0.15 + 0.05*(0.99*tokens-fast)/(tokens-fast), LowerBound: 0.15, UpperBound: 0.2},
			},
			Mean:         ptr(0.115),
			Count:        tokens,
			Sum:          96757,
			BucketBounds: itlBounds,
			BucketCounts: itlCounts,
		},
		Queue:                           ptr(0),
		Running:                         ptr(323),
		QueueRunningRatio:               ptr(0),
		KvPressure:                      ptr(0.73),
		KvCapacityTokens:                ptr(600000),
		PromptTokensPerSecond:           ptr(335),
		GenerationTokensPerSecond:       ptr(2805),
		DecodeTokensPerSecondPerRequest: ptr(2805.0 / 323),
		PreemptionsPerSecond:            ptr(0),
		RequestsPerSecond:               ptr(1.447),
		AbortedRequestsPerSecond:        ptr(0),
		PrefixCacheHitRate:              ptr(0),
	}
	g := GPU(4, "NVIDIA L40S", 0.82, 0.22, 0.62)
	g.DramActiveMin, g.DramActiveMax = ptr(0.61), ptr(0.626)
	g.PowerWatts = ptr(1015)
	g.SmClockMhz, g.SmClockMhzMin = ptr(2520), ptr(2520)
	g.TemperatureCelsiusMax = ptr(61)
	g.FramebufferUsedFraction = ptr(0.91)
	m.Gpu = g
	var h []diagnose.Point
	for i := 12; i >= 1; i-- {
		h = append(h, diagnose.Point{
			At: at.Add(-time.Duration(i) * time.Minute), Up: true,
			Queue: ptr(0), Running: ptr(322), KVPressure: ptr(0.74), E2EMean: ptr(220), GenerationRate: ptr(2800),
			Status: llmdiagv1.Status_STATUS_WARN,
		})
	}
	return diagnose.Input{Metrics: m, History: h, Profile: &llmdiagv1.Profile{
		DataParallel: 1, TensorParallel: 4, Gpu: "L40S", ActiveParamsBillions: 70, TotalParamsBillions: 70,
	}}
}
