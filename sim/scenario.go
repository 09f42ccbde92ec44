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
	// ModelQwen is the small model of the schemas scenario; its upper case
	// shows where Dynamo lower-cases the model label.
	ModelQwen = "Qwen/Qwen3-8B"
	// ModelLlama is the dense 70B model of the gpu-bandwidth scenario.
	ModelLlama = "llama-3.3-70b"
)

// The idle-then-overload scenario's phases: idle, then overloaded, from
// the end of warm-up.
const (
	idleFor     = 10 * time.Minute
	overloadFor = 4 * time.Minute
)

// StalledAt is when the stalled scenario's engine hangs, from the end of
// warm-up: after the 5-minute window is covered, so that a run sees it
// healthy first.
const StalledAt = 6 * time.Minute

// GPUXIDAt is when the gpu-xid scenario's GPU first reports its XID, from
// the end of warm-up: after llmdiag's first reads, which must see it
// appear.
const GPUXIDAt = 2 * time.Minute

// SeedWarmup is the warm-up the seed scenario needs before its figures are
// steady: its long generations take up to ~15 minutes.
const SeedWarmup = 15 * time.Minute

// scenarios in the order Scenarios lists them.
var scenarioNames = []string{"seed", "kv-exhausted", "overloaded", "burst", "prefill-heavy", "down", "schemas",
	"idle-then-overload", "kv-flap", "kv-offload", "slo-burn", "gpu-throttled", "gpu-xid", "gpu-xid-old", "disaggregated",
	"stalled", "gpu-bandwidth", "spec-decode", "lora-contention"}

// Scenarios lists the names Scenario accepts.
func Scenarios() []string { return append([]string(nil), scenarioNames...) }

