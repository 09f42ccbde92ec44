package diagnose_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// gauges is one refresh's queue, running and KV pressure; a negative value
// is unknown.
type gauges struct{ queue, running, kv float64 }

func opt(v float64) *float64 {
	if v < 0 {
		return nil
	}
	return f64(v)
}

// replay diagnoses every refresh of a run of gauges read every step, each
// with the refreshes before it as its history, as refresh does.
func replay(t *testing.T, run []gauges, step time.Duration, th diagnose.Thresholds) []*llmdiagv1.Diagnosis {
	t.Helper()
	start := observed.Add(-time.Duration(len(run)) * step)
	var hist []diagnose.Point
	var out []*llmdiagv1.Diagnosis
	for i, g := range run {
		at := start.Add(time.Duration(i) * step)
		m := healthyMetrics()
		m.ObservedAt = timestamppb.New(at)
		m.Queue, m.Running, m.KvPressure = opt(g.queue), opt(g.running), opt(g.kv)
		m.QueueRunningRatio = nil
		d := diagnose.Diagnose(diagnose.Input{Metrics: m, History: hist}, th, llmdiagv1.Language_LANGUAGE_EN)
		out = append(out, d)
		hist = append(hist, diagnose.Point{At: at, Up: true, Queue: m.Queue, Running: m.Running, KVPressure: m.KvPressure, Status: d.GetStatus()})
	}
	return out
}

// repeat is n refreshes of g.
func repeat(n int, g gauges) []gauges {
	out := make([]gauges, n)
	for i := range out {
		out[i] = g
	}
	return out
}

func concat(runs ...[]gauges) []gauges {
	var out []gauges
	for _, r := range runs {
		out = append(out, r...)
	}
	return out
}

