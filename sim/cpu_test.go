package sim_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/sim"
)

// TestRealTimeCPU runs a 10-node fleet in real time for 10 seconds and
// reports the CPU it used; set SIM_CPU=1 to run it.
func TestRealTimeCPU(t *testing.T) {
	if os.Getenv("SIM_CPU") == "" {
		t.Skip("set SIM_CPU=1 to measure real-time CPU use")
	}
	cfg, err := sim.Scenario("seed", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append([]sim.Node(nil), cfg.Nodes...) {
		n.ID += "-b"
		cfg.Nodes = append(cfg.Nodes, n)
	}
	cfg.Warmup = sim.SeedWarmup
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, w0 := cpu(), time.Now()
	go func() { done <- f.Start(ctx) }()
	for f.Now() < cfg.Warmup {
		time.Sleep(time.Millisecond)
	}
	c1, w1 := cpu(), time.Now()
	time.Sleep(10 * time.Second)
	c2, w2 := cpu(), time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d nodes: warm-up of %v took %v wall, %v CPU", len(cfg.Nodes), cfg.Warmup, w1.Sub(w0), c1-c0)
	t.Logf("real time: %v CPU over %v wall = %.2f%% of one core", c2-c1, w2.Sub(w1), 100*float64(c2-c1)/float64(w2.Sub(w1)))
}
