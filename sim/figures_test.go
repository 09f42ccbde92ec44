package sim_test

import (
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// BenchmarkScenarioFigures simulates every scenario: 15 simulated minutes
// of warm-up (SeedWarmup), then 20 minutes measured. It reports the
// warm-up's wall time (warmup-ms, the most of any scenario) and logs each
// node's steady-state figures (run with -v to read them):
//
//	go test -run '^$' -bench ScenarioFigures -benchtime 1x -v ./sim/
func BenchmarkScenarioFigures(b *testing.B) {
	var warmest time.Duration
	for range b.N {
		for _, name := range sim.Scenarios() {
			cfg := simtest.Scenario(b, name, testSeed())
			f, err := sim.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			f.Step(sim.SeedWarmup)
			warm := time.Since(start)
			warmest = max(warmest, warm)
			figs := measure(b, f, 20*time.Minute, 5*time.Second)
			b.Logf("== %s (warm-up %v took %v, total %v)", name, sim.SeedWarmup, warm, time.Since(start))
			for _, id := range sortedKeys(figs) {
				b.Logf("  %-14s %v", id, figs[id])
			}
		}
	}
	b.ReportMetric(float64(warmest.Milliseconds()), "warmup-ms")
}
