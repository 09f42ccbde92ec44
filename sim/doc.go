// Package sim simulates a fleet of LLM inference servers and serves each
// node's Prometheus /metrics on its own loopback port, with the metric names,
// labels and bucket boundaries of the engine it imitates: vLLM V1 (also as
// routed through OpenTelemetry), SGLang (also with its 2024 labels),
// TensorRT-LLM, Triton with the TensorRT-LLM backend, TGI, or a Dynamo
// frontend (see Engine). The schema changes only the exposition: the
// simulated physics is the same, and WithEngine exposes any fleet in any
// schema with its state unchanged.
//
// The model is physical, not a replay of canned numbers. Each node runs one
// engine core per data-parallel rank; a core does continuous batching:
// requests arrive as a Poisson process (or from closed-loop sessions, as
// agents send them: the next request after the answer and a think time),
// wait in a FIFO queue, are admitted while there are batch slots
// (max_num_seqs), a per-step token budget (max_num_batched_tokens) and
// KV-cache room, and then advance one forward pass ("iteration") at a time.
// An iteration's duration is
//
//	StepBase + StepPerSeq·decoding_seqs + StepPerKContext·context_tokens/1000
//	  + PrefillPerKContext·Σ chunk_tokens·chunk_position/1000
//	  + prefill_tokens/PrefillTokensPerSec
//
// so prefill chunks share step time with decode (long-context prefill
// quadratically so), batches slow every member down, tensor parallelism (a
// lower StepBase, see EstimatePerf) speeds a single request, and data
// parallelism adds cores (throughput) without making any one request
// faster. With expert parallelism across data-parallel ranks (DeepSeek-style
// DP attention + EP MoE) the ranks step in lockstep, so a prefill on one
// rank stalls decode on all of them. Every running request holds KV for its
// prompt and generated tokens (prefix-cache hits need KV but no prefill
// compute; a prefix common to all requests, such as an agent's system
// prompt, is held once per core); when a growing sequence does not fit, the
// newest running request is preempted (vLLM) or retracted (SGLang) back to the
// head of the queue, to resume from its blocks still in the prefix cache.
// A node routes each arrival to the core with the lowest 4·waiting+running,
// as vLLM's data-parallel load balancer does. Requests that wait longer
// than the workload's queue timeout are abandoned (finished_reason abort).
//
// Time is simulated and event-driven: arrivals and iteration ends happen at
// exact simulated instants, so the state after Step(10m) equals the state
// after six hundred Step(1s) calls, and a seed fixes every random draw
// (math/rand/v2 PCG, one stream per node). Start drives the simulation from
// a Clock in fixed ticks, Speed times faster than wall time, after an
// optional Warmup that fast-forwards so histograms are full at once.
//
// A node's offered load can change at given times (Workload.Phases): an
// open-loop rate, a number of closed-loop sessions, or nothing. Quirks make
// a node's exposition depart from its engine's as some servers in the
// field do: series that appear only with their first event, a TTFT that
// leaves out the queue, no preemption or failure counters.
//
// Each node also serves OpenAI-compatible POST /v1/completions and
// /v1/chat/completions (Handler), non-streaming or streamed as Server-Sent
// Events. A received request is an arrival like the built-in ones, at the
// current simulated instant: it queues, takes KV, prefills and decodes with
// the node's batches and counts in its metrics; the answer is held until
// the simulated request ends (streamed, token by token), so at Speed 1
// clients see the simulated latencies in real time, at Speed s s times
// sooner. Its prompt is the prompt's (or messages') characters/4 tokens,
// or the extension field "sim_prompt_tokens"; its output max_tokens tokens
// (16 without), or "sim_output_tokens" when fewer (finish_reason "stop").
// It has no shared prefix nor prefix-cache hits. ExternalOnly turns the
// built-in arrivals off; Config.MaxConcurrent and MaxBodyBytes bound what a
// node's server accepts (429, 413).
//
// Nodes can be taken down (their listener closes: connection refused) on a
// schedule or by SetDown, or made to serve a truncated or junk body
// (Garbage) to exercise scrapers. At run time a node can also be slowed
// (SetSlowdown: every step and its prefill factor times longer, as GPUs
// held at a fraction of their clocks) or hung (SetHang: the engine makes
// no progress while /metrics answers, as a Hang window), and its arrival
// rate changed (SetRate). Scenario returns ready-made fleets: the
// DeepSeek/GLM/Kimi fleet of the worked example (docs/verdict-rules.md),
// one fleet per failure mode, and
// one small node per schema.
package sim
