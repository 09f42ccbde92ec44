package scenariotest

import (
	"context"
	"os"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/sim"
)

func TestMain(m *testing.M) {
	// Most of a run is parsing expositions, which allocates briskly; a
	// larger heap target trades memory (tens of MiB) for a third less CPU.
	debug.SetGCPercent(400)
	os.Exit(m.Run())
}

// TestLoopback checks that serving the expositions over a real loopback
// HTTP server, with a down node's connections closed, gives the verdicts
// the in-process transport gives.
func TestLoopback(t *testing.T) {
	opts := Options{Scenario: "down", Engine: sim.VLLM, Warmup: 2 * time.Minute, Duration: 2 * time.Minute}
	mem, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Loopback = true
	lo, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range mem.Nodes {
		a, b := mem.Readings[id], lo.Readings[id]
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%s: %d readings in process, %d over loopback", id, len(a), len(b))
		}
		causes := func(rs []Reading) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.Status.String()+"/"+r.Cause.String())
			}
			return out
		}
		if !slices.Equal(causes(a), causes(b)) {
			t.Errorf("%s: in process %v\nover loopback %v", id, causes(a), causes(b))
		}
	}
	if got := lo.Readings["glm-4.6-1"][0].Cause; got != down {
		t.Errorf("down node over loopback reads %v", got)
	}
}