// Scenario returns a ready-made fleet with stable node ids:
//
//   - seed: the fleet of the worked example in docs/verdict-rules.md.
//     deepseek-v4-0/1: vLLM, DP=8 TP=1 EP=8 on H20, the DP ranks in
//     lockstep, agentic traffic from 50 closed-loop agent sessions (a
//     shared 20k-token system prompt and tool definitions, then ~3k tokens
//     of history and tool output; mostly tool calls, 5.5% long
//     generations). Decode is slow per request: a ~90 ms step (H20 is
//     compute-bound on MLA attention over long contexts), and
//     every turn's prefill on any rank stalls all ranks, so a step takes
//     ~330 ms on average, ~3 tok/s per request; ~40 requests decode at once
//     while KV and queue stay low: decode-bound, not memory- or queue-bound.
//     glm-4.6-0/1: SGLang TP=8 on H100, healthy chat.
//     kimi-k2.6-0: vLLM TP=8 DP=1 on H200, one batch, ~30× faster
//     per-request decode than DeepSeek at a sixth of its concurrency.
//   - kv-exhausted: kimi-k2.6-0 with 262k tokens of KV and more long
//     generations than fit: KV ≥ 0.95, preemptions rising, queue growing;
//     kimi-k2.6-1 a healthy peer.
//   - overloaded: glm-4.6-0 offered ~1.25× what its 48 batch slots serve:
//     queue sustained high (clients give up after 2 minutes), KV below the
//     preemption point; glm-4.6-1 a healthy peer.
//   - burst: kimi-k2.6-0 with 20 batch slots and 10 s bursts at 20× the
//     rate every 2 minutes: queue spikes that drain within a minute; and
//     the seed's deepseek-v4-0, open loop at 0.5 request/s with 10 s bursts
//     at 10×: decode-bound between bursts, its health moving with each one.
//   - prefill-heavy: kimi-k2.6-0 on H20 (prefill ~15k tok/s) with ~68k-token
//     prompts (median 64k) and short answers: TTFT tail of tens of seconds
//     in every 5-minute window, queue low; kimi-k2.6-1 a peer on H200 with
//     chat traffic.
//   - down: glm-4.6-0 and kimi-k2.6-0 healthy, glm-4.6-1 down (listener
//     closed) from the moment the fleet starts serving.
//   - schemas: one small healthy node per engine schema (see Engines), in
//     that order, each named after its engine (vllm-0, vllm-otel-0,
//     sglang-0, …, dynamo-0): Qwen/Qwen3-8B on one H100 with light chat
//     traffic (~1 request/s, a few running, queue empty, KV a few
//     percent). The nodes differ only in Engine, hence in their scheduling
//     policy (SGLang's for the two SGLang schemas) and KV block size, and in
//     their random draws.
//   - idle-then-overload: qwen3-8b-0, the schemas node (vLLM) with 4 batch
//     slots and the field quirks (FieldQuirks), gets no request at all,
//     during warm-up and for the first 10 minutes after it: its counters
//     and histograms are absent, its gauges 0. Then, for 4 minutes, 16
//     closed-loop clients (1 s think): all 4 slots busy and 8–12 waiting,
//     never draining; requests queue ~7 s while the TTFT it reports (from
//     scheduling) stays ~0.03 s. Then 2 clients (5 s think): the queue
//     drains within ~10 s and stays empty. qwen3-8b-1 is a healthy peer
//     with light chat traffic and vLLM's own exposition.
//   - kv-flap: qwen3-8b-0, the schemas node (vLLM) with 64k tokens of KV
//     and the field quirks (no preemption counter), serves closed-loop
//     clients with ~1,500-token prompts and outputs (2 s think): 15 of
//     them (KV ~0.5) until 3 minutes after warm-up, 34 (KV-bound: KV
//     0.95–1.0, preemptions, a queue of 0–10) from 3 to 6 and from 8 to 11
//     minutes, 15 in between and after. In the KV-bound phases KV dips
//     below 0.95 for a few seconds when a request ends while nobody waits:
//     at 5 s scrapes, 0–4 single-scrape dips per phase depending on the
//     seed, rarely two scrapes in a row.
//   - kv-offload: qwen3-8b-0, the schemas node (vLLM) with an LMCache CPU
//     offload tier (Node.KVOffload) and its light chat traffic: freed KV
//     blocks stay resident on the GPU, so GPU KV usage climbs to 0.99
//     within ~2 minutes and stays there by design, while only a few
//     requests run, nothing is preempted and nothing queues. vLLM shows
//     the tier by LMCache's lmcache: families; in the other schemas the
//     fleet file declares it (profile.kv_offload).
//   - spec-decode: qwen3-8b-0, the schemas node (vLLM) and its light chat
//     traffic with speculative decoding (3 draft tokens, each accepted
//     with probability 0.7 after an accepted one: ~51% of draft tokens
//     accepted, ~2.5 tokens per step and request, decode per request ~1.9×
//     faster) and four LoRA adapters, all loadable at once (no request
//     waits for one). vLLM schemas export the spec_decode counters and
//     lora_requests_info, SGLang schemas the spec_accept gauges, the others
//     neither.
//   - lora-contention: qwen3-8b-0, the schemas node (vLLM), serving three
//     LoRA adapters (sql, chat, code) with room for one in the running
//     batch (max_lora 1) to 5 closed-loop clients (0.5 s think), each
//     request naming one of them: while one adapter holds the slot, the
//     requests for the others queue behind it, however much batch room is
//     left, and the slot changes hands only when the last running request
//     of its adapter ends. A few running, 1–4 waiting (never above 4: 5
//     clients), the queue/running ratio sustained around 1; with three
//     adapters some request nearly always waits (with two, a refresh just
//     after a hand-over often finds the queue empty). vLLM schemas export
//     lora_requests_info (which adapters run and wait, and max_lora); the
//     others show only the queue.
//   - slo-burn: kimi-k2.6-0 (vLLM TP=8 on H200) serving RAG-style traffic
//     steadily: ~16k-token prompts (σ 0.6) at 0.5 request/s, short
//     answers. Its first tokens take ~220 ms at the median and up to about
//     a second, every window alike: nothing queues or fills (HEALTHY), but
//     a tight TTFT SLO (the matrix configures 99% within 250 ms: ~40%
//     miss) burns its budget steadily. The fleet has no SLO of its own:
//     SLOs are llmdiag's thresholds.
//   - gpu-throttled: glm-4.6-0 with GPU 3 (of its tensor-parallel 8) held
//     at ThermalClockRatio of its clock by thermal limits (DCGM clock-event
//     reasons sw_thermal_slowdown and hw_thermal_slowdown, 92 °C): its
//     compute runs that much slower, as tensor parallelism waits for its
//     slowest rank; glm-4.6-1 a healthy peer.
//   - gpu-xid: kimi-k2.6-0 whose GPU 5 reports XID 48 (a double-bit ECC
//     error) GPUXIDAt after warm-up and again a minute later (its
//     DCGM_EXP_XID_ERRORS_TOTAL counts both), and goes on serving;
//     kimi-k2.6-1 a healthy peer.
//   - gpu-xid-old: kimi-k2.6-0 whose GPU 2 reports XID 31 (a GPU memory
//     page fault, which the application's own kernels cause) from before
//     the run, and nothing new: an old XID of the application's that must
//     not drain the node; kimi-k2.6-1 a peer without XID.
//   - stalled: qwen3-8b-0, the schemas node (vLLM) with open-loop chat
//     traffic of longer answers (~1 request/s, median 1,000 tokens: ~10
//     running, no queue), hangs 6 minutes after warm-up (StalledAt) and
//     never recovers (Node.Hang): the iteration under way never ends, no
//     token is sampled and no request finishes or gives up, so every
//     counter and histogram stands still, while /metrics keeps answering
//     and its gauges show the batch that was running still running and the
//     queue growing by ~1 a second (~60 a minute). qwen3-8b-1 is a healthy
//     peer with the same traffic.
//   - disaggregated: one prefill and one decode worker of Kimi-K2.6 (1P1D,
//     vllm#22454: high TTFT with 1P1D), each with its own traffic of the
//     prefill-heavy scenario's ~68k-token prompts at 0.1 request/s, the KV
//     cache (~70 KB a token: 61 layers of 576 MLA values in 16 bits, ~4.8
//     GB a prompt) moving at 0.6 GB/s, a transfer path fallen back to TCP
//     through host memory. kimi-k2.6-prefill-0 (H20, role prefill) computes
//     the prompts and answers one token: TTFT tail of tens of seconds, queue
//     low, prefill-bound. kimi-k2.6-decode-0 (H200, role decode) receives
//     each KV cache before its first token (see disagg.go): ~8 s per
//     transfer, TTFT P99 ~15 s with heavy prompts that it does not prefill;
//     its decode is fast. The fleet file gives both roles.
//   - gpu-bandwidth: llama-3.3-70b-0, a dense 70B (Llama-3.3-70B, FP8
//     weights and KV cache, 160 kB a token) on vLLM with TP=4 over four
//     L40S (864 GB/s each), serving a batch-generation job:
//     GPUBandwidthSessions closed-loop clients (5 s between requests) with
//     short prompts (median 200 tokens) and long answers (median 1,800):
//     ~320 running, no queue, KV ~0.75 (peaks ~0.83) of its 600k tokens.
//     A step reads the weights (~20 ms) and the batch's KV (~21 ms),
//     computes ~0.19 ms per sequence (~61 ms) and spends ~8 ms on launches
//     and all-reduces; with the prompts' prefill, ~115 ms: ~8.7 tok/s per
//     request, ~2,800 tok/s in all, E2E P99 10–12 minutes. Its DCGM
//     exporter reads DRAM active ~0.62 (0.61–0.63 at any scrape), tensor
//     pipes ~0.22: decode-bound at the memory-bandwidth limit, which no
//     setting moves (a step cannot read less than the weights and the
//     batch's KV). llama-3.3-70b-1 is a healthy peer, the same deployment
//     with light chat traffic (~7 running, ~30 tok/s per request, E2E P99
//     under 30 s; a batch that small waits on the weight reads too, and
//     its memory interface is busy about as often, which nothing else
//     makes a fault).
//
// Every node also serves its GPUs as NVIDIA's DCGM exporter does, at
// DCGMPath (see GPUFault and the package's dcgm.go): the GPUs' activity
// follows the simulated steps (weight and KV reads keep the memory
// interface busy, prefill and attention the tensor pipes, a lockstep rank
// waiting for the others neither).
//
// Phases (Workload.Phases) are measured from the end of warm-up, as Down
// and Hang windows are.
//
// Any scenario can be exposed in another schema with WithEngine, which
// leaves its physics unchanged.
//
// Steady state observed with seed 1 (KV with seeds 2 and 3 in brackets),
// 15 simulated minutes of warm-up (SeedWarmup), then 20 minutes sampled
// every 5 s; rates from the counters, percentiles from the histograms'
// increase:
//
//	node (scenario)        KV mean       queue=0  queue mean    running  prompt tok/s  gen tok/s  preempt/20m  TTFT P50/P99   E2E P50/P99     ITL P50  TPOT mean
//	deepseek-v4-0 (seed)   0.30 [.31 .31] 65%      0.56 (max 4)  41       20.9k         121        0            2.1/5.3 s      10/786 s        89 ms    373 ms
//	deepseek-v4-1 (seed)   0.30 [.31 .31] 63%      0.58 (max 5)  41       20.4k         118        0            2.1/5.0 s      12/751 s        89 ms    399 ms
//	glm-4.6-0 (seed)       0.31 [.31 .32] 95%      0.05 (max 2)  17       14.5k         1230       0            0.06/0.39 s    4.3/32 s        13 ms    -
//	kimi-k2.6-0 (seed)     0.13 [.14 .13] 99%      0.01 (max 2)  6.9      5.4k          610        0            0.07/0.46 s    6.1/39 s        18 ms    11 ms
//	kimi-k2.6-0 (kv-exh.)  0.98 [.98 .98] 0%       288 (max 362) 24       6.9k          1990       682          400/635 s      349/478 s       18 ms    12 ms
//	glm-4.6-0 (overloaded) 0.62 [.63 .63] 0%       903 (max 970) 48       28.9k         2520       0            150/199 s      150/199 s       13 ms    -
//	kimi-k2.6-0 (burst)    0.14 [.13 .13] 82%      2.7 (max 37)  6.9      5.5k          582        0            0.33/19 s      10/49 s         18 ms    12 ms
//	kimi-k2.6-0 (prefill)  0.10 [.06 .10] 84%      0.27 (max 5)  1.4      7.0k          20         0            6.5/36 s       13/59 s         20 ms    49 ms
//
// The DeepSeek figures hold in every 5-minute window: over 60 node-hours
// (seeds 1–5) each window had 38–43 running, KV 0.29–0.33 (peak 0.36, never
// a preemption), 2.0–4.4 tok/s per request (generation ÷ running at the
// window's end), 87–170 tok/s generated, 16–24k tok/s of prompt, a queue
// of at most 9 (above 5 in under 0.3% of samples), TTFT P99 4.9–8 s and E2E P99
// 7–23 minutes (8.3–15.5 for 90% of windows, median 13): the tail is the
// long generations (median 1,300 tokens) at ~3 tok/s. E2E P50 is ~11 s,
// the tool calls; it cannot reach minutes with these prompts and this KV:
// by Little's law mean E2E = running ÷ arrival rate = 40 ÷ (20k tok/s ÷
// ~24k tokens per prompt) ≈ 50 s. 1-minute windows show 1.4–6.1 tok/s per
// request; their E2E P99 is over 90 s in 99.8% of them (unless no long
// generation finishes in the minute) and their TTFT P99 under 10 s in
// 99.97%.
//
// The seed scenario needs SeedWarmup: running and KV settle within ~5
// minutes, but the E2E tail only once the longest generations have had
// time to finish (after 10 minutes its P99 is still ~25% short).
func Scenario(name string, seed int64) (Config, error) {
	cfg := Config{Name: name, Seed: seed}
	switch name {
	case "seed":
		cfg.Nodes = []Node{deepseek(0), deepseek(1), glm(0), glm(1), kimi(0)}
	case "kv-exhausted":
		n := kimi(0)
		n.Perf.KVCapacityTokens = 4096 * 64
		n.Workload.Rate = 0.9
		n.Workload.Prompt = LogNormal(8000, 0.5)
		n.Workload.Output = LogNormal(2000, 0.7)
		cfg.Nodes = []Node{n, kimi(1)}
	case "overloaded":
		n := glm(0)
		n.Workload.Rate = 7.5
		n.Workload.QueueTimeout = 2 * time.Minute
		n.Perf.MaxNumSeqs = 48
		n.Perf.KVCapacityTokens = 400000
		cfg.Nodes = []Node{n, glm(1)}
	case "burst":
		n := kimi(0)
		n.Perf.MaxNumSeqs = 20
		n.Workload.Rate = 0.3
		n.Workload.Burst = &Burst{Every: 2 * time.Minute, Length: 10 * time.Second, Factor: 20}
		// The seed's DeepSeek node, open loop, with bursts of its own: a
		// node whose health moves for `llmdiag watch --model deepseek-v4`.
		d := deepseek(0)
		d.Workload.Sessions, d.Workload.Think = 0, 0
		d.Workload.Rate = 0.5
		d.Workload.Burst = &Burst{Every: 2 * time.Minute, Length: 10 * time.Second, Factor: 10}
		cfg.Nodes = []Node{n, d}
	case "prefill-heavy":
		n := kimi(0)
		n.Profile.GPU = "H20"
		n.Perf = kimiPerf(n.Profile)
		n.Perf.KVCapacityTokens = 12288 * 64
		n.Perf.MaxModelLen = 131072
		n.Perf.MaxBatchedTokens = 2048
		n.Workload.Rate = 0.1
		n.Workload.Prompt = LogNormal(64000, 0.35)
		n.Workload.Output = LogNormal(150, 0.7)
		cfg.Nodes = []Node{n, kimi(1)}
	case "down":
		d := glm(1)
		d.Down = []Window{{Start: 0}}
		cfg.Nodes = []Node{glm(0), d, kimi(0)}
	case "schemas":
		for _, e := range Engines() {
			cfg.Nodes = append(cfg.Nodes, small(e))
		}
	case "idle-then-overload":
		n := qwen(0)
		n.Quirks = FieldQuirks()
		n.Perf.MaxNumSeqs = 4
		n.Workload.Rate = 0
		n.Workload.Output = LogNormal(300, 0.5)
		n.Workload.Phases = []Phase{
			{At: idleFor, Sessions: 16, Think: time.Second},
			{At: idleFor + overloadFor, Sessions: 2, Think: 5 * time.Second},
		}
		cfg.Nodes = []Node{n, qwen(1)}
	case "kv-flap":
		n := qwen(0)
		n.Quirks = FieldQuirks()
		n.Perf.KVCapacityTokens = 65536
		n.Workload = Workload{
			Sessions: 15, Think: 2 * time.Second,
			Prompt: LogNormal(1500, 0.3), Output: LogNormal(1500, 0.3), MaxTokens: 4096,
		}
		for _, at := range []time.Duration{3 * time.Minute, 8 * time.Minute} {
			n.Workload.Phases = append(n.Workload.Phases,
				Phase{At: at, Sessions: 34, Think: 2 * time.Second},
				Phase{At: at + 3*time.Minute, Sessions: 15, Think: 2 * time.Second})
		}
		cfg.Nodes = []Node{n}
	case "kv-offload":
		n := qwen(0)
		n.KVOffload = "lmcache"
		cfg.Nodes = []Node{n}
	case "spec-decode":
		n := qwen(0)
		n.SpecDecode = &SpecDecode{DraftTokens: 3, AcceptRate: 0.7}
		n.LoRA = &LoRA{Adapters: []string{"sql", "chat", "code", "math"}, MaxLoaded: 4}
		cfg.Nodes = []Node{n}
	case "lora-contention":
		n := qwen(0)
		n.LoRA = &LoRA{Adapters: []string{"sql", "chat", "code"}, MaxLoaded: 1}
		n.Workload.Rate = 0
		n.Workload.Sessions, n.Workload.Think = 5, 500*time.Millisecond
		cfg.Nodes = []Node{n}
	case "slo-burn":
		n := kimi(0)
		n.Workload.Rate = 0.5
		n.Workload.Prompt = LogNormal(16000, 0.6)
		n.Workload.Output = LogNormal(200, 0.7)
		cfg.Nodes = []Node{n}
	case "gpu-throttled":
		n := glm(0)
		n.GPUFault = GPUFault{Throttle: ThrottleThermal, GPUs: []int{3}}
		cfg.Nodes = []Node{n, glm(1)}
	case "gpu-xid":
		n := kimi(0)
		n.GPUFault = GPUFault{XID: 48, GPUs: []int{5}, XIDAt: []time.Duration{GPUXIDAt, GPUXIDAt + time.Minute}}
		cfg.Nodes = []Node{n, kimi(1)}
	case "gpu-xid-old":
		n := kimi(0)
		n.GPUFault = GPUFault{XID: 31, GPUs: []int{2}}
		cfg.Nodes = []Node{n, kimi(1)}
	case "disaggregated":
		cfg.Nodes = disaggregated()
	case "gpu-bandwidth":
		n := llama(0)
		n.Workload = Workload{Sessions: GPUBandwidthSessions, Think: 5 * time.Second,
			Prompt: LogNormal(200, 0.5), Output: LogNormal(1800, 0.4), MaxTokens: 8192}
		cfg.Nodes = []Node{n, llama(1)}
	case "stalled":
		var ns []Node
		for i := range 2 {
			n := qwen(i)
			n.Workload.Output = LogNormal(1000, 0.5)
			ns = append(ns, n)
		}
		ns[0].Hang = []Window{{Start: StalledAt}}
		cfg.Nodes = ns
	default:
		return Config{}, fmt.Errorf("unknown scenario %q (want one of %v)", name, scenarioNames)
	}
	return cfg, nil
}

