package scenariotest

import (
	"slices"
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sim"
)

// readings builds a node's readings every 5 s from per-refresh queue, KV,
// routable and cause.
func readings(queue, kv []float64, routable []bool, cause []llmdiagv1.Cause) []Reading {
	var rs []Reading
	for i := range routable {
		m := &llmdiagv1.NodeMetrics{}
		if queue != nil {
			m.Queue = &queue[i]
		}
		if kv != nil {
			m.KvPressure = &kv[i]
		}
		c := healthy
		if cause != nil {
			c = cause[i]
		}
		rs = append(rs, Reading{At: time.Duration(i) * 5 * time.Second, Cause: c, Metrics: m,
			Diagnosis: &llmdiagv1.Diagnosis{Routable: routable[i]}, Status: llmdiagv1.Status_STATUS_OK})
	}
	return rs
}

func TestFlapOf(t *testing.T) {
	const (
		Y = true
		N = false
	)
	kv := []float64{0.5, 0.96, 0.97, 0.9, 0.98, 0.99, 0.5, 0.5, 0.96, 0.5, 0.5, 0.97, 0.98, 0.96, 0.4}
	tests := []struct {
		name     string
		routable []bool
		want     kvFlap
	}{
		// Crossings at 1 (0.96, 0.97), 4 (0.98, 0.99) and 11 (0.97, 0.98,
		// 0.96); 8 is one refresh alone; 3 is a single dip between 2 and 4.
		{"held", []bool{Y, N, N, N, N, N, Y, Y, Y, Y, Y, N, N, N, Y},
			kvFlap{known: true, crossings: 3, episodes: 2, most: 1, dips: 1}},
		{"dip made routable", []bool{Y, N, N, Y, N, N, Y, Y, Y, Y, Y, N, N, N, Y},
			kvFlap{known: true, crossings: 3, episodes: 3, most: 1, dips: 1, dipsRoutable: 1, dipsAt: []time.Duration{15 * time.Second}}},
		{"two episodes in one crossing", []bool{Y, N, N, N, N, N, Y, Y, Y, Y, Y, N, Y, N, Y},
			kvFlap{known: true, crossings: 3, episodes: 3, most: 2, dips: 1}},
	}
	for _, tt := range tests {
		got := flapOf(readings(nil, kv, tt.routable, nil))
		if got.known != tt.want.known || got.crossings != tt.want.crossings || got.episodes != tt.want.episodes ||
			got.most != tt.want.most || got.dips != tt.want.dips || got.dipsRoutable != tt.want.dipsRoutable ||
			!slices.Equal(got.dipsAt, tt.want.dipsAt) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if flapOf(readings(nil, nil, []bool{Y, N}, nil)).known {
		t.Error("KV unknown, yet known")
	}
}

func TestTimeOverload(t *testing.T) {
	const (
		Y = true
		N = false
	)
	// Overload from 10 s (refresh 2) to 40 s (refresh 8).
	queue := []float64{0, 0, 3, 8, 9, 9, 10, 9, 8, 2, 0, 0}
	routable := []bool{Y, Y, Y, Y, N, N, Y, N, N, N, Y, Y}
	cause := []llmdiagv1.Cause{healthy, healthy, healthy, burst, burst, overload, overload, overload, overload, overload, burst, healthy}
	res := &Result{
		Config: sim.Config{Nodes: []sim.Node{{ID: overloadedNode, Workload: sim.Workload{Phases: []sim.Phase{
			{At: 10 * time.Second, Sessions: 16, Think: time.Second}, {At: 40 * time.Second}}}}}},
		Readings: map[string][]Reading{overloadedNode: readings(queue, nil, routable, cause)},
	}
	o := timeOverload(res)
	want := overloadTiming{start: 10 * time.Second, end: 40 * time.Second,
		queue: 3, notRoutable: 4, overloaded: 5, drain: 9, routable: 10, relapses: 1}
	if o != want {
		t.Errorf("%+v, want %+v", o, want)
	}
	if n := refreshes(o.queue, o.notRoutable); n != 2 {
		t.Errorf("not routable at the %dth refresh of the queue, want 2", n)
	}
	if s := o.summary(res.Readings[overloadedNode]); s != "q>5 5s, NR 10s (2), OVL 15s, drain→R 2, relapse 1" {
		t.Errorf("summary %q", s)
	}
	if f := flipsOf(res.Readings[overloadedNode]); f != (flips{routable: 4, status: 0}) {
		t.Errorf("flips %+v", f)
	}
}
