package diagnose_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// claimVariant is one input shape the rules answer with their own summary,
// conclusions and recommendations.
type claimVariant struct {
	name string
	in   func() diagnose.Input
}

// claimVariants covers every cause and every variant of its summary,
// evidence, conclusions and recommendations: the shapes of TestRules and
// TestNewFindings, the seed, and the shapes between them.
func claimVariants() []claimVariant {
	withM := func(edit func(m *llmdiagv1.NodeMetrics)) func() diagnose.Input {
		return func() diagnose.Input {
			m := healthyMetrics()
			edit(m)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
		}
	}
	noHist := func(edit func(m *llmdiagv1.NodeMetrics)) func() diagnose.Input {
		return func() diagnose.Input {
			m := healthyMetrics()
			edit(m)
			return diagnose.Input{Metrics: m}
		}
	}
	risingHistory := func() []diagnose.Point {
		h := flatHistory(20, 0, 10)
		for i := range h {
			h[i].E2EMean = f64(5 + float64(i)*0.5)
		}
		return h
	}
	largeDP := &llmdiagv1.Profile{DataParallel: 8, TensorParallel: 1, ExpertParallel: 8, PipelineParallel: 2, ActiveParamsBillions: 37, TotalParamsBillions: 671, Gpu: "H20"}
	return []claimVariant{
		{"seed", diagnosetest.SeedInput},
		{"healthy", withM(func(*llmdiagv1.NodeMetrics) {})},
		{"healthy, no history", noHist(func(*llmdiagv1.NodeMetrics) {})},
		{"stalled", func() diagnose.Input { return stalledInput(3, 30, 12) }},
		{"stalled, nothing running", func() diagnose.Input { return stalledInput(3, 7, 0) }},
		{"healthy, idle", withM(func(m *llmdiagv1.NodeMetrics) {
			m.PromptTokensPerSecond, m.GenerationTokensPerSecond, m.Running, m.RequestsPerSecond = f64(0), f64(0), f64(0), f64(0)
			m.AbortedRequestsPerSecond = f64(0)
		})},
		{"healthy, KV busy", withM(func(m *llmdiagv1.NodeMetrics) { m.KvPressure, m.KvCapacityTokens = f64(0.85), f64(500000) })},
		{"healthy, everything exposed", withM(func(m *llmdiagv1.NodeMetrics) {
			m.InterToken = dist(0.03, 0.08)
			m.QueueTime = dist(0.01, 0.05)
			m.QueueTime.Mean, m.Ttft.Mean = f64(0.02), f64(0.4)
			m.AbortedRequestsPerSecond = f64(0.001)
			m.TimePerOutputToken = dist(0.025, 0.05)
		})},
		{"healthy, fast peers", func() diagnose.Input {
			m := healthyMetrics()
			m.E2E = dist(2, 5)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10), Peers: []*llmdiagv1.NodeMetrics{peer("b", 20), peer("c", 25)}}
		}},
		{"healthy, peers in line", func() diagnose.Input {
			return diagnose.Input{Metrics: healthyMetrics(), History: flatHistory(10, 0, 10), Peers: []*llmdiagv1.NodeMetrics{peer("b", 20), peer("c", 25)}}
		}},
		{"healthy: mean E2E falling", func() diagnose.Input {
			h := flatHistory(20, 0, 10)
			for i := range h {
				h[i].E2EMean = f64(20 - float64(i)*0.7)
			}
			return diagnose.Input{Metrics: healthyMetrics(), History: h}
		}},
		{"healthy: flat trend", func() diagnose.Input {
			h := flatHistory(20, 0, 10)
			for i := range h {
				h[i].E2EMean = f64(8)
			}
			return diagnose.Input{Metrics: healthyMetrics(), History: h}
		}},
		{"healthy: ratio above warn for one refresh", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue, m.Running = f64(2), f64(3)
			return diagnose.Input{Metrics: m, History: flatHistory(30, 0, 3)}
		}},
		{"no data: stale flag", noHist(func(m *llmdiagv1.NodeMetrics) { m.Stale = true })},
		{"no data: older than stale_after", noHist(func(m *llmdiagv1.NodeMetrics) { m.Staleness = durationpb.New(10 * time.Minute) })},
		{"no data: no metrics", func() diagnose.Input { return diagnose.Input{} }},
		{"no data: nothing readable", func() diagnose.Input {
			return diagnose.Input{Metrics: &llmdiagv1.NodeMetrics{Node: "node-a", Up: true, Errors: []string{"unknown engine"}}}
		}},
		{"target down", func() diagnose.Input {
			return diagnose.Input{Metrics: &llmdiagv1.NodeMetrics{Node: "node-a", Up: false, Errors: []string{"dial tcp: connection refused"}}}
		}},
		{"KV exhausted: KV pressure", withM(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = f64(0.97) })},
		{"KV exhausted: KV pressure, latency high", withM(func(m *llmdiagv1.NodeMetrics) {
			m.KvPressure = f64(0.97)
			m.E2E, m.Ttft = dist(30, 300), dist(3, 20)
		})},
		{"KV exhausted: KV pressure and preemptions", withM(func(m *llmdiagv1.NodeMetrics) {
			m.KvPressure, m.PreemptionsPerSecond = f64(0.97), f64(0.5)
		})},
		{"KV exhausted: preemptions", withM(func(m *llmdiagv1.NodeMetrics) { m.PreemptionsPerSecond = f64(0.5) })},
		{"KV exhausted: preemptions, KV near full", withM(func(m *llmdiagv1.NodeMetrics) {
			m.PreemptionsPerSecond, m.KvPressure = f64(0.5), f64(0.92)
		})},
		{"KV exhausted wins over overload", func() diagnose.Input {
			m := healthyMetrics()
			m.KvPressure, m.Queue = f64(0.99), f64(80)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 80, 10)}
		}},
		{"overloaded: sustained queue", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue = f64(60)
			m.E2E, m.Ttft = dist(30, 300), dist(3, 20)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 60, 10), Profile: &llmdiagv1.Profile{TensorParallel: 4}}
		}},
		{"overloaded: no history", noHist(func(m *llmdiagv1.NodeMetrics) { m.Queue = f64(20) })},
		{"overloaded: by the reported ratio", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue, m.Running, m.QueueRunningRatio = nil, nil, f64(3)
			return diagnose.Input{Metrics: m}
		}},
		{"overloaded: the queue never drains between bursts", func() diagnose.Input {
			m := burstMetrics()
			m.Queue = f64(30)
			return diagnose.Input{Metrics: m, History: burstHistory(120, true)}
		}},
		{"queue saturated, not yet for overloaded_after", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue = f64(12)
			h := make([]diagnose.Point, 12)
			for i := range h {
				h[i] = diagnose.Point{At: observed.Add(-time.Duration(12-i) * 5 * time.Second), Up: true, Queue: f64(0), Running: f64(10)}
			}
			h[11].Queue = f64(12)
			return diagnose.Input{Metrics: m, History: h}
		}},
		{"KV held through a dip", func() diagnose.Input {
			m := healthyMetrics()
			m.KvPressure = f64(0.92)
			h := flatHistory(10, 0, 10)
			for i := range h {
				h[i].KVPressure = f64(0.97)
			}
			return diagnose.Input{Metrics: m, History: h}
		}},
		{"recovering from an overload", func() diagnose.Input {
			h := flatHistory(10, 0, 10)
			for i := 3; i < 8; i++ {
				h[i].Queue = f64(60)
			}
			m := healthyMetrics()
			m.E2E = dist(30, 300)
			return diagnose.Input{Metrics: m, History: h}
		}},
		{"an overload long drained", func() diagnose.Input {
			h := flatHistory(12, 0, 10)
			for i := 0; i < 4; i++ {
				h[i].Queue = f64(60)
			}
			return diagnose.Input{Metrics: healthyMetrics(), History: h}
		}},
		{"burst: queueing now, history drains", withM(func(m *llmdiagv1.NodeMetrics) { m.Queue = f64(12) })},
		{"burst: drained spike, nothing else", func() diagnose.Input {
			h := flatHistory(10, 0, 10)
			h[4].Queue = f64(9)
			return diagnose.Input{Metrics: healthyMetrics(), History: h}
		}},
		{"burst: simulator shape, spikes drained", func() diagnose.Input {
			return diagnose.Input{Metrics: burstMetrics(), History: burstHistory(120, false)}
		}},
		{"burst: simulator shape, queueing now", func() diagnose.Input {
			m := burstMetrics()
			m.Queue = f64(30)
			return diagnose.Input{Metrics: m, History: burstHistory(120, false)}
		}},
		{"burst: heavy prompts, but the queue spiked", func() diagnose.Input {
			m := burstMetrics()
			m.RequestsPerSecond = f64(0.3)
			return diagnose.Input{Metrics: m, History: burstHistory(120, false)}
		}},
		{"burst: TTFT mostly queue time", func() diagnose.Input {
			m := burstMetrics()
			m.Ttft.Mean, m.QueueTime = f64(4), dist(2, 15)
			m.QueueTime.Mean = f64(3)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 7)}
		}},
		{"unexplained: heavy prompts, spikes drained, aborts", func() diagnose.Input {
			m := burstMetrics()
			m.RequestsPerSecond, m.AbortedRequestsPerSecond = f64(0.3), f64(0.2)
			return diagnose.Input{Metrics: m, History: burstHistory(120, false)}
		}},
		{"prefill bound", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft = dist(3, 25)
			m.PromptTokensPerSecond = f64(500000)
		})},
		{"prefill bound: by prompt length, with aborts", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft = dist(3, 25)
			m.PromptTokensPerSecond, m.RequestsPerSecond = f64(20000), f64(0.5)
			m.AbortedRequestsPerSecond = f64(0.05)
			m.InterToken = dist(0.05, 0.5)
		})},
		{"prefill bound: a small queue of prompts in prefill", func() diagnose.Input {
			m := healthyMetrics()
			m.Ttft = dist(6, 35)
			m.Queue, m.Running = f64(4), f64(1)
			m.PromptTokensPerSecond, m.RequestsPerSecond = f64(7000), f64(0.1)
			h := flatHistory(60, 0, 1)
			for i := 0; i < 60; i += 3 {
				h[i].Queue = f64(4)
			}
			return diagnose.Input{Metrics: m, History: h}
		}},
		{"prefill bound: queue-time split says prefill", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft = dist(3, 25)
			m.Ttft.Mean = f64(5)
			m.QueueTime = dist(0.1, 0.5)
			m.QueueTime.Mean = f64(0.2)
			m.PromptTokensPerSecond = f64(500000)
		})},
		{"heavy prompts, TTFT fine", withM(func(m *llmdiagv1.NodeMetrics) { m.PromptTokensPerSecond = f64(500000) })},
		{"decode bound, no profile", noHist(func(m *llmdiagv1.NodeMetrics) {
			m.GenerationTokensPerSecond = f64(30)
			m.E2E = dist(60, 300)
		})},
		{"decode bound, no profile, from TPOT", noHist(func(m *llmdiagv1.NodeMetrics) {
			m.GenerationTokensPerSecond = f64(30)
			m.Running = nil
			m.TimePerOutputToken = dist(0.2, 0.5)
			m.E2E = dist(60, 300)
		})},
		{"decode bound, small model", func() diagnose.Input {
			m := healthyMetrics()
			m.GenerationTokensPerSecond = f64(30)
			m.E2E = dist(60, 300)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10), Profile: &llmdiagv1.Profile{ActiveParamsBillions: 8, TensorParallel: 2}}
		}},
		{"decode bound, critical tail, TP", func() diagnose.Input {
			m := healthyMetrics()
			m.GenerationTokensPerSecond = f64(30)
			m.E2E = dist(600, 3600)
			return diagnose.Input{Metrics: m, Profile: &llmdiagv1.Profile{TensorParallel: 8, ActiveParamsBillions: 70}}
		}},
		{"decode bound, slow peer group", func() diagnose.Input {
			m := healthyMetrics()
			m.GenerationTokensPerSecond = f64(30)
			m.E2E = dist(60, 300)
			return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 280), peer("c", 320)}, Profile: largeDP}
		}},
		{"decode bound: stalls between tokens", func() diagnose.Input {
			m := healthyMetrics()
			m.InterToken = dist(0.2, 2.3)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10),
				Profile: &llmdiagv1.Profile{DataParallel: 8, ExpertParallel: 8, ActiveParamsBillions: 37}}
		}},
		{"decode slow, tail fine", withM(func(m *llmdiagv1.NodeMetrics) { m.GenerationTokensPerSecond = f64(30) })},
		{"decode slow, MoE DP", func() diagnose.Input {
			m := healthyMetrics()
			m.GenerationTokensPerSecond = f64(30)
			return diagnose.Input{Metrics: m, Profile: largeDP}
		}},
		{"decode slow, large model", func() diagnose.Input {
			m := healthyMetrics()
			m.GenerationTokensPerSecond = f64(30)
			return diagnose.Input{Metrics: m, Profile: &llmdiagv1.Profile{ActiveParamsBillions: 70, TensorParallel: 4}}
		}},
		{"decode slow, DP only", func() diagnose.Input {
			m := healthyMetrics()
			m.GenerationTokensPerSecond = f64(30)
			return diagnose.Input{Metrics: m, Profile: &llmdiagv1.Profile{DataParallel: 4, ActiveParamsBillions: 8}}
		}},
		{"node outlier", func() diagnose.Input {
			m := healthyMetrics()
			m.E2E = dist(20, 90)
			return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 20), peer("c", 25), peer("d", 18)}}
		}},
		{"node outlier, far out", func() diagnose.Input {
			m := healthyMetrics()
			m.E2E = dist(20, 300)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10), Peers: []*llmdiagv1.NodeMetrics{peer("b", 20), peer("c", 25), peer("d", 18)}}
		}},
		{"node outlier over decode bound", func() diagnose.Input {
			m := healthyMetrics()
			m.GenerationTokensPerSecond = f64(30)
			m.E2E = dist(60, 300)
			return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 40), peer("c", 50)}}
		}},
		{"node outlier over prefill bound", func() diagnose.Input {
			m := healthyMetrics()
			m.Ttft = dist(3, 25)
			m.PromptTokensPerSecond = f64(500000)
			m.E2E = dist(20, 300)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10), Peers: []*llmdiagv1.NodeMetrics{peer("b", 20), peer("c", 25)}}
		}},
		{"unexplained: peers stale, down or another model", func() diagnose.Input {
			m := healthyMetrics()
			m.E2E = dist(20, 90)
			stale, dn, other := peer("b", 20), peer("c", 20), peer("d", 20)
			stale.Stale, dn.Up, other.Model = true, false, "other"
			return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{stale, dn, other, m}}
		}},
		{"unexplained: KV between warn and crit", noHist(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = f64(0.92) })},
		{"unexplained: a few preemptions", withM(func(m *llmdiagv1.NodeMetrics) { m.PreemptionsPerSecond = f64(0.005) })},
		{"unexplained: stalls and aborts", withM(func(m *llmdiagv1.NodeMetrics) {
			m.InterToken = dist(0.2, 2.3)
			m.AbortedRequestsPerSecond = f64(0.5)
		})},
		{"unexplained: aborts", withM(func(m *llmdiagv1.NodeMetrics) { m.AbortedRequestsPerSecond = f64(0.4) })},
		{"unexplained: inter-token stalls, heavy prompts", noHist(func(m *llmdiagv1.NodeMetrics) {
			m.InterToken = dist(0.05, 0.5)
			m.PromptTokensPerSecond = f64(500000)
		})},
		{"unexplained: mean E2E rising", func() diagnose.Input { return diagnose.Input{Metrics: healthyMetrics(), History: risingHistory()} }},
		{"unexplained: slow E2E shared by the whole group", func() diagnose.Input {
			m := healthyMetrics()
			m.E2E = dist(20, 90)
			return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 80), peer("c", 100)}}
		}},
		{"unexplained: TTFT high, light prompts", withM(func(m *llmdiagv1.NodeMetrics) { m.Ttft = dist(3, 25) })},
		{"unexplained: TTFT high, mostly queue time", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft = dist(3, 25)
			m.Ttft.Mean = f64(4)
			m.QueueTime = dist(2, 15)
			m.QueueTime.Mean = f64(3)
			m.AbortedRequestsPerSecond = f64(0.5)
		})},
		{"mostly queue time, TTFT short", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft.Mean = f64(0.4)
			m.QueueTime = dist(0.2, 0.6)
			m.QueueTime.Mean = f64(0.3)
		})},
		{"field case: TTFT 0.20 s, queue time 7.6 s", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft = dist(0.15, 0.6)
			m.Ttft.Mean = f64(0.2)
			m.QueueTime = dist(6, 25)
			m.QueueTime.Mean = f64(7.6)
		})},
		{"unexplained: ratio above warn for three refreshes", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue, m.Running = f64(2), f64(3)
			h := flatHistory(30, 0, 3)
			h[28].Queue, h[29].Queue = f64(2), f64(1)
			return diagnose.Input{Metrics: m, History: h}
		}},
		{"unexplained: queue critical", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue, m.Running, m.QueueRunningRatio = f64(80), nil, nil
			h := flatHistory(10, 0, 10)
			for i := range h {
				h[i].Queue, h[i].Running = f64(70), nil
			}
			return diagnose.Input{Metrics: m, History: h}
		}},
		{"E2E with no observations", withM(func(m *llmdiagv1.NodeMetrics) {
			m.E2E = &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.99, Value: -1}}}
		})},
		{"contradiction: KV pressure just above 1", withM(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = f64(1.02) })},
		{"contradiction: KV pressure far above 1", withM(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = f64(2.4) })},
		{"contradiction: negative rates", withM(func(m *llmdiagv1.NodeMetrics) {
			m.GenerationTokensPerSecond, m.PreemptionsPerSecond, m.KvCapacityTokens = f64(-12), f64(-0.02), f64(-1)
		})},
		{"contradiction: running stuck at 0", func() diagnose.Input { return stuckRunningInput(true) }},
		{"running 0, just gone idle", func() diagnose.Input { return stuckRunningInput(false) }},
		{"contradiction: TTFT a little below queue time", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft = dist(3, 25)
			m.Ttft.Mean = f64(4)
			m.QueueTime = dist(3, 22)
			m.QueueTime.Mean = f64(5)
		})},
		{"KV offload: full by design", withM(func(m *llmdiagv1.NodeMetrics) {
			m.KvPressure, m.KvOffload = f64(0.99), "lmcache"
		})},
		{"KV offload declared, full by design, effects", func() diagnose.Input {
			m := healthyMetrics()
			m.KvPressure = f64(0.99)
			m.PrefixCacheHitRate, m.SpecDecodeAcceptanceRate, m.SpecDecodeAcceptLength = f64(0.7), f64(0.6), f64(2.8)
			m.LoraAdaptersRunning, m.LoraAdaptersWaiting = f64(2), f64(0)
			return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10), Profile: &llmdiagv1.Profile{KvOffload: "cpu"}}
		}},
		{"KV offload, preempting: exhausted after all", withM(func(m *llmdiagv1.NodeMetrics) {
			m.KvPressure, m.KvOffload, m.PreemptionsPerSecond = f64(0.99), "lmcache", f64(0.5)
		})},
		{"KV offload, queueing: exhausted after all", withM(func(m *llmdiagv1.NodeMetrics) {
			m.KvPressure, m.KvOffload, m.Queue = f64(0.99), "lmcache", f64(40)
		})},
		{"decode bound, low speculative acceptance", noHist(func(m *llmdiagv1.NodeMetrics) {
			m.GenerationTokensPerSecond = f64(30)
			m.E2E = dist(60, 300)
			m.SpecDecodeAcceptanceRate, m.SpecDecodeAcceptLength = f64(0.15), f64(1.4)
		})},
		{"decode bound, speculative decoding helps", noHist(func(m *llmdiagv1.NodeMetrics) {
			m.GenerationTokensPerSecond = f64(30)
			m.E2E = dist(60, 300)
			m.SpecDecodeAcceptanceRate, m.SpecDecodeAcceptLength = f64(0.7), f64(3.1)
		})},
		{"prefill bound, prefix cache cold", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft = dist(3, 25)
			m.PromptTokensPerSecond = f64(500000)
			m.PrefixCacheHitRate = f64(0.02)
		})},
		{"prefill bound, prefix cache some", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Ttft = dist(3, 25)
			m.PromptTokensPerSecond = f64(500000)
			m.PrefixCacheHitRate = f64(0.3)
		})},
		{"burst: queueing now, requests wait for LoRA adapters", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Queue = f64(12)
			m.LoraAdaptersRunning, m.LoraAdaptersWaiting = f64(4), f64(2)
		})},
		// LoRA adapter contention (cause_lora.go) and why it is ruled out.
		{"LoRA contention", withM(func(m *llmdiagv1.NodeMetrics) { loraContention(m) })},
		{"LoRA contention, TTFT mostly queued", withM(func(m *llmdiagv1.NodeMetrics) {
			loraContention(m)
			m.Ttft = dist(2, 25)
			m.QueueTime = dist(1.5, 20)
			m.QueueTime.Mean, m.Ttft.Mean = f64(3), f64(4)
			m.E2E = dist(20, 90)
		})},
		{"prefill bound, no adapter waited for", withM(func(m *llmdiagv1.NodeMetrics) {
			prefillLoRA(m, []string{"a"}, nil, 1)
		})},
		{"prefill bound, adapters waited for loaded", withM(func(m *llmdiagv1.NodeMetrics) {
			prefillLoRA(m, []string{"a"}, []string{"a", "b"}, 1)
		})},
		{"prefill bound, an adapter slot free", withM(func(m *llmdiagv1.NodeMetrics) {
			prefillLoRA(m, []string{"a"}, []string{"b"}, 2)
		})},
		{"prefill bound, max_lora unknown", withM(func(m *llmdiagv1.NodeMetrics) {
			prefillLoRA(m, []string{"a"}, []string{"b"}, 0)
		})},
		{"prefill bound, adapters contend, no queue", withM(func(m *llmdiagv1.NodeMetrics) {
			prefillLoRA(m, []string{"a"}, []string{"b"}, 1)
			m.Queue = f64(0)
		})},
		{"scrape errors", withM(func(m *llmdiagv1.NodeMetrics) {
			m.KvPressure = nil
			m.Errors = []string{"family vllm:kv_cache_usage_perc: missing"}
		})},
		{"source warnings", withM(func(m *llmdiagv1.NodeMetrics) {
			m.KvPressure = nil
			m.Warnings = []string{"family vllm:kv_cache_usage_perc left out"}
		})},
		// GPU figures from DCGM (gpu.go).
		{"seed, GPUs starved in lockstep", diagnosetest.SeedGPUInput},
		{"seed, GPUs starved", seedGPU(func(in *diagnose.Input) { in.Profile.ExpertParallel = 0 })},
		{"seed, GPUs starved, requests waiting", seedGPU(func(in *diagnose.Input) { in.Metrics.Queue = f64(2) })},
		{"seed, GPUs at the memory-bandwidth limit", seedGPU(func(in *diagnose.Input) {
			in.Metrics.Gpu = diagnosetest.GPU(8, "NVIDIA H20", 0.85, 0.2, 0.8)
		})},
		{"seed, GPUs compute-bound", seedGPU(func(in *diagnose.Input) {
			in.Metrics.Gpu = diagnosetest.GPU(8, "NVIDIA H20", 0.9, 0.6, 0.3)
		})},
		{"seed, GPUs between limits", seedGPU(func(in *diagnose.Input) {
			in.Metrics.Gpu = diagnosetest.GPU(8, "NVIDIA H20", 0.5, 0.2, 0.45)
		})},
		{"seed, GPU utilisation only", seedGPU(func(in *diagnose.Input) {
			in.Metrics.Gpu = diagnosetest.GPU(8, "", -1, -1, -1)
		})},
		{"seed, GPU utilisation only, low", seedGPU(func(in *diagnose.Input) {
			in.Metrics.Gpu = diagnosetest.GPU(8, "", -1, -1, -1)
			in.Metrics.Gpu.Utilization = f64(0.3)
		})},
		{"seed, GPU SM only, low", seedGPU(func(in *diagnose.Input) {
			in.Metrics.Gpu = diagnosetest.GPU(8, "", 0.2, -1, -1)
		})},
		{"seed, GPU throttled and XID", seedGPU(func(in *diagnose.Input) {
			in.Metrics.Gpu = diagnosetest.XID(diagnosetest.Throttle(diagnosetest.GPU(8, "NVIDIA H20", 0.36, 0.18, 0.12), 3), 5, 48, in.Metrics.GetObservedAt())
		})},
		{"healthy, GPU throttled", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Gpu = diagnosetest.Throttle(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 3)
		})},
		{"healthy, GPU XID", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 2, 79, m.GetObservedAt())
		})},
		{"healthy, GPU XID 79 older than gpu_xid_window", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 2, 79,
				timestamppb.New(m.GetObservedAt().AsTime().Add(-2*time.Hour)))
		})},
		{"healthy, GPU XID 79 at the first read", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 2, 79, m.GetObservedAt())
			m.Gpu.XidErrors[0].AtFirstRead = true
		})},
		{"healthy, GPU XID 31 counted", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 2, 31, m.GetObservedAt())
			m.Gpu.XidErrors[0].Count = new(uint64(3))
		})},
		{"healthy, GPU XID not in the catalogue", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 4, 60001, m.GetObservedAt())
		})},
		{"healthy, GPU XID 63 informational", withM(func(m *llmdiagv1.NodeMetrics) {
			m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 2, 63, m.GetObservedAt())
		})},
		{"KV exhausted, GPU XID", withM(func(m *llmdiagv1.NodeMetrics) {
			m.KvPressure = f64(0.97)
			m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.4, 0.1, 0.2), 2, 13, m.GetObservedAt())
		})},
	}
}