// deepseek is a DeepSeek-class MoE (37B active of 671B) served by vLLM with
// DP attention over 8 ranks and EP=8 MoE: each rank has its own batch and
// KV (MLA, blocks of 64) but all ranks step together.
//
// On H20 (a seventh of an H100's compute, more memory bandwidth) attention
// over long contexts is compute-bound: absorbed-MLA decode costs ~17 MFLOP
// per context token (0.23 ms per 1,000 tokens of a rank's batch context),
// prefill ~5 MFLOP per query-key pair (~1 ms per new token 23k tokens
// deep), computed on the request's own rank while the other seven wait at
// the next MoE all-to-all. A decode-only step takes ~90 ms; each agent
// turn's prefill (~1,000 new tokens, chunks of 2,048) stalls all ranks for
// about a second, and with ~0.85 turns a second the mean step is ~330 ms:
// ~3 tok/s per request.
//
// Agentic traffic from 50 sessions per node, each waiting for its answer
// and then ~10 s (tools) before its next turn. Every prompt starts with the
// same 20k-token system prompt and tool definitions (cached once per rank,
// KV shared by the running requests), then the session's history and the
// new tool output (median 3,000 tokens, 65% of it history still in the
// prefix cache): ~24k tokens a prompt, ~20k tok/s. Outputs are mostly tool
// calls (median 20 tokens), some messages (median 220) and 5.5% long code
// or reasoning (median 1,300): ~140 tokens on average, P99 ~2,000, which
// takes 10–15 minutes at ~3 tok/s. By Little's law the sessions split
// ~41 running (mean E2E ~48 s) to ~9 thinking (10 s).
func deepseek(i int) Node {
	p := fleet.Profile{DataParallel: 8, TensorParallel: 1, ExpertParallel: 8, GPU: "H20",
		ActiveParamsBillions: 37, TotalParamsBillions: 671}
	perf := EstimatePerf(p)
	gpu, _ := GPUSpec(p.GPU)
	flops := gpu.DenseTFLOPS * 1e12
	perf.StepPerKContext = max(perf.StepPerKContext, time.Duration(1000*mlaDecodeFLOPs/(flops*decodeMFU)*float64(time.Second)))
	perf.PrefillPerKContext = time.Duration(1000 * mlaPrefillFLOPs / (flops * prefillMFU) * float64(time.Second))
	perf.MaxBatchedTokens = 2048
	perf.MaxNumSeqs = 256
	perf.BlockSize = 64
	perf.KVCapacityTokens = 2048 * 64
	perf.MaxModelLen = 65536
	return Node{
		ID: fmt.Sprintf("%s-%d", ModelDeepSeek, i), Model: ModelDeepSeek, Engine: VLLM, Profile: p, Perf: perf,
		Workload: Workload{
			Sessions:     50,
			Think:        10 * time.Second,
			SharedPrefix: 20480,
			Prompt:       LogNormal(3000, 0.35),
			Output: Lengths{
				{Weight: 0.805, Median: 20, Sigma: 0.8},
				{Weight: 0.14, Median: 220, Sigma: 0.7},
				{Weight: 0.055, Median: 1300, Sigma: 0.5},
			},
			PrefixCacheHit: 0.65,
			MaxTokens:      32768,
		},
	}
}

