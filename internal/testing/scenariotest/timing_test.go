package scenariotest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sim"
)

// This file measures, in simulated time and from the stored readings alone,
// how fast verdicts follow a change of load and how often they flip, and
// holds the acceptance criteria of the idle-then-overload, kv-flap and
// stalled scenarios (sim.Scenario describes them).

// flips counts a node's routable changes and status changes between
// consecutive refreshes over a run.
type flips struct{ routable, status int }

func flipsOf(rs []Reading) flips {
	var f flips
	for i := 1; i < len(rs); i++ {
		if rs[i].Diagnosis.GetRoutable() != rs[i-1].Diagnosis.GetRoutable() {
			f.routable++
		}
		if rs[i].Status != rs[i-1].Status {
			f.status++
		}
	}
	return f
}

func (f flips) String() string { return fmt.Sprintf("%d/%d", f.routable, f.status) }

// queueSaturated is diagnose.DefaultThresholds().QueueSaturated: a queue
// above it is a queue forming.
var queueSaturated = diagnose.DefaultThresholds().QueueSaturated

// kvCrit is diagnose.DefaultThresholds().KVCrit.
var kvCrit = diagnose.DefaultThresholds().KVCrit

// hasQueueAndRunning reports whether llmdiag's engine table reads both a
// queue and a running count for engine e; the overload acceptance applies
// only to those schemas.
func hasQueueAndRunning(e sim.Engine) bool {
	id, err := fleet.ParseEngine(e.FleetName())
	if err != nil {
		return false
	}
	m, ok := engine.Lookup(id)
	return ok && len(m.Concepts[engine.Queue]) > 0 && len(m.Concepts[engine.Running]) > 0
}

// overloadTiming is how the overloaded node of idle-then-overload was read
// around its overload phase. Indexes are into its readings, -1 when the
// event did not happen.
type overloadTiming struct {
	start, end time.Duration // the overload phase
	// queue is the first refresh from start on with the queue above
	// queueSaturated; notRoutable and overloaded the first from start on
	// that is not routable, and that reads OVERLOADED.
	queue, notRoutable, overloaded int
	// drain is the first refresh from end on with the queue at most
	// queueSaturated, routable the first from drain on that is routable.
	drain, routable int
	// relapses counts routable refreshes between notRoutable and drain.
	relapses int
}

// overloadedNode is the node idle-then-overload overloads.
const overloadedNode = "qwen3-8b-0"

func timeOverload(res *Result) overloadTiming {
	var ph []sim.Phase
	for _, n := range res.Config.Nodes {
		if n.ID == overloadedNode {
			ph = n.Workload.Phases
		}
	}
	rs := res.Readings[overloadedNode]
	o := overloadTiming{queue: -1, notRoutable: -1, overloaded: -1, drain: -1, routable: -1}
	if len(ph) < 2 {
		return o
	}
	o.start, o.end = ph[0].At, ph[1].At
	first := func(from int, ok func(Reading) bool) int {
		for i := max(from, 0); i < len(rs); i++ {
			if ok(rs[i]) {
				return i
			}
		}
		return -1
	}
	at := func(d time.Duration) int { return first(0, func(r Reading) bool { return r.At >= d }) }
	queue := func(r Reading) float64 { // -1 when unknown
		if r.Metrics == nil || r.Metrics.Queue == nil {
			return -1
		}
		return *r.Metrics.Queue
	}
	s := at(o.start)
	o.queue = first(s, func(r Reading) bool { return queue(r) > queueSaturated })
	o.notRoutable = first(s, func(r Reading) bool { return !r.Diagnosis.GetRoutable() })
	o.overloaded = first(s, func(r Reading) bool { return r.Cause == overload })
	o.drain = first(at(o.end), func(r Reading) bool { q := queue(r); return q >= 0 && q <= queueSaturated })
	if o.drain >= 0 {
		o.routable = first(o.drain, func(r Reading) bool { return r.Diagnosis.GetRoutable() })
	}
	if o.notRoutable >= 0 && o.drain > o.notRoutable {
		for _, r := range rs[o.notRoutable:o.drain] {
			if r.Diagnosis.GetRoutable() {
				o.relapses++
			}
		}
	}
	return o
}

// refreshes is how many refreshes from i to j, both counted; -1 when j
// did not happen.
func refreshes(i, j int) int {
	if i < 0 || j < 0 {
		return -1
	}
	return j - i + 1
}