// seedGPU is the seed node with its DCGM exporter read
// (diagnosetest.SeedGPUInput), edited.
func seedGPU(edit func(in *diagnose.Input)) func() diagnose.Input {
	return func() diagnose.Input {
		in := diagnosetest.SeedGPUInput()
		edit(&in)
		return in
	}
}

// claimKnockout removes one figure from an input.
type claimKnockout struct {
	name  string
	apply func(in *diagnose.Input)
}

// claimKnockouts knocks out every figure the rules read, one at a time:
// each gauge and rate, each distribution whole and its percentiles or mean
// alone, the data's age, the queue or running gauge behind a reported
// ratio, the history, the peers and the profile. It also makes the figures
// contradict each other, one way at a time (consistency.go).
func claimKnockouts() []claimKnockout {
	out := []claimKnockout{{"nothing", func(*diagnose.Input) {}}}
	metric := func(name string, edit func(m *llmdiagv1.NodeMetrics)) {
		out = append(out, claimKnockout{name, func(in *diagnose.Input) {
			if in.Metrics != nil {
				edit(in.Metrics)
			}
		}})
	}
	for name, get := range map[string]func(m *llmdiagv1.NodeMetrics) **float64{
		"queue":                 func(m *llmdiagv1.NodeMetrics) **float64 { return &m.Queue },
		"running":               func(m *llmdiagv1.NodeMetrics) **float64 { return &m.Running },
		"queue/running":         func(m *llmdiagv1.NodeMetrics) **float64 { return &m.QueueRunningRatio },
		"KV pressure":           func(m *llmdiagv1.NodeMetrics) **float64 { return &m.KvPressure },
		"KV capacity":           func(m *llmdiagv1.NodeMetrics) **float64 { return &m.KvCapacityTokens },
		"prompt rate":           func(m *llmdiagv1.NodeMetrics) **float64 { return &m.PromptTokensPerSecond },
		"generation rate":       func(m *llmdiagv1.NodeMetrics) **float64 { return &m.GenerationTokensPerSecond },
		"decode per request":    func(m *llmdiagv1.NodeMetrics) **float64 { return &m.DecodeTokensPerSecondPerRequest },
		"preemptions":           func(m *llmdiagv1.NodeMetrics) **float64 { return &m.PreemptionsPerSecond },
		"finished requests":     func(m *llmdiagv1.NodeMetrics) **float64 { return &m.RequestsPerSecond },
		"aborts":                func(m *llmdiagv1.NodeMetrics) **float64 { return &m.AbortedRequestsPerSecond },
		"prefix-cache hit rate": func(m *llmdiagv1.NodeMetrics) **float64 { return &m.PrefixCacheHitRate },
		"spec acceptance":       func(m *llmdiagv1.NodeMetrics) **float64 { return &m.SpecDecodeAcceptanceRate },
		"spec accept length":    func(m *llmdiagv1.NodeMetrics) **float64 { return &m.SpecDecodeAcceptLength },
		"LoRA running":          func(m *llmdiagv1.NodeMetrics) **float64 { return &m.LoraAdaptersRunning },
		"LoRA waiting":          func(m *llmdiagv1.NodeMetrics) **float64 { return &m.LoraAdaptersWaiting },
		"max LoRA":              func(m *llmdiagv1.NodeMetrics) **float64 { return &m.MaxLora },
	} {
		metric(name, func(m *llmdiagv1.NodeMetrics) { *get(m) = nil })
	}
	for name, get := range map[string]func(m *llmdiagv1.NodeMetrics) **llmdiagv1.Distribution{
		"TTFT":                  func(m *llmdiagv1.NodeMetrics) **llmdiagv1.Distribution { return &m.Ttft },
		"E2E":                   func(m *llmdiagv1.NodeMetrics) **llmdiagv1.Distribution { return &m.E2E },
		"inter-token":           func(m *llmdiagv1.NodeMetrics) **llmdiagv1.Distribution { return &m.InterToken },
		"time per output token": func(m *llmdiagv1.NodeMetrics) **llmdiagv1.Distribution { return &m.TimePerOutputToken },
		"queue time":            func(m *llmdiagv1.NodeMetrics) **llmdiagv1.Distribution { return &m.QueueTime },
	} {
		metric(name, func(m *llmdiagv1.NodeMetrics) { *get(m) = nil })
		metric(name+" percentiles", func(m *llmdiagv1.NodeMetrics) {
			if d := *get(m); d != nil {
				d.Percentiles = nil
			}
		})
		metric(name+" mean", func(m *llmdiagv1.NodeMetrics) {
			if d := *get(m); d != nil {
				d.Mean, d.Sum, d.Count = nil, 0, 0
			}
		})
	}
	metric("data age", func(m *llmdiagv1.NodeMetrics) { m.Staleness = nil })
	metric("KV offload tier", func(m *llmdiagv1.NodeMetrics) { m.KvOffload = "" })
	metric("GPU DRAM activity", func(m *llmdiagv1.NodeMetrics) {
		if m.Gpu != nil {
			m.Gpu.DramActive, m.Gpu.DramActiveMin, m.Gpu.DramActiveMax = nil, nil, nil
		}
	})
	metric("GPU tensor activity", func(m *llmdiagv1.NodeMetrics) {
		if m.Gpu != nil {
			m.Gpu.TensorActive = nil
		}
	})
	metric("GPU clock events", func(m *llmdiagv1.NodeMetrics) {
		if m.Gpu != nil {
			m.Gpu.ClockEventMask, m.Gpu.ClockEventReasons, m.Gpu.ThrottledGpus = nil, nil, nil
		}
	})
	metric("GPU XID", func(m *llmdiagv1.NodeMetrics) {
		if m.Gpu != nil {
			m.Gpu.XidRead, m.Gpu.XidErrors = false, nil
		}
	})
	metric("GPU section", func(m *llmdiagv1.NodeMetrics) { m.Gpu = nil })
	metric("queue, ratio reported", func(m *llmdiagv1.NodeMetrics) {
		if m.Queue != nil && m.Running != nil && *m.Running > 0 {
			m.QueueRunningRatio = f64(*m.Queue / *m.Running)
		}
		m.Queue = nil
	})
	metric("running, ratio reported", func(m *llmdiagv1.NodeMetrics) {
		if m.Queue != nil && m.Running != nil && *m.Running > 0 {
			m.QueueRunningRatio = f64(*m.Queue / *m.Running)
		}
		m.Running = nil
	})
	// Contradictions, which the consistency checks read differently.
	metric("negative generation rate", func(m *llmdiagv1.NodeMetrics) {
		if m.GenerationTokensPerSecond != nil {
			m.GenerationTokensPerSecond = f64(-*m.GenerationTokensPerSecond - 1)
		}
	})
	metric("KV pressure above 1", func(m *llmdiagv1.NodeMetrics) {
		if m.KvPressure != nil {
			m.KvPressure = f64(1.02)
		}
	})
	metric("running 0", func(m *llmdiagv1.NodeMetrics) {
		if m.Running != nil {
			m.Running = f64(0)
		}
	})
	metric("TTFT excluding queue time", func(m *llmdiagv1.NodeMetrics) {
		if m.Ttft != nil && m.QueueTime == nil {
			m.QueueTime = proto.Clone(m.Ttft).(*llmdiagv1.Distribution)
		}
		if m.Ttft != nil {
			m.Ttft.Mean, m.Ttft.Sum, m.Ttft.Count = f64(0.05), 0, 0
		}
		if m.QueueTime != nil && m.QueueTime.Mean == nil {
			m.QueueTime.Mean = f64(3)
		}
	})
	metric("LoRA adapter names", func(m *llmdiagv1.NodeMetrics) { m.LoraRunningAdapters, m.LoraWaitingAdapters = nil, nil })
	out = append(out,
		claimKnockout{"history", func(in *diagnose.Input) { in.History = nil }},
		claimKnockout{"history's running", func(in *diagnose.Input) {
			for i := range in.History {
				in.History[i].Running = nil
			}
		}},
		claimKnockout{"peers", func(in *diagnose.Input) { in.Peers = nil }},
		claimKnockout{"profile", func(in *diagnose.Input) { in.Profile = nil }},
	)
	sort.Slice(out[1:], func(i, j int) bool { return out[1+i].name < out[1+j].name })
	return out
}