// Attention FLOPs of an MLA model of DeepSeek-V3's shape (61 layers, 128
// heads, 512+64 latent KV, 192-dim query-key and 128-dim value heads):
// decode (absorbed) per context token, prefill per query-key pair.
const (
	mlaDecodeFLOPs  = 2 * 128 * (576 + 512) * 61
	mlaPrefillFLOPs = 2 * 128 * (192 + 128) * 61
)

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
			Prompt:    LogNormal(5000, 0.8),
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
	perf.KVCapacityTokens = 6144 * 64
	perf.MaxModelLen = 262144
	return perf
}

// qwen is the small model of small, on vLLM, with stable ids
// (qwen3-8b-0, …) for the scenarios that are not about schemas.
func qwen(i int) Node {
	n := small(VLLM)
	n.ID = fmt.Sprintf("qwen3-8b-%d", i)
	return n
}

// small is a dense 8B model on one H100 with light chat traffic, exposed
// as engine e.
func small(e Engine) Node {
	p := fleet.Profile{DataParallel: 1, TensorParallel: 1, GPU: "H100",
		ActiveParamsBillions: 8, TotalParamsBillions: 8}
	perf := EstimatePerf(p)
	perf.MaxBatchedTokens = 8192
	perf.MaxNumSeqs = 64
	perf.KVCapacityTokens = 200000
	perf.MaxModelLen = 32768
	return Node{
		ID: string(e) + "-0", Model: ModelQwen, Engine: e, Profile: p, Perf: perf,
		Workload: Workload{
			Rate:           1,
			Prompt:         LogNormal(1500, 0.8),
			Output:         LogNormal(200, 0.8),
			PrefixCacheHit: 0.3,
			MaxTokens:      4096,
		},
	}
}