func (o overloadTiming) since(rs []Reading, i int) string {
	if i < 0 {
		return "never"
	}
	return fmt.Sprintf("%v", rs[i].At-o.start)
}

// summary is one engine's figures: seconds from the overload's start to
// the queue forming, to not routable (and in refreshes from the queue
// forming, that one counting 1), to OVERLOADED; then refreshes from the
// drain to routable, and routable relapses during the overload.
func (o overloadTiming) summary(rs []Reading) string {
	n := func(k int) string {
		if k < 0 {
			return "-"
		}
		return fmt.Sprint(k)
	}
	return fmt.Sprintf("q>5 %s, NR %s (%s), OVL %s, drain→R %s, relapse %d",
		o.since(rs, o.queue), o.since(rs, o.notRoutable), n(refreshes(o.queue, o.notRoutable)),
		o.since(rs, o.overloaded), n(refreshes(o.drain, o.routable)), o.relapses)
}

// acceptIdleThenOverload checks, on a schema with queue and running:
// after ≥ 10 simulated minutes idle, the node is not routable within 2
// refreshes of the queue forming (the refresh that first sees it counts as
// 1), OVERLOADED within 30 s of that refresh, stays not routable while
// the queue lasts, and is routable again within 2 refreshes of the queue
// draining. On every schema: neither node ever reads STALLED (the idle
// phase included); with the field quirks, the default window's
// TTFT, E2E and token rates are known from the first refresh after the
// first request completed, wherever the healthy peer (same schema, the
// engine's own exposition) knows them.
func acceptIdleThenOverload(t *testing.T, res *Result) {
	t.Helper()
	e := res.Options.Engine
	rs := res.Readings[overloadedNode]
	o := timeOverload(res)
	if o.start < 10*time.Minute {
		t.Fatalf("overload starts %v after warm-up: want ≥ 10m idle", o.start)
	}
	if hasQueueAndRunning(e) {
		switch {
		case o.queue < 0:
			t.Errorf("acceptance: the queue never rose above %v during the overload", queueSaturated)
		case o.notRoutable < 0:
			t.Errorf("acceptance: never not routable during the overload (queue > %v from %s on, for %v): want within 2 refreshes of the queue forming",
				queueSaturated, o.since(rs, o.queue), o.end-o.start)
		case refreshes(o.queue, o.notRoutable) > 2:
			t.Errorf("acceptance: not routable %s after the overload began, at the %dth refresh of the queue (> %v from %s): want within 2",
				o.since(rs, o.notRoutable), refreshes(o.queue, o.notRoutable), queueSaturated, o.since(rs, o.queue))
		}
		if o.queue >= 0 && (o.overloaded < 0 || rs[o.overloaded].At-rs[o.queue].At > 30*time.Second) {
			t.Errorf("acceptance: OVERLOADED %s after the overload began, the queue forming at %s: want within 30s of that",
				o.since(rs, o.overloaded), o.since(rs, o.queue))
		}
		if o.relapses > 0 {
			t.Errorf("acceptance: routable again at %d refreshes while the queue still stood", o.relapses)
		}
		switch {
		case o.drain < 0:
			t.Errorf("acceptance: the queue never drained after the overload")
		case o.routable < 0 || refreshes(o.drain, o.routable) > 2:
			t.Errorf("acceptance: routable %d refreshes after the queue drained (at %s): want within 2",
				refreshes(o.drain, o.routable), o.since(rs, o.drain))
		}
	} else {
		t.Logf("%s: no queue or no running count in the engine table: overload acceptance does not apply", e)
	}
	// An idle node has nothing to progress: its counters stand still (absent,
	// with the field quirks) for 10 minutes, and it is not STALLED.
	for _, id := range res.Nodes {
		for _, r := range res.Readings[id] {
			if r.Cause == stall {
				t.Errorf("acceptance: %s read STALLED at %v (queue %v, running %v): an idle or working node never does", id, r.At, r.Sim.Waiting, r.Sim.Running)
				break
			}
		}
	}
	checkFieldLatency(t, res)
}

