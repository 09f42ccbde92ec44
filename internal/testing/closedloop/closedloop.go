package closedloop

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/loadgen"
	"github.com/llmdiag/llmdiag/sim"
)

// HAProxyProgram is Debian's haproxy.
var HAProxyProgram = testkit.Program{Name: "haproxy", Env: "LLMDIAG_HAPROXY", Get: "apt-get install -y haproxy"}

const (
	// Nodes is the fleet size of each arm.
	Nodes = 4
	// AgentInter is HAProxy's agent-inter in arm B.
	AgentInter = 500 * time.Millisecond
	// ClientTimeout bounds each request: well over a slowed node's answer
	// (~20 s at a tenth of the speed), so that slow answers count in the
	// E2E tail instead of as failures; a request to a stalled node fails
	// after it.
	ClientTimeout = 45 * time.Second
	// FlagAllowance is added to the agent interval before the stalled
	// node's requests are counted: HAProxy runs the agent check every
	// AgentInter after the previous one ended, and the check takes a
	// connection and a reply (well under 100 ms on loopback, even on a
	// loaded machine); what the agent says is applied at once.
	FlagAllowance = 250 * time.Millisecond
)

// Phase names, in order.
const (
	PhaseWarmup   = "warm-up"
	PhaseBaseline = "baseline"
	PhaseSlowed   = "slowed"
	PhaseStalled  = "stalled"
)

// Options configure Run.
type Options struct {
	// HAProxy is the haproxy binary.
	HAProxy string
	// Warmup and Phase are the phases' lengths (default 15 s and 30 s).
	Warmup, Phase time.Duration
	// Factor is the slowdown of the slowed phase (default 10).
	Factor float64
	// Load is the offered load as a fraction of the fleet's capacity
	// (default 0.7).
	Load float64
	// Seed draws the arrivals (the same in both arms).
	Seed uint64
	// Balance is each arm's balance algorithm, arm A's (HAProxy alone) and
	// arm B's (with the agent). Defaults: roundrobin, HAProxy's own
	// default, alone; leastconn, as docs/integrations.md configures it,
	// with the agent.
	Balance [2]string
	// ServeArgs are added to arm B's serve command line.
	ServeArgs []string
}

func (o *Options) defaults() {
	if o.Warmup == 0 {
		o.Warmup = 15 * time.Second
	}
	if o.Phase == 0 {
		o.Phase = 30 * time.Second
	}
	if o.Factor == 0 {
		o.Factor = 10
	}
	if o.Load == 0 {
		o.Load = 0.7
	}
	for i, def := range [2]string{"roundrobin", "leastconn"} {
		if o.Balance[i] == "" {
			o.Balance[i] = def
		}
	}
}

// SlowNode is the node slowed, then stalled.
var SlowNode = Model + "-1"

// Report is one repetition: both arms, phase by phase.
type Report struct {
	// Capacity is one node's, in requests a second (see Capacity); Rate
	// what each arm was offered.
	Capacity, Rate float64
	Factor         float64
	Phase, Warmup  time.Duration
	Arms           [2]*ArmReport
}

// ArmReport is one arm's measurements.
type ArmReport struct {
	Name  string
	Agent bool
	// Balance is its HAProxy's balance algorithm.
	Balance string
	// Phases in order: warm-up, baseline, slowed, stalled.
	Phases []*PhaseReport
	// SlowFlagged and StallFlagged are when the agent first told HAProxy
	// about the node, from the start of the slowed and stalled phases
	// (arm B; -1 when it never did): a weight at most half its peers' or
	// a drain, then "down" (STALLED). The replies are kept.
	SlowFlagged, StallFlagged time.Duration
	SlowReply, StallReply     string
	// AfterSlowFlag is the new requests each server got from SlowFlagged
	// + AgentInter + FlagAllowance to the end of the slowed phase;
	// AfterStallFlag likewise for the stalled phase. In arm A they are
	// counted from the same instants as in arm B.
	AfterSlowFlag, AfterStallFlag map[string]int
	// Trace is the agent's replies for SlowNode from the start of the
	// slowed phase to the end (arm B), each when it first came: a new
	// state, or a weight 5 points or more from the last one kept.
	Trace []TraceEntry
}

// TraceEntry is one agent reply, At from the slowed phase's start.
type TraceEntry struct {
	At    time.Duration
	Reply string
}

