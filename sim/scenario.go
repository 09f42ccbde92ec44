package sim

import (
	"fmt"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
)

// Model names used by the scenarios.
const (
	ModelDeepSeek = "deepseek-v4"
	ModelGLM      = "glm-4.6"
	ModelKimi     = "kimi-k2.6"
)

// scenarios in the order Scenarios lists them.
var scenarioNames = []string{"seed", "kv-exhausted", "overloaded", "burst", "prefill-heavy", "down"}

// Scenarios lists the names Scenario accepts.
func Scenarios() []string { return append([]string(nil), scenarioNames...) }

// Scenario returns a ready-made fleet:
//
//   - seed: the seed document's fleet. deepseek-v4-0/1 (vLLM, DP=8 TP=1
//     EP=8 on H20, DP ranks in lockstep): KV ≈ 0.3, queue ≈ 0 with short
//     spikes, prompt ≈ 20,000 tok/s, generation ≈ 120 tok/s, E2E P99 in
//     minutes, because long prompts prefilled on any rank stall decode on
//     all of them; glm-4.6-0/1 (SGLang, TP=8 on H100) healthy; kimi-k2.6-0
//     (vLLM, TP=8 DP=1 on H200) with faster per-request decode and a single
//     batch.
//   - kv-exhausted: kimi-k2.6-0 with a small KV cache and long contexts,
//     KV ≥ 0.95 and preemptions rising; kimi-k2.6-1 a healthy peer.
//   - overloaded: glm-4.6-0 offered about twice its batch-slot capacity,
//     queue sustained high with KV below the preemption point; glm-4.6-1
//     a healthy peer.
//   - burst: kimi-k2.6-0 with 10 s bursts at 20× the rate every 2 minutes,
//     queue spikes that drain within a minute.
//   - prefill-heavy: glm-4.6-0 on H20 with very long prompts, TTFT tail of
//     tens of seconds, queue low; glm-4.6-1 a peer with chat traffic.
//   - down: glm-4.6-0, kimi-k2.6-0 healthy and glm-4.6-1 down (listener
//     closed) from the moment the fleet starts serving.
//
// The figures measured for each are in scenario_test.go.
func Scenario(name string, seed int64) (Config, error) {
	cfg := Config{Name: name, Seed: seed}
	switch name {
	case "seed":
		cfg.Nodes = []Node{deepseek(0), deepseek(1), glm(0), glm(1), kimi(0)}
	case "kv-exhausted":
		n := kimi(0)
		n.Workload.Rate = 0.75
		n.Workload.Prompt = LogNormal(8000, 0.5)
		n.Workload.Output = LogNormal(2000, 0.7)
		cfg.Nodes = []Node{n, kimi(1)}
	case "overloaded":
		n := glm(0)
		n.Workload.Rate = 7.5
		n.Workload.QueueTimeout = 5 * time.Minute
		n.Perf.MaxNumSeqs = 48
		n.Perf.KVCapacityTokens = 400000
		cfg.Nodes = []Node{n, glm(1)}
	case "burst":
		n := kimi(0)
		n.Perf.MaxNumSeqs = 20
		n.Workload.Rate = 0.3
		n.Workload.Burst = &Burst{Every: 2 * time.Minute, Length: 10 * time.Second, Factor: 20}
		cfg.Nodes = []Node{n}
	case "prefill-heavy":
		n := kimi(0)
		n.Profile.GPU = "H20"
		n.Perf = kimiPerf(n.Profile)
		n.Perf.KVCapacityTokens = 12288 * 64
		n.Perf.MaxModelLen = 131072
		n.Perf.MaxBatchedTokens = 2048
		n.Workload.Rate = 0.12
		n.Workload.Prompt = LogNormal(48000, 0.5)
		n.Workload.Output = LogNormal(150, 0.7)
		cfg.Nodes = []Node{n, kimi(1)}
	case "down":
		d := glm(1)
		d.Down = []Window{{Start: 0}}
		cfg.Nodes = []Node{glm(0), d, kimi(0)}
	default:
		return Config{}, fmt.Errorf("unknown scenario %q (want one of %v)", name, scenarioNames)
	}
	return cfg, nil
}

// deepseek is a DeepSeek-class MoE (37B active of 671B) served by vLLM with
// DP attention over 8 ranks and EP=8 MoE: each rank has its own batch and
// KV (MLA, blocks of 64) but all ranks step together. Agentic traffic: long
// prompts (median 20k tokens), mostly short answers with a 2% tail of long
// reasoning (median 4,000 tokens).
func deepseek(i int) Node {
	p := fleet.Profile{DataParallel: 8, TensorParallel: 1, ExpertParallel: 8, GPU: "H20",
		ActiveParamsBillions: 37, TotalParamsBillions: 671}
	perf := EstimatePerf(p)
	perf.MaxBatchedTokens = 8192
	perf.MaxNumSeqs = 256
	perf.BlockSize = 64
	perf.KVCapacityTokens = 2048 * 64
	perf.MaxModelLen = 65536
	return Node{
		ID: fmt.Sprintf("%s-%d", ModelDeepSeek, i), Model: ModelDeepSeek, Engine: VLLM, Profile: p, Perf: perf,
		Workload: Workload{
			Rate:   0.67,
			Prompt: LogNormal(28000, 0.3),
			Output: Lengths{
				{Weight: 0.964, Median: 30, Sigma: 0.9},
				{Weight: 0.036, Median: 3000, Sigma: 0.6},
			},
			PrefixCacheHit: 0.75,
			MaxTokens:      32768,
		},
	}
}

// glm is GLM-4.6 (32B active of 355B) on SGLang with TP=8: chat traffic.
func glm(i int) Node {
	p := fleet.Profile{DataParallel: 1, TensorParallel: 8, GPU: "H100",
		ActiveParamsBillions: 32, TotalParamsBillions: 355}
	return Node{
		ID: fmt.Sprintf("%s-%d", ModelGLM, i), Model: ModelGLM, Engine: SGLang, Profile: p, Perf: glmPerf(p),
		Workload: Workload{
			Rate:      3,
			Prompt:    LogNormal(3500, 0.8),
			Output:    LogNormal(300, 0.8),
			MaxTokens: 8192,
		},
	}
}

func glmPerf(p fleet.Profile) Perf {
	perf := EstimatePerf(p)
	perf.MaxBatchedTokens = 8192
	perf.MaxNumSeqs = 256
	perf.KVCapacityTokens = 300000
	perf.MaxModelLen = 202752
	return perf
}

// kimi is Kimi-K2.6 (32B active of 1T) on vLLM with TP=8 and one engine:
// per-request decode is fast, but the whole node is one batch whose MLA KV
// is replicated on every TP rank.
func kimi(i int) Node {
	p := fleet.Profile{DataParallel: 1, TensorParallel: 8, GPU: "H200",
		ActiveParamsBillions: 32, TotalParamsBillions: 1000}
	perf := kimiPerf(p)
	return Node{
		ID: fmt.Sprintf("%s-%d", ModelKimi, i), Model: ModelKimi, Engine: VLLM, Profile: p, Perf: perf,
		Workload: Workload{
			Rate:      0.8,
			Prompt:    LogNormal(4000, 1.0),
			Output:    LogNormal(500, 0.9),
			MaxTokens: 16384,
		},
	}
}

func kimiPerf(p fleet.Profile) Perf {
	perf := EstimatePerf(p)
	perf.MaxBatchedTokens = 8192
	perf.MaxNumSeqs = 128
	perf.BlockSize = 64
	perf.KVCapacityTokens = 4096 * 64
	perf.MaxModelLen = 262144
	return perf
}