// TestCatalogClaims is the catalog test: no text llmdiag writes asserts
// what its figures do not say, nor is malformed (arguments that do not fit
// their format, which fmt spells out as "%!"). Every variant of every rule is diagnosed
// with each figure knocked out in turn, in English and Chinese, and every
// claim of every catalog entry the diagnosis was written from must hold.
// Every entry with claims must be written by some variant, so that a new
// message cannot escape the check.
func TestCatalogClaims(t *testing.T) {
	th := diagnose.DefaultThresholds()
	covered := map[int]bool{}
	type where struct{ variant, knockout string }
	violations := map[string][]where{}
	for _, v := range append(claimVariants(), roleClaimVariants()...) {
		for _, k := range claimKnockouts() {
			in := v.in()
			if in.Metrics != nil {
				in.Metrics = proto.Clone(in.Metrics).(*llmdiagv1.NodeMetrics)
			}
			in.History = slices.Clone(in.History)
			k.apply(&in)
			for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
				r := diagnose.CheckClaims(in, th, lang)
				for _, s := range texts(diagnose.Diagnose(in, th, lang)) {
					if strings.Contains(s, "%!") {
						msg := "malformed text (its arguments do not fit its format): " + s
						violations[msg] = append(violations[msg], where{v.name, k.name})
					}
				}
				for _, id := range r.Claiming {
					covered[id] = true
				}
				for _, msg := range r.Violations {
					violations[msg] = append(violations[msg], where{v.name, k.name})
				}
			}
		}
	}
	var keys []string
	for msg := range violations {
		keys = append(keys, msg)
	}
	sort.Strings(keys)
	for _, msg := range keys {
		ws := slices.Compact(violations[msg])
		var b strings.Builder
		for i, w := range ws {
			if i == 3 {
				fmt.Fprintf(&b, "\n\t… and %d more", len(ws)-3)
				break
			}
			fmt.Fprintf(&b, "\n\t%s, knocked out: %s", w.variant, w.knockout)
		}
		t.Errorf("%s; in%s", msg, b.String())
	}
	var missing []string
	for id, text := range diagnose.ClaimingMsgs() {
		if !covered[id] {
			missing = append(missing, fmt.Sprintf("%d %q", id, text))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("no variant writes catalog entry %s: add one to claimVariants", m)
	}
}