// disaggregated is the 1P1D deployment of the disaggregated scenario: the
// prefill-heavy scenario's traffic split between a prefill worker (its H20
// node, one token an answer) and a decode worker (an H200 node), with a
// slow KV path between them.
func disaggregated() []Node {
	link := KVLink{BytesPerToken: 61 * 576 * 2, BytesPerSec: 0.6e9}
	p := kimi(0)
	p.ID, p.Role, p.KVTransfer = ModelKimi+"-prefill-0", "prefill", link
	p.Profile.GPU = "H20"
	p.Perf = kimiPerf(p.Profile)
	p.Perf.KVCapacityTokens = 12288 * 64
	p.Perf.MaxModelLen = 131072
	p.Perf.MaxBatchedTokens = 2048
	p.Workload.Rate = 0.1
	p.Workload.Prompt = LogNormal(64000, 0.35)
	p.Workload.MaxTokens = 1 // the proxy asks the prefill worker for one token
	d := kimi(1)
	d.ID, d.Role, d.KVTransfer = ModelKimi+"-decode-0", "decode", link
	d.Perf.MaxModelLen = 131072
	d.Workload.Rate = 0.1
	d.Workload.Prompt = LogNormal(64000, 0.35)
	d.Workload.Output = LogNormal(150, 0.7)
	return []Node{p, d}
}

