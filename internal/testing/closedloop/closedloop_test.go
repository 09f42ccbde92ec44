package closedloop_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/closedloop"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// docValues render the two arms' configurations docs/integrations.md
// shows.
func docValues(agent bool) closedloop.CfgValues {
	balance := "roundrobin" // the arms' defaults (closedloop.Options.Balance)
	if agent {
		balance = "leastconn"
	}
	v := closedloop.CfgValues{Socket: "/run/haproxy/admin.sock", Bind: "0.0.0.0:8000", Backend: closedloop.Model,
		Balance: balance, Agent: agent, AgentAddr: "10.0.0.5", AgentPort: 9100, AgentInter: closedloop.AgentInter.String()}
	for i, addr := range []string{"10.0.1.10:8000", "10.0.1.11:8000", "10.0.1.12:8000", "10.0.1.13:8000"} {
		v.Servers = append(v.Servers, closedloop.CfgServer{ID: closedloop.Model + "-" + string(rune('0'+i)), Addr: addr})
	}
	return v
}

// TestClosedLoopConfigDocumented: docs/integrations.md holds both arms'
// haproxy.cfg as the harness renders them.
func TestClosedLoopConfigDocumented(t *testing.T) {
	for _, agent := range []bool{false, true} {
		want, err := closedloop.Render(docValues(agent))
		if err != nil {
			t.Fatal(err)
		}
		clitest.DocHolds(t, "docs/integrations.md", "```", want, fmt.Sprintf("the haproxy.cfg of the arm with agent=%v (section What steering buys)", agent))
	}
}

// TestCapacity: one node's capacity, measured on the simulator's model,
// is what its physics say: 16 slots, each request 64 steps of ~31 ms (28
// ms of weights and launches, 16 sequences' compute and context reads)
// plus its share of the prefill steps (256 tokens at ~8,400 tokens/s
// stall the batch ~30 ms): 16 ÷ (64 × 31 ms + 16 × 30 ms) ≈ 6.4/s.
func TestCapacity(t *testing.T) {
	c, err := closedloop.Capacity()
	if err != nil {
		t.Fatal(err)
	}
	if c < 6 || c > 7 {
		t.Errorf("capacity %.2f requests/s, want ~6.4", c)
	}
}

// TestClosedLoop runs one repetition of both arms and asserts the
// mechanism, not the noisy ratios (BenchmarkClosedLoop reports those):
//
//   - with the agent, once it flags the slowed node, the node's share of
//     new requests falls at least in proportion to its speed: at most its
//     baseline share ÷ the slowdown factor;
//   - with the agent, the stalled node gets no new request from STALLED +
//     one agent interval + FlagAllowance on;
//   - without it, the stalled node keeps getting requests during the
//     stalled phase, which is what makes the comparison mean something.
func TestClosedLoop(t *testing.T) {
	bin := testkit.Binary(t, closedloop.HAProxyProgram)
	rep := closedloop.Run(t, closedloop.Options{HAProxy: bin, Seed: 1})
	var b strings.Builder
	if err := rep.WriteTables(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\n%s", b.String(), rep.Ratios())
	if t.Failed() {
		return
	}
	a, g := rep.Arms[0], rep.Arms[1]
	slow := closedloop.SlowNode

	if g.SlowFlagged < 0 {
		t.Errorf("the agent never flagged %s in the slowed phase", slow)
	} else if g.AfterSlowFlag == nil {
		t.Errorf("the agent flagged %s only %v into the %v slowed phase: nothing left to count", slow, g.SlowFlagged, rep.Phase)
	} else {
		base := closedloop.Share(g.Phase(closedloop.PhaseBaseline).Received, slow)
		after := closedloop.Share(g.AfterSlowFlag, slow)
		if after > base/rep.Factor {
			t.Errorf("with the agent, %s's share of new requests after it was flagged: %.2f%%, baseline %.2f%%: want at most baseline ÷ %g (%.2f%%)",
				slow, 100*after, 100*base, rep.Factor, 100*base/rep.Factor)
		}
	}

	if g.StallFlagged < 0 {
		t.Errorf("the agent never said %s was down (STALLED) in the stalled phase", slow)
	} else if g.AfterStallFlag == nil {
		t.Errorf("the agent said %s down only %v into the %v stalled phase: nothing left to count", slow, g.StallFlagged, rep.Phase)
	} else if n := g.AfterStallFlag[slow]; n != 0 {
		t.Errorf("with the agent, %s got %d new requests from STALLED + %v on, want none", slow, n, closedloop.AgentInter+closedloop.FlagAllowance)
	}

	if n := a.Phase(closedloop.PhaseStalled).Received[slow]; n == 0 {
		t.Errorf("without the agent, %s got no request while stalled: the comparison shows nothing", slow)
	}
}

// indent puts 8 spaces before every line of s.
func indent(s string) string {
	return "        " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n        ")
}

// reps numbers the benchmark's repetitions: each draws its own arrivals.
var reps atomic.Uint64

// BenchmarkClosedLoop runs one repetition per run for each pairing of
// balance algorithms (use -benchtime 1x -v; scripts/bench.sh runs it 3
// times and prints the medians): HAProxy's default roundrobin alone
// against leastconn with the agent, as docs/integrations.md configures
// each; then the same algorithm in both arms, leastconn and roundrobin,
// which sets the agent apart from the algorithm. Each prints its tables
// and reports its acceptance ratios, arm A's figure over arm B's:
// slowed-e2e-p99-x, stalled-ttft-p99-x (both over every request sent),
// the stalled phase's failed and timed-out requests of each arm
// (stalled-fail-alone, stalled-fail-agent) and their ratio stalled-fail-x
// (+Inf when the agent arm had none).
func BenchmarkClosedLoop(b *testing.B) {
	bin := testkit.Binary(b, closedloop.HAProxyProgram)
	for _, c := range []struct {
		name    string
		balance [2]string
	}{
		{"roundrobin-vs-leastconn", [2]string{"roundrobin", "leastconn"}},
		{"leastconn", [2]string{"leastconn", "leastconn"}},
		{"roundrobin", [2]string{"roundrobin", "roundrobin"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				rep := closedloop.Run(b, closedloop.Options{HAProxy: bin, Seed: reps.Add(1), Balance: c.balance})
				var s strings.Builder
				if err := rep.WriteTables(&s); err != nil {
					b.Fatal(err)
				}
				q := rep.Ratios()
				// Printed, not logged: go test keeps only the first
				// lines of a benchmark's log; run with -v, which prints a
				// run's name with its result, after this (without it the
				// name comes first and the tables split the line).
				// Indented, as scripts/bench.sh shows such lines.
				fmt.Printf("%s\n", indent(s.String()+"\n"+q.String()))
				b.ReportMetric(q.SlowE2EP99, "slowed-e2e-p99-x")
				b.ReportMetric(q.StallTTFTP99, "stalled-ttft-p99-x")
				b.ReportMetric(q.StallFailures, "stalled-fail-x")
				b.ReportMetric(float64(q.StallFailuresA), "stalled-fail-alone")
				b.ReportMetric(float64(q.StallFailuresB), "stalled-fail-agent")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