// stuckRunningInput is a node generating ~400 tok/s whose running gauge
// reads 0 now and over the last refreshes, with 3 waiting: with rising set
// the window's generation rate rises between them (tokens came out: a
// contradiction), else it falls with nothing waiting (the node has just
// gone idle).
func stuckRunningInput(rising bool) diagnose.Input {
	m := healthyMetrics()
	m.Running, m.Queue = f64(0), f64(3)
	h := flatHistory(10, 3, 0)
	if !rising {
		m.Queue = f64(0)
		h = flatHistory(10, 0, 0)
	}
	for i := range h {
		r := 300 + 10*float64(i)
		if !rising {
			r = 500 - 10*float64(i)
		}
		h[i].GenerationRate = f64(r)
	}
	if !rising {
		m.GenerationTokensPerSecond = f64(390)
	}
	return diagnose.Input{Metrics: m, History: h}
}

// loraContention edits m into the LoRA shape of the simulator's
// lora-contention scenario: two adapters, one slot (max_lora 1), a held by
// the 3 running requests, 3 queued for b.
func loraContention(m *llmdiagv1.NodeMetrics) {
	m.Queue, m.Running, m.QueueRunningRatio = f64(3), f64(3), f64(1)
	m.LoraAdaptersRunning, m.LoraAdaptersWaiting, m.MaxLora = f64(1), f64(1), f64(1)
	m.LoraRunningAdapters, m.LoraWaitingAdapters = []string{"a"}, []string{"b"}
}

// prefillLoRA edits m into a prefill-bound node (a TTFT tail, heavy
// prompts, a short queue) with the given LoRA adapters running and waited
// for, and max_lora (0: not exported), so that LoRA contention is weighed
// and ruled out.
func prefillLoRA(m *llmdiagv1.NodeMetrics, running, waiting []string, maxLoRA float64) {
	m.Ttft = dist(3, 25)
	m.PromptTokensPerSecond = f64(500000)
	m.Queue = f64(1)
	m.LoraAdaptersRunning, m.LoraAdaptersWaiting = f64(float64(len(running))), f64(float64(len(waiting)))
	m.LoraRunningAdapters, m.LoraWaitingAdapters = running, waiting
	if maxLoRA > 0 {
		m.MaxLora = f64(maxLoRA)
	}
}
