package sim_test

import (
	"errors"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

func TestSetRate(t *testing.T) {
	cfg := simtest.Scenario(t, "overloaded", 1)
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetRate("glm-4.6-0", 0); err != nil {
		t.Fatal(err)
	}
	f.Step(10 * time.Minute) // drains: nothing arrives
	st, _ := f.Stats("glm-4.6-0")
	before := st.Finished + st.Aborted
	f.Step(time.Minute)
	st, _ = f.Stats("glm-4.6-0")
	if st.Waiting != 0 || st.Finished+st.Aborted != before || st.Running != 0 {
		t.Fatalf("rate 0: %+v", st)
	}
	if err := f.SetRate("glm-4.6-0", 30); err != nil {
		t.Fatal(err)
	}
	f.Step(10 * time.Second)
	if st, _ = f.Stats("glm-4.6-0"); st.Waiting < 100 {
		t.Fatalf("rate 30 for 10 s against 48 slots: queue %d", st.Waiting)
	}
	if err := f.SetRate("nope", 1); !errors.Is(err, sim.ErrUnknownNode) {
		t.Fatalf("unknown node: %v", err)
	}
	if err := f.SetRate("glm-4.6-0", -1); err == nil {
		t.Fatal("negative rate accepted")
	}
	seed, _ := sim.Scenario("seed", 1)
	g, _ := sim.New(seed)
	if err := g.SetRate("deepseek-v4-0", 1); !errors.Is(err, sim.ErrClosedLoop) {
		t.Fatalf("closed-loop node: %v", err)
	}
}
