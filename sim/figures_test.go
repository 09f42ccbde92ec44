package sim_test

import (
	"os"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/sim"
)

// TestFigures prints each scenario's steady-state figures when SIM_FIGURES
// is set: 10 simulated minutes of warm-up, then 20 minutes measured.
func TestFigures(t *testing.T) {
	if os.Getenv("SIM_FIGURES") == "" {
		t.Skip("set SIM_FIGURES=1 to print scenario figures")
	}
	for _, name := range sim.Scenarios() {
		cfg, err := sim.Scenario(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		f.Step(10 * time.Minute)
		warm := time.Since(start)
		figs := measure(t, f, 20*time.Minute, 5*time.Second)
		t.Logf("== %s (warm-up 10m took %v, total %v)", name, warm, time.Since(start))
		for _, id := range sortedKeys(figs) {
			t.Logf("  %-14s %v", id, figs[id])
		}
	}
}