// checkFieldLatency checks that the field-quirks node's window latencies
// and token rates are known from the first refresh after its first
// request completed, wherever the peer's are.
func checkFieldLatency(t *testing.T, res *Result) {
	t.Helper()
	peer := res.Readings["qwen3-8b-1"]
	if len(peer) == 0 {
		t.Fatal("no peer readings")
	}
	ref := peer[len(peer)-1].Metrics
	type known struct {
		name string
		of   func(*llmdiagv1.NodeMetrics) bool
	}
	var want []known
	for _, k := range []known{
		{"TTFT", func(m *llmdiagv1.NodeMetrics) bool { return m.GetTtft() != nil }},
		{"E2E", func(m *llmdiagv1.NodeMetrics) bool { return m.GetE2E() != nil }},
		{"generation tok/s", func(m *llmdiagv1.NodeMetrics) bool { return m.GenerationTokensPerSecond != nil }},
		{"prompt tok/s", func(m *llmdiagv1.NodeMetrics) bool { return m.PromptTokensPerSecond != nil }},
	} {
		if k.of(ref) {
			want = append(want, k)
		}
	}
	rs := res.Readings[overloadedNode]
	for _, k := range want {
		var unknown []time.Duration
		for _, r := range rs {
			if r.Sim.Finished > 0 && !k.of(r.Metrics) {
				unknown = append(unknown, r.At)
			}
		}
		if len(unknown) > 0 {
			first := -1
			for i, r := range rs {
				if r.Sim.Finished > 0 {
					first = i
					break
				}
			}
			t.Errorf("acceptance: %s unknown at %d refreshes after the first request completed (first refresh after it: %v; unknown from %v to %v): series created on first use must count as 0 where the window's base sample lacks them",
				k.name, len(unknown), rs[first].At, unknown[0], unknown[len(unknown)-1])
		}
	}
}

// kvFlap is how the kv-flap node was read: runs of refreshes with KV ≥
// kvCrit (sustained when ≥ 2), episodes of refreshes not routable, and
// single-refresh dips below kvCrit between two refreshes above it.
type kvFlap struct {
	known     bool // the schema exposes KV usage
	crossings int  // sustained runs above kvCrit
	episodes  int  // not-routable runs starting at or after the first crossing
	// most is the largest number of episodes starting during one
	// crossing (from its start to the next one's).
	most int
	// dips while not routable, and those at which the node read routable.
	dips, dipsRoutable int
	dipsAt             []time.Duration
}

func flapOf(rs []Reading) kvFlap {
	var k kvFlap
	above, below := make([]bool, len(rs)), make([]bool, len(rs)) // unknown: neither
	for i, r := range rs {
		if r.Metrics != nil && r.Metrics.KvPressure != nil {
			k.known = true
			above[i] = *r.Metrics.KvPressure >= kvCrit
			below[i] = !above[i]
		}
	}
	var starts []int // of sustained crossings
	for i := 0; i < len(rs); {
		if !above[i] {
			i++
			continue
		}
		j := i
		for j < len(rs) && above[j] {
			j++
		}
		if j-i >= 2 {
			starts = append(starts, i)
		}
		i = j
	}
	k.crossings = len(starts)
	perCrossing := make([]int, len(starts))
	for i := range rs {
		if rs[i].Diagnosis.GetRoutable() || (i > 0 && !rs[i-1].Diagnosis.GetRoutable()) {
			continue
		}
		c := -1 // the crossing the episode starting at i belongs to
		for n, s := range starts {
			if s <= i {
				c = n
			}
		}
		if c >= 0 {
			k.episodes++
			perCrossing[c]++
			k.most = max(k.most, perCrossing[c])
		}
	}
	for i := 1; i+1 < len(rs); i++ {
		if below[i] && above[i-1] && above[i+1] && !rs[i-1].Diagnosis.GetRoutable() {
			k.dips++
			if rs[i].Diagnosis.GetRoutable() {
				k.dipsRoutable++
				k.dipsAt = append(k.dipsAt, rs[i].At)
			}
		}
	}
	return k
}

func (k kvFlap) summary() string {
	if !k.known {
		return "no KV usage"
	}
	return fmt.Sprintf("crossings %d, NR episodes %d (most per crossing %d), dips while NR %d, made routable %d",
		k.crossings, k.episodes, k.most, k.dips, k.dipsRoutable)
}

