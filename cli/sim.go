package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/llmdiag/llmdiag/sim"
)

func simCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag sim", flag.ContinueOnError)
	scenario := fs.String("scenario", "seed", "scenario: "+strings.Join(sim.Scenarios(), ", "))
	seed := fs.Int64("seed", 1, "random seed: the same seed gives the same metrics")
	speed := fs.Float64("speed", 1, "simulated seconds per wall-clock second (rates then read speed× higher)")
	warmup := fs.Duration("warmup", sim.SeedWarmup, "simulated time to fast-forward before serving, so histograms and the latency tail are at steady state")
	engineName := fs.String("engine", "", "serve every node in this schema instead of the scenario's: "+engineList())
	basePort := fs.Int("base-port", 0, "put node i on 127.0.0.1:base-port+i (0: free ports)")
	fleetOut := fs.String("fleet-out", "", "write a fleet file for `llmdiag serve --fleet` here once the nodes serve")
	load := fs.String("load", "both", "what loads the nodes: both (the scenario's built-in arrivals and the requests received on /v1/completions and /v1/chat/completions) or external (received requests only)")
	maxConcurrent := fs.Int("max-concurrent", sim.DefaultMaxConcurrent, "completion requests each node holds at once; more are refused with 429")
	newLog := logFlags(fs)
	return &ffcli.Command{
		Name:       "sim",
		ShortUsage: "llmdiag sim [--scenario NAME] [--seed N] [--speed X] [--warmup D] [--load both|external] [--fleet-out FILE]",
		ShortHelp:  "serve /metrics for a simulated inference fleet on loopback",
		LongHelp: strings.TrimSpace(`
Simulate an inference fleet and serve each node's /metrics on 127.0.0.1 with
real engine metric names, labels and buckets (vLLM, SGLang, TensorRT-LLM,
Triton, TGI, Dynamo; --engine switches every node's schema). The simulation is
physical, not random numbers: continuous batching, Poisson arrivals (or
closed-loop agent sessions), prompt and output length distributions, prefill throughput, a decode step that grows with
batch and model size, KV capacity, queueing and preemption. Data parallel
raises throughput; tensor parallel raises single-request speed.

Scenarios:
  seed                deepseek-v4 (data parallel, decode-bound), glm (healthy), kimi-k2.6 (tensor parallel)
  kv-exhausted        KV cache full, preemptions rising
  overloaded          more arrivals than capacity; the queue grows and stays
  burst               arrival bursts that queue briefly and drain (kimi; deepseek-v4 decode-bound with bursts)
  prefill-heavy       very long prompts: a high TTFT tail with little queueing
  down                a small fleet with one node whose endpoint goes down
  schemas             one healthy node per engine schema
  idle-then-overload  idle 10 min (lazy series absent), then 16 clients on 4 slots for 4 min, then light
  kv-flap             KV-bound phases with one-scrape dips below 0.95, light phases between
  kv-offload          an LMCache offload tier keeps GPU KV at ~0.99 by design: no preemption, no queue
  slo-burn            a healthy kimi node whose TTFT (~220 ms median) misses a tight SLO such as 99% within 250 ms
  gpu-throttled       glm with one GPU thermally throttled (DCGM clock-event reasons), its compute slower
  gpu-xid             kimi-k2.6 with a GPU reporting XID 48 (DCGM) 2 min after warm-up, and again a minute later
  gpu-xid-old         kimi-k2.6 with a GPU holding an old XID 31 (the application's) from before the run
  disaggregated       1 prefill + 1 decode worker (roles in the fleet file), KV over a slow path: high decode-side TTFT
  stalled             an engine hangs 6 min after warm-up: /metrics answers, counters freeze, the queue grows
  gpu-bandwidth       a dense 70B on four L40S decoding a large batch of long answers: DRAM ~62% (DCGM), ~9 tok/s per request
  spec-decode         speculative decoding (~2.5 tokens per step) and four LoRA adapters on a light node
  lora-contention     three LoRA adapters with room for one (max_lora 1): requests for the others queue

Every node also serves OpenAI-compatible POST /v1/completions and
/v1/chat/completions on its port (non-streaming, or "stream": true as
Server-Sent Events). A received request joins the node's simulation: it
queues, takes KV cache, prefills and decodes at the node's simulated speed,
shows in its /metrics like the built-in arrivals, and is answered when the
simulated request ends (streamed: token by token). Its prompt counts as
characters/4 tokens, or "sim_prompt_tokens"; it generates max_tokens
(16 without), or "sim_output_tokens" if fewer (finish_reason stop).
At --speed 1 latencies are real time; at --speed X answers come X times
sooner than the latency the node's metrics report. --load external turns the
scenario's built-in arrivals off so that only received requests load the
nodes (llmdiag loadgen sends them). A down node refuses connections; a hung
one holds requests until the hang ends.

Every node also serves its GPUs as the NVIDIA DCGM exporter does, at
/dcgm/metrics on its port; the fleet file written names it (dcgm).

idle-then-overload and kv-flap behave like a field server: series appear on
first use, TTFT excludes queueing, no preemption or failure counters.`),
		FlagSet: fs,
		Exec: withEnv(fs, env, func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			log, err := newLog(env.Stderr)
			if err != nil {
				return err
			}
			if *speed <= 0 || *warmup < 0 {
				return usageError{errors.New("--speed must be positive and --warmup not negative")}
			}
			if *load != "both" && *load != "external" {
				return usageError{fmt.Errorf("--load %q: want both or external", *load)}
			}
			if *maxConcurrent < 1 {
				return usageError{errors.New("--max-concurrent must be at least 1")}
			}
			cfg, err := sim.Scenario(*scenario, *seed)
			if err != nil {
				return usageError{err}
			}
			if *engineName != "" {
				e, ok := parseSimEngine(*engineName)
				if !ok {
					return usageError{fmt.Errorf("--engine %q: want one of %s", *engineName, engineList())}
				}
				cfg = sim.WithEngine(cfg, e)
			}
			if *load == "external" {
				cfg = sim.ExternalOnly(cfg)
			}
			cfg.Speed, cfg.BasePort, cfg.Warmup = *speed, *basePort, *warmup
			cfg.MaxConcurrent = *maxConcurrent
			f, err := sim.New(cfg, sim.WithLogger(log))
			if err != nil {
				return err
			}
			if err := f.Listen(); err != nil {
				return err
			}
			ff := f.FleetFile()
			for _, n := range ff.Nodes {
				log.Info("simulated node", "id", n.ID, "model", n.Model, "engine", n.Engine, "url", n.URL)
			}
			// Start fast-forwards the warm-up (well under a second for ten
			// simulated minutes) before it serves; a scrape arriving meanwhile
			// waits in the listen backlog.
			errc := make(chan error, 1)
			go func() { errc <- f.Start(ctx) }()
			if *fleetOut != "" {
				data, err := ff.Marshal()
				if err != nil {
					return err
				}
				if err := writeAtomic(*fleetOut, data); err != nil {
					return fmt.Errorf("--fleet-out: %w", err)
				}
				log.Info("fleet file written", "path", *fleetOut)
			}
			return <-errc
		}),
	}
}

// writeAtomic writes data to path through a temporary file and a rename, so
// a reader polling for path never sees it half written.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fleet-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func engineList() string {
	var names []string
	for _, e := range sim.Engines() {
		names = append(names, string(e))
	}
	return strings.Join(names, ", ")
}

func parseSimEngine(s string) (sim.Engine, bool) {
	for _, e := range sim.Engines() {
		if string(e) == s {
			return e, true
		}
	}
	return "", false
}
