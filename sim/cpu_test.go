package sim_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// BenchmarkRealTimeCPU runs a 10-node seed fleet in real time and reports
// the CPU it uses as a share of one core (cpu-%), after a warm-up that is
// reported on its own (warmup-cpu-s). One iteration is one second of real
// time: -benchtime 10x measures ten seconds.
func BenchmarkRealTimeCPU(b *testing.B) {
	cfg := simtest.Scenario(b, "seed", 1)
	for _, n := range append([]sim.Node(nil), cfg.Nodes...) {
		n.ID += "-b"
		cfg.Nodes = append(cfg.Nodes, n)
	}
	cfg.Warmup = sim.SeedWarmup
	f, err := sim.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	go func() { done <- f.Start(ctx) }()
	for f.Now() < cfg.Warmup {
		time.Sleep(time.Millisecond)
	}
	c1, w1 := cpu(), time.Now()
	b.ResetTimer()
	for range b.N {
		time.Sleep(time.Second)
	}
	b.StopTimer()
	c2, w2 := cpu(), time.Now()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric((c1 - c0).Seconds(), "warmup-cpu-s")
	b.ReportMetric(100*float64(c2-c1)/float64(w2.Sub(w1)), "cpu-%")
}