// acceptKVFlap checks, on a schema that exposes KV usage: at most one
// not-routable episode per sustained crossing of kvCrit (≥ 2 refreshes in
// a row at or above it), and no single-refresh dip below kvCrit while not
// routable makes the node routable.
func acceptKVFlap(t *testing.T, res *Result) {
	t.Helper()
	k := flapOf(res.Readings["qwen3-8b-0"])
	if !k.known {
		t.Logf("%s: no KV usage: KV acceptance does not apply", res.Options.Engine)
		return
	}
	if k.crossings < 2 {
		t.Errorf("only %d sustained crossings of KV %v: the scenario does not flap", k.crossings, kvCrit)
	}
	if k.most > 1 {
		t.Errorf("acceptance: %d not-routable episodes during one sustained crossing of KV %v; want at most 1", k.most, kvCrit)
	}
	if k.dipsRoutable > 0 {
		t.Errorf("acceptance: %d of %d single-refresh dips below KV %v made the not-routable node routable (at %v)",
			k.dipsRoutable, k.dips, kvCrit, k.dipsAt)
	}
}

// timingTables renders the flips of every node and the time-to-verdict
// figures of idle-then-overload and kv-flap, one column per engine.
func timingTables(fl map[caseKey]flips, timing map[caseKey]string) string {
	var b strings.Builder
	engines := sim.Engines()
	head := func(title string) {
		fmt.Fprintf(&b, "%-20s %-14s", title, "node")
		for _, e := range engines {
			fmt.Fprintf(&b, " | %-13s", e)
		}
		b.WriteString("\n")
	}
	head("flips (routable/status)")
	for _, sc := range expected {
		seen := map[string]bool{}
		for _, tg := range sc.targets {
			if seen[tg.node] {
				continue
			}
			seen[tg.node] = true
			fmt.Fprintf(&b, "%-20s %-14s", sc.scenario, tg.node)
			for _, e := range engines {
				cell := "-"
				if f, ok := fl[caseKey{sc.scenario, e, tg.node, ""}]; ok {
					cell = f.String()
				}
				fmt.Fprintf(&b, " | %-13s", cell)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("flips: routable changes / status changes between consecutive refreshes over the whole run\n\n")
	for _, sc := range []string{"idle-then-overload", "kv-flap", "stalled"} {
		fmt.Fprintf(&b, "%s:\n", sc)
		for _, e := range engines {
			if s, ok := timing[caseKey{sc, e, "", ""}]; ok {
				fmt.Fprintf(&b, "  %-13s %s\n", e, s)
			}
		}
	}
	b.WriteString("idle-then-overload: simulated time from the overload's start to the first refresh with queue > 5 (q>5),\n" +
		"not routable (NR; in parentheses refreshes counted from the q>5 one, which counts 1), OVERLOADED (OVL);\n" +
		"refreshes from the first with queue ≤ 5 after the overload to routable (drain→R); routable refreshes\n" +
		"between NR and the drain (relapse). kv-flap: sustained runs of KV ≥ 0.95 (≥ 2 refreshes), not-routable\n" +
		"episodes from the first of them, single-refresh dips below 0.95 while not routable and how many read routable.\n" +
		"stalled: refreshes counted from the first of the hang (1): the first STALLED, the one it is due by, the first\n" +
		"not routable (NR); HEALTHY and routable readings from the third on; causes read before STALLED was due\n")
	return b.String()
}

// stalledNode is the node the stalled scenario hangs.
const stalledNode = "qwen3-8b-0"

// stallTiming is how the stalled node was read from its hang on. Indexes
// are into its readings, -1 when the event did not happen.
type stallTiming struct {
	// hang is the first refresh at or after the hang's start; due the one
	// by which STALLED must read: the stalled_refreshes-th from hang, or,
	// where the schema has no inter-token histogram, the first with the
	// counters flat for stalled_request_counters_for as well.
	hang, due int
	perToken  bool
	// stalled and notRoutable are the first refreshes from hang on that
	// read STALLED, and that are not routable.
	stalled, notRoutable int
	// healthy and routable count the refreshes from the third of the hang
	// on that read HEALTHY, and that are routable; unstalled those from due
	// on that read anything but STALLED.
	healthy, routable, unstalled int
	// before is what the node read from the hang to due, cause by cause.
	before map[llmdiagv1.Cause]int
}

// hasInterToken reports whether llmdiag's engine table reads an
// inter-token histogram for engine e: a flat odometer is then a hang once
// stalled_refreshes say so (diagnose/cause_stalled.go).
func hasInterToken(e sim.Engine) bool {
	id, err := fleet.ParseEngine(e.FleetName())
	if err != nil {
		return false
	}
	m, ok := engine.Lookup(id)
	return ok && len(m.Concepts[engine.ITL]) > 0
}

func timeStall(res *Result) stallTiming {
	th := diagnose.DefaultThresholds()
	rs := res.Readings[stalledNode]
	s := stallTiming{hang: -1, due: -1, stalled: -1, notRoutable: -1, perToken: hasInterToken(res.Options.Engine),
		before: map[llmdiagv1.Cause]int{}}
	for i, r := range rs {
		if r.At >= sim.StalledAt {
			s.hang = i
			break
		}
	}
	if s.hang < 0 {
		return s
	}
	third := s.hang + th.StalledRefreshes - 1
	s.due = third
	if !s.perToken {
		s.due = -1
		for i := s.hang; i < len(rs); i++ {
			if rs[i].At-rs[s.hang].At >= th.StalledRequestCountersFor {
				s.due = max(i, third)
				break
			}
		}
	}
	for i := s.hang; i < len(rs); i++ {
		r := rs[i]
		if s.stalled < 0 && r.Cause == stall {
			s.stalled = i
		}
		if s.notRoutable < 0 && !r.Diagnosis.GetRoutable() {
			s.notRoutable = i
		}
		if i >= third && r.Cause == healthy {
			s.healthy++
		}
		if i >= third && r.Diagnosis.GetRoutable() {
			s.routable++
		}
		if s.due >= 0 && i < s.due {
			s.before[r.Cause]++
		}
		if s.due >= 0 && i >= s.due && r.Cause != stall {
			s.unstalled++
		}
	}
	return s
}

// summary is one engine's figures: the refresh of the hang (the first
// counting 1) that first read STALLED and the one it was due by, the
// first not routable, HEALTHY readings from the third on, and what the
// node read before STALLED was due.
func (s stallTiming) summary() string {
	n := func(k int) string {
		if k < 0 || s.hang < 0 {
			return "never"
		}
		return fmt.Sprint(k - s.hang + 1)
	}
	kind := "per token"
	if !s.perToken {
		kind = "whole requests"
	}
	return fmt.Sprintf("%s: STALLED at refresh %s (due %s), NR at %s; from the 3rd, HEALTHY %d, routable %d; before due: %s",
		kind, n(s.stalled), n(s.due), n(s.notRoutable), s.healthy, s.routable, causeCounts(s.before))
}

// acceptStalled checks the stalled scenario's acceptance from the stored
// readings: the hung node reads STALLED by the third refresh of the hang
// (stalled_refreshes) wherever the engine counts token by token, and by
// the first refresh with the counters flat for
// stalled_request_counters_for where it counts only whole requests, and
// reads STALLED at every refresh from then on; from the third refresh of
// the hang on, whatever the schema, it never reads HEALTHY and is never
// routable (what StreamHealth sends: server/stream_test.go); and the peer
// never reads STALLED.
func acceptStalled(t *testing.T, res *Result) {
	t.Helper()
	s := timeStall(res)
	rs := res.Readings[stalledNode]
	if s.hang < 0 || s.due < 0 {
		t.Fatalf("the run (%d readings, to %v) does not reach the hang at %v and the refresh STALLED is due by", len(rs), rs[len(rs)-1].At, sim.StalledAt)
	}
	at := func(i int) string {
		if i < 0 {
			return "never"
		}
		return fmt.Sprintf("at %v (refresh %d of the hang)", rs[i].At, i-s.hang+1)
	}
	if s.stalled < 0 || s.stalled > s.due {
		t.Errorf("acceptance: STALLED %s: want by %s", at(s.stalled), at(s.due))
	}
	if s.unstalled > 0 {
		t.Errorf("acceptance: from %s on, %d refreshes read another cause than STALLED: want none", at(s.due), s.unstalled)
	}
	if s.healthy > 0 || s.routable > 0 {
		t.Errorf("acceptance: from the third refresh of the hang on, %d read HEALTHY and %d were routable: want none", s.healthy, s.routable)
	}
	for _, r := range res.Readings["qwen3-8b-1"] {
		if r.Cause == stall {
			t.Errorf("acceptance: the healthy peer read STALLED at %v", r.At)
			break
		}
	}
	for _, r := range rs[s.hang:] {
		if r.Sim.Finished != rs[s.hang].Sim.Finished {
			t.Fatalf("the simulated node finished requests during its hang (at %v): the scenario does not hang", r.At)
		}
	}
}
