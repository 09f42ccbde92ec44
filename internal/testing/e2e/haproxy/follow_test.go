package haproxy_test

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/closedloop"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// followWithin bounds how long after llmdiag's verdict on a node changes
// HAProxy's state of its server follows, with the fast lane on and the
// agent asked every 500 ms.
const followWithin = 2 * time.Second

// TestHAProxyAgentFollows: HAProxy's runtime state of a server follows
// llmdiag's verdict on its node. Three GLM nodes, lightly loaded, at 5×
// real time; serve with the fast lane. glm-4.6-0's arrivals rise past its
// capacity: HAProxy drains it within followWithin of GET /routable first
// answering 503; they stop: it is up again within followWithin of 200;
// its engine hangs: once the agent says down (STALLED), HAProxy has it
// DOWN within followWithin.
func TestHAProxyAgentFollows(t *testing.T) {
	bin := testkit.Binary(t, closedloop.HAProxyProgram)
	dir := t.TempDir()
	cfg := simtest.Scenario(t, "overloaded", 1)
	base := cfg.Nodes[0]
	base.Workload.Rate = 1
	cfg.Nodes = nil
	for i := range 3 {
		n := base
		n.ID = fmt.Sprintf("glm-4.6-%d", i)
		cfg.Nodes = append(cfg.Nodes, n)
	}
	cfg.Speed, cfg.Warmup = 5, 2*time.Minute
	fl, fleetPath := simtest.Start(t, cfg)

	listen, agentAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, portText, _ := net.SplitHostPort(agentAddr)
	port, _ := strconv.Atoi(portText)
	clitest.Start(t, nil, "serve", "--listen", listen, "--fleet", fleetPath, "--interval", "1s", "--fast-interval", "250ms",
		"--haproxy-agent-listen", agentAddr, "--log-level", "warn")
	v := backends(fl.FleetFile().Nodes)
	v.Socket, v.Bind, v.AgentAddr, v.AgentPort = filepath.Join(dir, "haproxy.sock"), testkit.FreeAddr(t), "127.0.0.1", port
	exited, hout := runHAProxy(t, bin, dir, v)

	const hot = "glm-4.6-0"
	var last string
	// state polls HAProxy's state of hot every 20 ms until it has prefix
	// set by an agent reply (L7OK, L7STS for down),
	// and returns when it first saw it.
	state := func(what, prefix string, within time.Duration) time.Time {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				t.Fatalf("haproxy exited:\n%s", hout.String())
			default:
			}
			stats, err := closedloop.ShowStat(v.Socket)
			if err == nil && strings.HasPrefix(stats[hot].Status, prefix) && strings.HasPrefix(stats[hot].AgentStatus, "L7") {
				return time.Now()
			}
			last = fmt.Sprint(stats, err)
			time.Sleep(20 * time.Millisecond) // a poll's period, not a wait for a condition
		}
		t.Fatalf("%s: HAProxy's state of %s not %s within %v; last: %s", what, hot, prefix, within, last)
		return time.Time{}
	}
	// verdict polls GET /routable/hot every 20 ms until it answers code,
	// and returns when it first did.
	verdict := func(what string, code int, within time.Duration) time.Time {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if status(t, "http://"+listen+"/routable/"+hot) == code {
				return time.Now()
			}
			time.Sleep(20 * time.Millisecond) // a poll's period, not a wait for a condition
		}
		t.Fatalf("%s: GET /routable/%s not %d within %v", what, hot, code, within)
		return time.Time{}
	}
	clitest.WaitFor(t, "every server UP with the agent answering", 150*time.Second, func() bool {
		stats, err := closedloop.ShowStat(v.Socket)
		last = fmt.Sprint(stats, err)
		if err != nil || len(stats) != 3 {
			return false
		}
		for _, s := range stats {
			if s.Status != "UP" || s.AgentStatus != "L7OK" {
				return false
			}
		}
		return true
	}, &last)

	if err := fl.SetRate(hot, 12); err != nil {
		t.Fatal(err)
	}
	marked := verdict("saturated", http.StatusServiceUnavailable, 60*time.Second)
	drained := state("saturated", "DRAIN", 60*time.Second)
	t.Logf("measured: %s DRAIN in HAProxy %v after llmdiag marked it unroutable (bound %v)", hot, drained.Sub(marked).Round(time.Millisecond), followWithin)
	if d := drained.Sub(marked); d > followWithin {
		t.Errorf("%s drained %v after llmdiag marked it unroutable, want within %v", hot, d, followWithin)
	}

	if err := fl.SetRate(hot, 0); err != nil {
		t.Fatal(err)
	}
	routable := verdict("drained", http.StatusOK, 60*time.Second)
	up := state("drained", "UP", 60*time.Second)
	t.Logf("measured: %s UP in HAProxy %v after llmdiag found it routable again (bound %v)", hot, up.Sub(routable).Round(time.Millisecond), followWithin)
	if d := up.Sub(routable); d > followWithin {
		t.Errorf("%s up %v after llmdiag found it routable, want within %v", hot, d, followWithin)
	}

	if err := fl.SetRate(hot, 1); err != nil {
		t.Fatal(err)
	}
	if err := fl.SetHang(hot, true); err != nil {
		t.Fatal(err)
	}
	hung := time.Now()
	var stalled time.Time
	clitest.WaitFor(t, "the agent to say "+hot+" down, STALLED", 90*time.Second, func() bool {
		last = agentReply(agentAddr, hot)
		stalled = time.Now()
		return last == "down #CAUSE_STALLED"
	}, &last)
	down := state("hung", "DOWN", 60*time.Second)
	t.Logf("measured: the agent said %s down (STALLED) %v after its engine hung; HAProxy had it DOWN %v after that (bound %v)",
		hot, stalled.Sub(hung).Round(time.Millisecond), down.Sub(stalled).Round(time.Millisecond), followWithin)
	if d := down.Sub(stalled); d > followWithin {
		t.Errorf("%s DOWN in HAProxy %v after the agent said so, want within %v", hot, d, followWithin)
	}
}

// status is the status of a GET of u, 0 when it failed.
func status(t *testing.T, u string) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(u)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
