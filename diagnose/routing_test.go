package diagnose_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestRoutingAgreesWithDiagnose: Routing over the diagnosis of the same
// input gives Diagnose's routable flag and load score, on every random input
// of TestProperties (down, stale, stalled, GPU faults, offload tiers, every
// history).
func TestRoutingAgreesWithDiagnose(t *testing.T) {
	th := diagnose.DefaultThresholds()
	r := rand.New(rand.NewPCG(3, 4))
	n := 5000
	if testing.Short() {
		n = 500
	}
	var routable, saturated int
	for i := range n {
		in := randomInput(r)
		d := diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_EN)
		ok, score := diagnose.Routing(in, d, th)
		if ok != d.GetRoutable() || score != d.GetLoadScore() {
			t.Fatalf("input %d: Routing gives routable %v score %v, Diagnose %v %v (%s)", i, ok, score, d.GetRoutable(), d.GetLoadScore(), d.GetRootCause())
		}
		if ok {
			routable++
		}
		if score > 1 {
			saturated++
		}
	}
	// The inputs cover both sides.
	if routable == 0 || routable == n || saturated == 0 {
		t.Fatalf("%d of %d routable, %d saturated: the inputs do not cover the cases", routable, n, saturated)
	}
}

// TestRoutingOverFastTicks: with the diagnosis of a healthy refresh as
// full, fast reads every 250 ms make the node unroutable on the second
// saturated one (RoutingHold 2), a single saturated read flips nothing,
// and a fast read finding the node down holds it out at once.
func TestRoutingOverFastTicks(t *testing.T) {
	th := diagnose.DefaultThresholds()
	base := healthyMetrics()
	full := diagnose.Diagnose(diagnose.Input{Metrics: base}, th, llmdiagv1.Language_LANGUAGE_EN)
	if !full.GetRoutable() {
		t.Fatalf("healthy refresh not routable: %s", full.GetSummary())
	}
	sat := th.QueueSaturated + 5
	for _, tc := range []struct {
		name   string
		queues []float64 // one fast read each, after the refresh
		up     bool
		want   []bool // routable after each read
	}{
		{"blip", []float64{0, sat, 0, 0}, true, []bool{true, true, true, true}},
		{"held", []float64{0, sat, sat, sat, 0, 0}, true, []bool{true, true, false, false, false, true}},
		{"dip held", []float64{sat, sat, 0, sat, 0, 0}, true, []bool{true, false, false, false, false, true}},
		{"down", []float64{0}, false, []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist := []diagnose.Point{{At: base.GetObservedAt().AsTime(), Up: true, Queue: base.Queue, Running: base.Running, KVPressure: base.KvPressure}}
			for i, q := range tc.queues {
				at := base.GetObservedAt().AsTime().Add(time.Duration(i+1) * 250 * time.Millisecond)
				m := proto.Clone(base).(*llmdiagv1.NodeMetrics)
				m.Queue, m.Up, m.ObservedAt = f64(q), tc.up, timestamppb.New(at)
				m.QueueRunningRatio = nil
				ok, score := diagnose.Routing(diagnose.Input{Metrics: m, History: hist}, full, th)
				if ok != tc.want[i] {
					t.Fatalf("read %d (queue %v): routable %v, want %v (score %v)", i, q, ok, tc.want[i], score)
				}
				if !ok && tc.up && score <= 1 {
					t.Errorf("read %d: unroutable for saturation with score %v, want above 1", i, score)
				}
				hist = append(hist, diagnose.Point{At: at, Up: tc.up, Queue: m.Queue, Running: m.Running, KVPressure: m.KvPressure})
			}
		})
	}
}
