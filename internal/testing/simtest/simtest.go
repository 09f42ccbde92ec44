package simtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	Serve(t, fl)
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

// stopWithin bounds how long Serve waits for a fleet to stop when the
// test ends.
const stopWithin = 10 * time.Second

// Serve binds fl's listeners on free loopback ports and runs it until the
// test ends: the test fails if it stops with an error, or does not stop
// within 10 s.
func Serve(t testing.TB, fl *sim.Fleet) {
	t.Helper()
	if err := fl.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fl.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sim: %v", err)
			}
		case <-time.After(stopWithin):
			t.Errorf("the simulated fleet did not stop within %v", stopWithin)
		}
	})
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

// Scenario is the named scenario's configuration with seed; an unknown
// name fails the test.
func Scenario(t testing.TB, name string, seed int64) sim.Config {
	t.Helper()
	cfg, err := sim.Scenario(name, seed)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
