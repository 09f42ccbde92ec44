// Package diagnosetest holds inputs for tests of diagnose and of the packages
// that render or serve its verdicts: above all the decode-bound DeepSeek v4
// node of the worked example in docs/verdict-rules.md, the product's first
// acceptance case.
package diagnosetest

import (
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// SeedObservedAt is when the seed node was last read.
func SeedObservedAt() time.Time { return time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC) }

// VLLMRequestLatencyBuckets are vLLM's request-latency bucket bounds (e2e,
// queue, inference, prefill, decode), +Inf last.
func VLLMRequestLatencyBuckets() []float64 {
	return []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680, math.Inf(1)}
}

// VLLMTTFTBuckets are vLLM's time-to-first-token bucket bounds, +Inf last.
func VLLMTTFTBuckets() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560, math.Inf(1)}
}

// SeedMetrics is the worked example's DeepSeek v4 node over a 5-minute
// window: KV ~30%, no queue, ~20,000 tok/s prefill, ~121 tok/s decode over
// 40 running requests (~3 tok/s each), E2E P99 13.3 min.
//
// The percentiles are what histogram_quantile gives for the bucket counts
// (10,000 requests in the window), for example for E2E on vLLM's
// request-latency buckets:
//
//	≤60 s: 2,600   ≤120 s: 5,200   ≤240 s: 8,400   ≤480 s: 9,847   ≤960 s: 9,927
//
// P50 = 60 + 60×(5000−2600)/2600 ≈ 115.4 s; P95 = 240 + 240×(9500−8400)/1447
// ≈ 422.4 s; P99 = 480 + 480×(9900−9847)/80 = 798 s = 13.3 min.
func SeedMetrics() *llmdiagv1.NodeMetrics {
	return &llmdiagv1.NodeMetrics{
		Node:       "deepseek-v4-node-01",
		Model:      "deepseek-v4",
		Engine:     llmdiagv1.Engine_ENGINE_VLLM,
		Window:     "5m",
		ObservedAt: timestamppb.New(SeedObservedAt()),
		Staleness:  durationpb.New(15 * time.Second),
		Up:         true,
		Ttft: &llmdiagv1.Distribution{
			Percentiles: []*llmdiagv1.Percentile{
				{Quantile: 0.50, Value: 0.25 + 0.25*2000.0/4500, LowerBound: 0.25, UpperBound: 0.5},
				{Quantile: 0.95, Value: 1 + 1.5*64.0/480, LowerBound: 1, UpperBound: 2.5},
				{Quantile: 0.99, Value: 1 + 1.5*464.0/480, LowerBound: 1, UpperBound: 2.5},
			},
			Mean:         ptr(0.47),
			Count:        10000,
			Sum:          4700,
			BucketBounds: VLLMTTFTBuckets(),
			BucketCounts: []float64{0, 0, 0, 0, 10, 40, 100, 300, 3000, 7500, 9000, 9436, 9916, 9980, 9995, 10000, 10000, 10000, 10000, 10000, 10000, 10000, 10000},
		},
		E2E: &llmdiagv1.Distribution{
			Percentiles: []*llmdiagv1.Percentile{
				{Quantile: 0.50, Value: 60 + 60*2400.0/2600, LowerBound: 60, UpperBound: 120},
				{Quantile: 0.95, Value: 240 + 240*1100.0/1447, LowerBound: 240, UpperBound: 480},
				{Quantile: 0.99, Value: 480 + 480*53.0/80, LowerBound: 480, UpperBound: 960},
			},
			Mean:         ptr(160),
			Count:        10000,
			Sum:          1.6e6,
			BucketBounds: VLLMRequestLatencyBuckets(),
			BucketCounts: []float64{0, 0, 0, 0, 0, 5, 10, 60, 200, 400, 600, 1000, 1500, 2000, 2600, 5200, 8400, 9847, 9927, 9990, 10000, 10000},
		},
		Queue:                           ptr(0),
		Running:                         ptr(40),
		QueueRunningRatio:               ptr(0),
		KvPressure:                      ptr(0.30),
		PromptTokensPerSecond:           ptr(20000),
		GenerationTokensPerSecond:       ptr(121),
		DecodeTokensPerSecondPerRequest: ptr(121.0 / 40),
		PreemptionsPerSecond:            ptr(0),
	}
}

// SeedHistory is twelve one-minute refreshes before the seed window: queue 0
// throughout except one short spike (8 waiting) that drained a minute later.
func SeedHistory() []diagnose.Point {
	var h []diagnose.Point
	for i := 12; i >= 1; i-- {
		queue := 0.0
		if i == 7 {
			queue = 8
		}
		h = append(h, diagnose.Point{
			At:             SeedObservedAt().Add(-time.Duration(i) * time.Minute),
			Up:             true,
			Queue:          ptr(queue),
			Running:        ptr(40),
			KVPressure:     ptr(0.30),
			E2EMean:        ptr(160),
			GenerationRate: ptr(121),
			Status:         llmdiagv1.Status_STATUS_WARN,
		})
	}
	return h
}

// SeedProfile is the seed node's deployment: data parallel 8, tensor parallel
// 1, expert parallel 8; DeepSeek v4 activates 37B parameters per token.
func SeedProfile() *llmdiagv1.Profile {
	return &llmdiagv1.Profile{
		DataParallel:         8,
		TensorParallel:       1,
		ExpertParallel:       8,
		ActiveParamsBillions: 37,
	}
}

// SeedInput is the full acceptance case: metrics, history and profile, no
// peers.
func SeedInput() diagnose.Input {
	return diagnose.Input{
		Metrics: SeedMetrics(),
		History: SeedHistory(),
		Profile: SeedProfile(),
	}
}

func ptr(v float64) *float64 { return &v }