// PhaseReport is one phase of one arm.
type PhaseReport struct {
	Name string
	// Client is what loadgen measured of the requests sent during the
	// phase (until they ended, even after it).
	Client *loadgen.Result
	// Received is the requests each server got during the phase, from
	// HAProxy's stot counters read at its boundaries.
	Received map[string]int
	stot     map[string]ServerStat // at the phase's start
}

// Timeouts and Failed split a phase's failed requests: those that timed
// out, and the others.
func (p *PhaseReport) Timeouts() int { return p.Client.Failures["timeout"] }
func (p *PhaseReport) Failed() int   { return p.Client.Failed() - p.Timeouts() }

// Share is server's share of the requests in counts.
func Share(counts map[string]int, server string) float64 {
	total := 0
	for _, v := range counts {
		total += v
	}
	if total == 0 {
		return 0
	}
	return float64(counts[server]) / float64(total)
}

// Phase returns the arm's phase called name.
func (a *ArmReport) Phase(name string) *PhaseReport {
	for _, p := range a.Phases {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// arm is one running arm: its fleet, HAProxy and, for B, llmdiag.
type arm struct {
	name      string
	fleet     *sim.Fleet
	socket    string
	frontend  string
	agentAddr string // B only
	serveURL  string // B only
	haproxy   *testkit.SyncBuffer
	exited    <-chan struct{}
}

// Run runs one repetition: both arms at once, each with its own fleet of
// Nodes nodes behind its own HAProxy, the same arrivals sent to both.
func Run(t testing.TB, o Options) *Report {
	t.Helper()
	o.defaults()
	capacity, err := Capacity()
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Capacity: capacity, Rate: o.Load * capacity * Nodes, Factor: o.Factor, Phase: o.Phase, Warmup: o.Warmup}
	ctx, cancel := context.WithCancel(context.Background())
	var serves sync.WaitGroup
	t.Cleanup(func() { cancel(); serves.Wait() })
	arms := [2]*arm{startArm(t, ctx, o, "A: HAProxy alone", false, &serves), startArm(t, ctx, o, "B: HAProxy + llmdiag agent", true, &serves)}
	for i, a := range arms {
		rep.Arms[i] = &ArmReport{Name: a.name, Agent: a.agentAddr != "", Balance: o.Balance[i], SlowFlagged: -1, StallFlagged: -1}
	}
	for _, a := range arms {
		a.waitReady(t)
	}

	// The schedule: phases back to back from t0, the same instants for
	// both arms.
	names := []string{PhaseWarmup, PhaseBaseline, PhaseSlowed, PhaseStalled}
	lengths := []time.Duration{o.Warmup, o.Phase, o.Phase, o.Phase}
	var loads sync.WaitGroup
	stats := func() [2]map[string]ServerStat {
		var out [2]map[string]ServerStat
		for i, a := range arms {
			s, err := ShowStat(a.socket)
			if err != nil {
				t.Errorf("%s: show stat: %v", a.name, err)
			}
			out[i] = s
		}
		return out
	}
	var monitor sync.WaitGroup
	var flagMu sync.Mutex
	flagged := map[string][2]map[string]ServerStat{} // phase → stats at its flag + interval
	t0 := time.Now()
	at := t0
	for k, name := range names {
		wait(at)
		st := stats()
		for i, a := range arms {
			if k > 0 {
				rep.Arms[i].Phases[k-1].Received = delta(rep.Arms[i].Phases[k-1].stot, st[i])
			}
			p := &PhaseReport{Name: name, stot: st[i]}
			rep.Arms[i].Phases = append(rep.Arms[i].Phases, p)
			switch name {
			case PhaseSlowed:
				if err := a.fleet.SetSlowdown(SlowNode, o.Factor); err != nil {
					t.Fatal(err)
				}
			case PhaseStalled:
				if err := a.fleet.SetHang(SlowNode, true); err != nil {
					t.Fatal(err)
				}
			}
			loads.Go(func() {
				res, err := loadgen.Run(ctx, loadgen.Config{
					URL: "http://" + a.frontend + "/v1/completions", Rate: rep.Rate, Duration: lengths[k],
					Prompt: loadgen.Dist{{Weight: 1, Lo: PromptTokens, Hi: PromptTokens}}, Output: loadgen.Dist{{Weight: 1, Lo: OutputTokens, Hi: OutputTokens}},
					Stream: true, MaxInFlight: 2048, Timeout: ClientTimeout, Model: Model, Seed: o.Seed*16 + uint64(k),
				})
				if err != nil {
					t.Errorf("%s %s: loadgen: %v", a.name, name, err)
					return
				}
				p.Client = res
			})
		}
		if name == PhaseSlowed {
			from, end := time.Now(), at.Add(2*o.Phase)
			b := rep.Arms[1]
			monitor.Go(func() { b.Trace = arms[1].trace(from, end) })
		}
		if name == PhaseSlowed || name == PhaseStalled {
			phaseStart, end := time.Now(), at.Add(lengths[k])
			b := rep.Arms[1]
			monitor.Go(func() {
				reply, when, ok := arms[1].watchAgent(name, end)
				if !ok {
					return
				}
				if name == PhaseSlowed {
					b.SlowFlagged, b.SlowReply = when.Sub(phaseStart), reply
				} else {
					b.StallFlagged, b.StallReply = when.Sub(phaseStart), reply
				}
				if c := when.Add(AgentInter + FlagAllowance); c.Before(end) {
					wait(c)
					s := stats()
					flagMu.Lock()
					flagged[name] = s
					flagMu.Unlock()
				}
			})
		}
		at = at.Add(lengths[k])
	}
	wait(at)
	st := stats()
	for i := range arms {
		last := rep.Arms[i].Phases[len(names)-1]
		last.Received = delta(last.stot, st[i])
	}
	monitor.Wait()
	for i := range arms {
		if s, ok := flagged[PhaseSlowed]; ok {
			rep.Arms[i].AfterSlowFlag = delta(s[i], rep.Arms[i].Phase(PhaseStalled).stot)
		}
		if s, ok := flagged[PhaseStalled]; ok {
			rep.Arms[i].AfterStallFlag = delta(s[i], st[i])
		}
	}
	loads.Wait()
	for _, a := range arms {
		select {
		case <-a.exited:
			t.Errorf("%s: haproxy exited:\n%s", a.name, a.haproxy.String())
		default:
		}
	}
	return rep
}

// wait blocks until the instant at.
func wait(at time.Time) {
	if d := time.Until(at); d > 0 {
		<-time.After(d)
	}
}

// delta is each server's stot increase from a to b.
func delta(a, b map[string]ServerStat) map[string]int {
	out := map[string]int{}
	for sv, s := range b {
		out[sv] = s.Stot - a[sv].Stot
	}
	return out
}

// watchAgent asks arm B's agent for SlowNode's reply every 50 ms until
// end, and returns the first that flags it: in the slowed phase a weight
// at most half the least of its peers' or anything but "ready up", in
// the stalled phase "down".
func (a *arm) watchAgent(phase string, end time.Time) (string, time.Time, bool) {
	for time.Now().Before(end) {
		reply, err := AgentReply(a.agentAddr, SlowNode)
		now := time.Now()
		if err == nil {
			switch phase {
			case PhaseStalled:
				if strings.HasPrefix(reply, "down") {
					return reply, now, true
				}
			case PhaseSlowed:
				w, up := agentWeight(reply)
				if !up {
					return reply, now, true
				}
				least := 1000
				for i := range Nodes {
					if id := fmt.Sprintf("%s-%d", Model, i); id != SlowNode {
						r, err := AgentReply(a.agentAddr, id)
						if pw, ok := agentWeight(r); err == nil && ok {
							least = min(least, pw)
						}
					}
				}
				if 2*w <= least {
					return reply, now, true
				}
			}
		}
		<-time.After(50 * time.Millisecond)
	}
	return "", time.Time{}, false
}

// trace asks arm B's agent for SlowNode's reply every 100 ms until end
// and keeps each that differs from the last one kept: another state, or
// a weight 5 points or more away.
func (a *arm) trace(from, end time.Time) []TraceEntry {
	var out []TraceEntry
	for time.Now().Before(end) {
		reply, err := AgentReply(a.agentAddr, SlowNode)
		if err == nil {
			keep := len(out) == 0
			if !keep {
				last := out[len(out)-1].Reply
				w, up := agentWeight(reply)
				lw, lup := agentWeight(last)
				keep = up != lup || (!up && reply != last) || (up && (w-lw >= 5 || lw-w >= 5))
			}
			if keep {
				out = append(out, TraceEntry{At: time.Since(from), Reply: reply})
			}
		}
		<-time.After(100 * time.Millisecond)
	}
	return out
}

// startArm starts an arm's fleet, its llmdiag (with agent) and HAProxy.
// armIndex is the index of the arm with or without the agent.
func armIndex(agent bool) int {
	if agent {
		return 1
	}
	return 0
}

func startArm(t testing.TB, ctx context.Context, o Options, name string, agent bool, serves *sync.WaitGroup) *arm {
	t.Helper()
	var nodes []sim.Node
	for i := range Nodes {
		n, err := NodeConfig(i)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	cfg := sim.ExternalOnly(sim.Config{Name: "closed-loop", Seed: int64(o.Seed) + 1, Nodes: nodes})
	cfg.Speed = 1
	fl, fleetPath := simtest.Start(t, cfg)
	a := &arm{name: name, fleet: fl, frontend: testkit.FreeAddr(t), haproxy: &testkit.SyncBuffer{}}
	dir := t.TempDir()
	v := CfgValues{Socket: filepath.Join(dir, "haproxy.sock"), Bind: a.frontend, Backend: Model, Balance: o.Balance[armIndex(agent)]}
	for _, n := range fl.FleetFile().Nodes {
		host := strings.TrimPrefix(n.URL, "http://")
		host, _, _ = strings.Cut(host, "/")
		v.Servers = append(v.Servers, CfgServer{ID: n.ID, Addr: host})
	}
	a.socket = v.Socket
	if agent {
		listen := testkit.FreeAddr(t)
		a.serveURL, a.agentAddr = "http://"+listen, testkit.FreeAddr(t)
		_, port, _ := net.SplitHostPort(a.agentAddr)
		v.Agent, v.AgentAddr, v.AgentInter = true, "127.0.0.1", AgentInter.String()
		v.AgentPort, _ = strconv.Atoi(port)
		var out, errw testkit.SyncBuffer
		serves.Go(func() {
			env := cli.Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errw}
			if err := cli.Run(ctx, append(ServeArgs(fleetPath, listen, a.agentAddr), o.ServeArgs...), env); err != nil {
				t.Errorf("serve: %v\n%s", err, errw.String())
			}
		})
	}
	text, err := Render(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(o.HAProxy, "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = a.haproxy, a.haproxy
	proc, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	a.exited = proc.Done()
	t.Cleanup(func() {
		proc.Stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			t.Logf("%s: haproxy's output:\n%s", name, a.haproxy.String())
		}
	})
	return a
}

// ServeArgs is arm B's llmdiag: a refresh every second over a 10-second
// window, the fast lane every 250 ms, the agent at agentAddr. The short
// window is what lets the agent's weights follow a slowdown within a
// couple of seconds: rates (the decode speed among them) are read over
// the window, and over the default 5 minutes a node's speed falls only
// as the window fills with slow samples.
func ServeArgs(fleetPath, listen, agentAddr string) []string {
	return []string{"serve", "--fleet", fleetPath, "--listen", listen, "--interval", "1s", "--window", "10s", "--fast-interval", "250ms",
		"--haproxy-agent-listen", agentAddr, "--log-level", "warn"}
}

// waitReady waits until HAProxy has every server UP and, in arm B, the
// agent has fresh data on every node ("ready up").
func (a *arm) waitReady(t testing.TB) {
	t.Helper()
	var last string
	testkit.Wait{For: 2 * time.Minute, Every: 100 * time.Millisecond, Last: func() string { return last }}.Until(t, a.name+" ready", func() bool {
		select {
		case <-a.exited:
			t.Fatalf("%s: haproxy exited:\n%s", a.name, a.haproxy.String())
		default:
		}
		st, err := ShowStat(a.socket)
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprint(st)
		if len(st) != Nodes {
			return false
		}
		for sv, s := range st {
			if s.Status != "UP" {
				return false
			}
			if a.agentAddr != "" {
				r, err := AgentReply(a.agentAddr, sv)
				last += "; " + sv + ": " + r
				if err != nil || !strings.HasPrefix(r, "ready up") || strings.Contains(r, "fail open") {
					return false
				}
			}
		}
		return true
	})
}
