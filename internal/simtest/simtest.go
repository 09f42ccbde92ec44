package simtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/llmdiag/llmdiag/sim"
)

// Start runs the fleet cfg describes until the test ends (an error it
// stops with fails the test) and returns it with the path of its fleet
// file, readable by any user (a container's too) in a directory of its
// own.
func Start(t testing.TB, cfg sim.Config) (*sim.Fleet, string) {
	t.Helper()
	fl, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fl.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sim: %v", err)
		}
	})
	data, err := fl.FleetFile().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return fl, path
}

// Seed is Start of the seed scenario as `llmdiag sim --scenario seed` runs
// it (seed 1, its warm-up, real time).
func Seed(t testing.TB) (*sim.Fleet, string) {
	t.Helper()
	cfg, err := sim.Scenario("seed", 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Warmup = sim.SeedWarmup
	return Start(t, cfg)
}
