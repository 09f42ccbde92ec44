package sim_test

import (
	"os"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/sim"
)

// TestFigures prints each scenario's steady-state figures when SIM_FIGURES
// is set: 15 simulated minutes of warm-up (SeedWarmup), then 20 minutes
// measured.
func TestFigures(t *testing.T) {
	if os.Getenv("SIM_FIGURES") == "" {
		t.Skip("set SIM_FIGURES=1 to print scenario figures")
	}
	for _, name := range sim.Scenarios() {
		cfg, err := sim.Scenario(name, testSeed())
		if err != nil {
			t.Fatal(err)
		}
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		f.Step(sim.SeedWarmup)
		warm := time.Since(start)
		figs := measure(t, f, 20*time.Minute, 5*time.Second)
		t.Logf("== %s (warm-up %v took %v, total %v)", name, sim.SeedWarmup, warm, time.Since(start))
		for _, id := range sortedKeys(figs) {
			t.Logf("  %-14s %v", id, figs[id])
		}
	}
}
