package closedloop

import (
	"fmt"
	"time"

	"github.com/llmdiag/llmdiag/sim"
)

// The requests loadgen sends: fixed lengths, so that a node's capacity is
// one number.
const (
	PromptTokens = 256
	OutputTokens = 64
	// MaxNumSeqs is each node's batch limit (vLLM's max_num_seqs): with it
	// a node is slot-bound, as a latency-tuned deployment is.
	MaxNumSeqs = 16
)

// Model is the model every node serves.
const Model = sim.ModelLlama

// NodeConfig is node i of a fleet: the gpu-bandwidth scenario's healthy
// Llama-3.3-70B deployment (vLLM, TP=4 over four L40S, ~28 ms a step at
// small batches, prefill ~8,400 tokens a second) with at most MaxNumSeqs
// running, without built-in traffic (its load is what it receives).
func NodeConfig(i int) (sim.Node, error) {
	cfg, err := sim.Scenario("gpu-bandwidth", 1)
	if err != nil {
		return sim.Node{}, err
	}
	n := cfg.Nodes[1]
	n.ID = fmt.Sprintf("%s-%d", Model, i)
	n.Perf.MaxNumSeqs = MaxNumSeqs
	n.Workload = sim.Workload{Prompt: sim.LogNormal(PromptTokens, 0), Output: sim.LogNormal(OutputTokens, 0)}
	return n, nil
}

// Capacity is how many requests a second one node serves when it is never
// short of work, measured on the simulator's own model: a node offered
// twice what it can serve (the queue never empties; nobody gives up), its
// finished requests counted over 5 simulated minutes after 1 of warm-up.
// Stepped, not run in real time: it takes a fraction of a second.
func Capacity() (float64, error) {
	n, err := NodeConfig(0)
	if err != nil {
		return 0, err
	}
	// One request is ~64 steps of ~30 ms at a full batch of 16: ~8 a
	// second is well above what it serves.
	n.Workload.Rate = 16
	n.Workload.QueueTimeout = time.Hour
	f, err := sim.New(sim.Config{Name: "capacity", Seed: 1, Nodes: []sim.Node{n}})
	if err != nil {
		return 0, err
	}
	f.Step(time.Minute)
	before, err := f.Stats(n.ID)
	if err != nil {
		return 0, err
	}
	const over = 5 * time.Minute
	f.Step(over)
	after, _ := f.Stats(n.ID)
	if after.Waiting == 0 || after.Aborted != 0 {
		return 0, fmt.Errorf("capacity run not saturated: %+v", after)
	}
	return float64(after.Finished-before.Finished) / over.Seconds(), nil
}