// GPUBandwidthSessions is the closed-loop clients of the gpu-bandwidth
// scenario's decode-bound node.
const GPUBandwidthSessions = 330

// Llama-3.3-70B's KV cache: 80 layers of 8 KV heads of 128 dimensions, K
// and V, in FP8.
const llamaKVBytesPerToken = 80 * 8 * 128 * 2

// llama is a dense 70B model (Llama-3.3-70B, FP8 weights and KV) on vLLM
// with TP=4 over four L40S (48 GB of GDDR6 at 864 GB/s each, the
// memory-poorest GPU GPUSpec knows): 70 GB of weights leave ~100 GB for
// KV, 600k tokens at 160 kB a token. A step reads the 17.5 GB of weights
// each GPU holds (~20 ms) and the batch's KV (~48 µs per 1,000 tokens),
// and adds ~0.19 ms of compute per decoding sequence. Light chat traffic:
// a healthy node.
func llama(i int) Node {
	p := fleet.Profile{DataParallel: 1, TensorParallel: 4, GPU: "L40S",
		ActiveParamsBillions: 70, TotalParamsBillions: 70}
	perf := EstimatePerf(p)
	perf.KVBytesPerToken = llamaKVBytesPerToken
	perf.StepPerKContext = KVReadPerK(p, llamaKVBytesPerToken)
	perf.MaxBatchedTokens = 1024
	perf.MaxNumSeqs = 512
	perf.KVCapacityTokens = 37500 * 16
	perf.MaxModelLen = 32768
	return Node{
		ID: fmt.Sprintf("%s-%d", ModelLlama, i), Model: ModelLlama, Engine: VLLM, Profile: p, Perf: perf,
		Workload: Workload{
			Rate:      0.8,
			Prompt:    LogNormal(600, 0.7),
			Output:    LogNormal(200, 0.6),
			MaxTokens: 4096,
		},
	}
}
