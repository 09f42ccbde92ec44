package loadgen_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/loadgen"
	"github.com/llmdiag/llmdiag/sim"
)

// TestSlowerNodeLongerE2E loads two simulated nodes, alike but for one's
// performance (four times slower steps and prefill, as a bigger model's),
// with the same traffic at real time: the measured latencies follow the
// simulated physics.
func TestSlowerNodeLongerE2E(t *testing.T) {
	cfg, err := sim.Scenario("seed", 1)
	if err != nil {
		t.Fatal(err)
	}
	var fast sim.Node
	for _, n := range cfg.Nodes {
		if n.ID == "kimi-k2.6-0" {
			fast = n
		}
	}
	slow := fast
	slow.ID = "kimi-k2.6-slow"
	slow.Perf.StepBase *= 4
	slow.Perf.StepPerSeq *= 4
	slow.Perf.StepPerKContext *= 4
	slow.Perf.PrefillTokensPerSec /= 4
	cfg.Nodes = []sim.Node{fast, slow}
	cfg = sim.ExternalOnly(cfg)
	cfg.Warmup, cfg.Speed = 0, 1
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	defer func() { cancel(); <-done }()

	results := make([]*loadgen.Result, 2)
	var wg sync.WaitGroup
	for i, n := range f.FleetFile().Nodes {
		wg.Go(func() {
			res, err := loadgen.Run(ctx, loadgen.Config{
				URL:  strings.TrimSuffix(n.URL, "/metrics") + "/v1/completions",
				Rate: 4, Duration: 1500 * time.Millisecond, Seed: 7, Stream: true,
				Prompt: dist(t, "2000"), Output: dist(t, "8"), Timeout: 10 * time.Second,
			})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, r := range results {
		t.Logf("%s: sent %d ok %d, TTFT p50 %.3f s, E2E p50 %.3f s p99 %.3f s", cfg.Nodes[i].ID, r.Sent, r.Succeeded, r.TTFT.P50, r.E2E.P50, r.E2E.P99)
		if r.Sent == 0 || r.Succeeded != r.Sent {
			t.Fatalf("%s: %+v, want every request served", cfg.Nodes[i].ID, r)
		}
	}
	if fr, sr := results[0], results[1]; sr.E2E.P50 < 2*fr.E2E.P50 || sr.TTFT.P50 < 2*fr.TTFT.P50 {
		t.Errorf("slow node E2E p50 %.3f s, TTFT p50 %.3f s; fast %.3f s, %.3f s: want the slow one at least twice as long",
			sr.E2E.P50, sr.TTFT.P50, fr.E2E.P50, fr.TTFT.P50)
	}
	for i, id := range []string{fast.ID, slow.ID} {
		st, err := f.Stats(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Finished != uint64(results[i].Succeeded) || st.PromptTokens != uint64(2000*results[i].Succeeded) {
			t.Errorf("%s: stats %+v, want the %d requests served", id, st, results[i].Succeeded)
		}
	}
}