// trace is routable as "R"/"-" per refresh, for readable failures.
func trace(ds []*llmdiagv1.Diagnosis) string {
	var b strings.Builder
	for _, d := range ds {
		if d.GetRoutable() {
			b.WriteByte('R')
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

var (
	idle     = gauges{queue: 0, running: 1, kv: 0.1}
	full     = gauges{queue: 12, running: 4, kv: 0.4} // the field case: 4 slots, 12 waiting
	kvFull   = gauges{queue: 0, running: 30, kv: 1.0}
	kvDip    = gauges{queue: 0, running: 30, kv: 0.875}
	kvEasy   = gauges{queue: 0, running: 20, kv: 0.5}
	oneBlip  = gauges{queue: 20, running: 4, kv: 0.4}
	step5s   = 5 * time.Second
	overload = llmdiagv1.Cause_CAUSE_OVERLOADED
	burstC   = llmdiagv1.Cause_CAUSE_BURST
	kvExhC   = llmdiagv1.Cause_CAUSE_KV_EXHAUSTED
)

// TestRoutingFollowsSaturation replays the field's incidents refresh by
// refresh: not routable on the second refresh of a saturated queue or KV
// cache, routable again on the second refresh without, a one-refresh blip
// never flipping it, however long the node was watched before.
func TestRoutingFollowsSaturation(t *testing.T) {
	th := diagnose.DefaultThresholds()
	for _, tc := range []struct {
		name string
		run  []gauges
		want string // routable per refresh
	}{
		{"overload after a long idle", concat(repeat(120, idle), repeat(12, full), repeat(4, idle)),
			strings.Repeat("R", 121) + strings.Repeat("-", 12) + "RRR"},
		{"overload after a short idle", concat(repeat(4, idle), repeat(3, full), repeat(3, idle)),
			"RRRRR" + "---" + "RR"},
		{"a one-refresh queue blip", concat(repeat(10, idle), repeat(1, oneBlip), repeat(10, idle)),
			strings.Repeat("R", 21)},
		{"KV flapping at a dip", concat(repeat(5, kvEasy), repeat(3, kvFull), repeat(1, kvDip), repeat(3, kvFull), repeat(1, kvDip), repeat(2, kvFull), repeat(3, kvEasy)),
			"RRRRR" + "R--" + "-" + "---" + "-" + "--" + "-RR"},
		{"a one-refresh KV spike", concat(repeat(5, kvEasy), repeat(1, kvFull), repeat(5, kvEasy)),
			strings.Repeat("R", 11)},
		{"queue unknown for a refresh: nothing known, nothing held", concat(repeat(3, idle), repeat(3, full), repeat(1, gauges{-1, -1, 0.4}), repeat(2, full)),
			"RRRR--" + "R" + "--"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := replay(t, tc.run, step5s, th)
			if got := trace(ds); got != tc.want {
				t.Errorf("routable\n got %s\nwant %s", got, tc.want)
			}
			for i, d := range ds {
				if err := agrees(d); err != nil {
					t.Errorf("refresh %d: %v", i, err)
				}
			}
		})
	}
}

// agrees checks that status, routable and score do not contradict each
// other: a score above 1 is a saturated node, not routable and at least
// WARN; a routable node scores at most 1.
func agrees(d *llmdiagv1.Diagnosis) error {
	s := d.GetLoadScore()
	switch {
	case d.GetRoutable() && s > 1:
		return fmt.Errorf("routable with load score %v", s)
	case !d.GetRoutable() && s <= 1:
		return fmt.Errorf("not routable with load score %v", s)
	case !d.GetRoutable() && d.GetStatus() == ok:
		return fmt.Errorf("not routable yet OK (%v)", d.GetRootCause())
	case d.GetRootCause() == overload && d.GetStatus() == crit && d.GetRoutable():
		return fmt.Errorf("OVERLOADED and CRIT, yet routable")
	}
	return nil
}

// TestOverloadedByDuration: a saturated queue that has not drained for
// overloaded_after is OVERLOADED, whatever the history before; then, once
// drained, recovering from it with its length, not "a spike drained
// quickly".
func TestOverloadedByDuration(t *testing.T) {
	th := diagnose.DefaultThresholds()
	for _, idleFor := range []int{4, 26, 120} {
		t.Run(fmt.Sprintf("after %d idle refreshes", idleFor), func(t *testing.T) {
			run := concat(repeat(idleFor, idle), repeat(14, full), repeat(10, idle))
			ds := replay(t, run, step5s, th)
			first := idleFor // the refresh that first sees the queue
			for i := first; i < first+14; i++ {
				d := ds[i]
				since := time.Duration(i-first) * step5s
				want := burstC
				if since >= th.OverloadedAfter {
					want = overload
				}
				if d.GetRootCause() != want {
					t.Errorf("saturated for %v: %v, want %v: %s", since, d.GetRootCause(), want, d.GetSummary())
				}
			}
			if d := ds[first+6]; d.GetStatus() != crit || !strings.Contains(d.GetSummary(), "has not drained for 30 s") {
				t.Errorf("at 30 s: %v %q", d.GetStatus(), d.GetSummary())
			}
			// Drained: the 2 refreshes of the hold, then recovering.
			after := ds[first+14+2]
			if after.GetRootCause() != overload || after.GetStatus() != warn || !after.GetRoutable() {
				t.Fatalf("after draining: %v %v routable %v", after.GetStatus(), after.GetRootCause(), after.GetRoutable())
			}
			if s := after.GetSummary(); !strings.Contains(s, "Recovering from an overload") || !strings.Contains(s, "saturated for 1.1 min") || strings.Contains(s, "quickly") {
				t.Errorf("after draining: %q", s)
			}
			// Past the window, the episode stays in the history's
			// evidence, never as a spike that drained quickly.
			ds = replay(t, concat(run, repeat(70, idle)), step5s, th)
			late := ds[len(ds)-1]
			if late.GetRootCause() == overload || !late.GetRoutable() {
				t.Errorf("6 min after draining: %v %v", late.GetStatus(), late.GetRootCause())
			}
			if s := late.GetSummary(); strings.Contains(s, "quickly") {
				t.Errorf("6 min after draining: %q", s)
			}
		})
	}
}

// TestKVHeldThroughADip: a dip below kv_crit for one refresh keeps the
// verdict, and says so instead of claiming the cache is full.
func TestKVHeldThroughADip(t *testing.T) {
	th := diagnose.DefaultThresholds()
	ds := replay(t, concat(repeat(3, kvEasy), repeat(3, kvFull), repeat(1, kvDip)), step5s, th)
	d := ds[len(ds)-1]
	if d.GetRootCause() != kvExhC || d.GetStatus() != crit || d.GetRoutable() {
		t.Fatalf("at the dip: %v %v routable %v", d.GetStatus(), d.GetRootCause(), d.GetRoutable())
	}
	if s := d.GetSummary(); !strings.Contains(s, "reads ~88% now, below for 1 refresh(es)") {
		t.Errorf("summary %q", s)
	}
	if f := findingOf(d, llmdiagv1.Indicator_INDICATOR_KV_PRESSURE); f.GetStatus() != crit {
		t.Errorf("KV finding %v at a held dip, want CRIT", f.GetStatus())
	}
	// The first refresh at the critical level is WARN, not yet saturated.
	ds = replay(t, concat(repeat(3, kvEasy), repeat(1, kvFull)), step5s, th)
	if f := findingOf(ds[3], llmdiagv1.Indicator_INDICATOR_KV_PRESSURE); f.GetStatus() != warn {
		t.Errorf("KV finding %v at the first refresh at the critical level, want WARN", f.GetStatus())
	}
}

// TestLoadScore: the highest pressure, 1 at the saturation points, capped
// at 1 while routable and above 1 while saturated.
func TestLoadScore(t *testing.T) {
	th := diagnose.DefaultThresholds()
	for _, tc := range []struct {
		name string
		run  []gauges
		max  float64
		want float64
	}{
		{"idle", repeat(3, gauges{0, 0, 0}), 0, 0},
		{"seed", repeat(3, gauges{0, 40, 0.3}), 0, 0.316},
		{"KV at the busy point is not saturated", repeat(3, gauges{0, 40, 0.8}), 0, 0.842},
		{"queue at its saturation point", repeat(3, gauges{5, 40, 0.1}), 0, 1},
		{"saturated queue", repeat(3, gauges{50, 40, 0.5}), 0, 10},
		{"a blip is capped at 1", concat(repeat(3, idle), repeat(1, gauges{50, 4, 0.5})), 0, 1},
		{"a held dip keeps the score of the refresh before", concat(repeat(3, full), repeat(1, idle)), 0, 2.4},
		{"KV exactly at crit is just above 1", repeat(3, gauges{0, 10, 0.95}), 0, 1.001},
		{"running counts with max_running, at most 1", repeat(3, gauges{0, 60, 0.3}), 50, 1},
		{"running 40 of 50", repeat(3, gauges{0, 40, 0.3}), 50, 0.8},
		{"queue without running at capacity is not saturated", repeat(3, gauges{20, 10, 0.3}), 50, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := th
			th.MaxRunning = tc.max
			ds := replay(t, tc.run, step5s, th)
			d := ds[len(ds)-1]
			if d.GetLoadScore() != tc.want {
				t.Errorf("load score %v, want %v", d.GetLoadScore(), tc.want)
			}
			if err := agrees(d); err != nil {
				t.Error(err)
			}
		})
	}
	if got := diagnose.Pressure(f64(10), f64(4), f64(0.5), th); got != 2 {
		t.Errorf("Pressure = %v, want 2", got)
	}
}

// TestRoutingHoldAfterGap: a gap longer than stale_after forgets what was
// held: the first refresh after it sets the state afresh.
func TestRoutingHoldAfterGap(t *testing.T) {
	th := diagnose.DefaultThresholds()
	ds := replay(t, repeat(3, full), step5s, th)
	if ds[0].GetRoutable() || ds[2].GetRoutable() {
		t.Fatalf("saturated from the first refresh: %s", trace(ds))
	}
	// An hour-long gap, then one idle refresh: routable at once.
	var hist []diagnose.Point
	at := observed.Add(-time.Hour)
	for range 3 {
		hist = append(hist, diagnose.Point{At: at, Up: true, Queue: f64(12), Running: f64(4), KVPressure: f64(0.4)})
		at = at.Add(step5s)
	}
	m := healthyMetrics()
	m.Queue, m.Running = f64(0), f64(1)
	if d := diagnose.Diagnose(diagnose.Input{Metrics: m, History: hist}, th, llmdiagv1.Language_LANGUAGE_EN); !d.GetRoutable() {
		t.Errorf("after an hour's gap an idle node is not routable: %v", d.GetSummary())
	}
}

// findingOf is d's finding for ind; nil when absent.
func findingOf(d *llmdiagv1.Diagnosis, ind llmdiagv1.Indicator) *llmdiagv1.Finding {
	for _, f := range d.GetFindings() {
		if f.GetIndicator() == ind {
			return f
		}
	}
	return nil
}
