package haproxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/closedloop"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/server"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// cfgTemplate is the haproxy.cfg the test runs and docs/integrations.md
// shows (rendered with docValues): one backend per model, a server per
// node taking its weight and state from llmdiag's agent.
var cfgTemplate = template.Must(template.New("haproxy.cfg").Parse(`global
    # the runtime API: show stat, show servers state, set server
    stats socket {{.Socket}} level admin

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 600s
    timeout check 1s

frontend inference
    bind {{.Bind}}
    default_backend {{(index .Backends 0).Name}}
{{range .Backends}}
backend {{.Name}}
    balance leastconn
{{- range .Servers}}
    server {{.ID}} {{.Addr}} check weight 100 agent-check agent-addr {{$.AgentAddr}} agent-port {{$.AgentPort}} agent-send "{{.ID}}\n" agent-inter 500ms
{{- end}}
{{end}}`))

type cfgValues struct {
	Socket, Bind, AgentAddr string
	AgentPort               int
	Backends                []cfgBackend
}

type cfgBackend struct {
	Name    string
	Servers []cfgServer
}

type cfgServer struct{ ID, Addr string }

// docValues render the configuration docs/integrations.md shows.
var docValues = cfgValues{
	Socket: "/run/haproxy/admin.sock", Bind: "0.0.0.0:8000", AgentAddr: "10.0.0.5", AgentPort: 9100,
	Backends: []cfgBackend{{Name: "glm-4.6", Servers: []cfgServer{{"glm-4.6-0", "10.0.1.10:8000"}, {"glm-4.6-1", "10.0.1.11:8000"}}}},
}

func render(t *testing.T, v cfgValues) string {
	t.Helper()
	var b strings.Builder
	if err := cfgTemplate.Execute(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestHAProxyConfigDocumented: docs/integrations.md holds the
// configuration TestHAProxyAgent runs.
func TestHAProxyConfigDocumented(t *testing.T) {
	clitest.DocHolds(t, "docs/integrations.md", "```", render(t, docValues), "the haproxy.cfg the test runs (section HAProxy)")
}

// backends are the configuration's backends for nodes: one per model, a
// server per node.
func backends(nodes []fleet.Node) cfgValues {
	var v cfgValues
	models := map[string]int{}
	for _, n := range nodes {
		i, ok := models[n.Model]
		if !ok {
			i = len(v.Backends)
			models[n.Model] = i
			v.Backends = append(v.Backends, cfgBackend{Name: n.Model})
		}
		host := strings.TrimPrefix(strings.TrimPrefix(n.URL, "http://"), "https://")
		host, _, _ = strings.Cut(host, "/")
		v.Backends[i].Servers = append(v.Backends[i].Servers, cfgServer{ID: n.ID, Addr: host})
	}
	return v
}

// runHAProxy runs HAProxy on v's configuration, written in dir, until the
// test ends; exited closes if it exits first, and hout is its output.
func runHAProxy(t *testing.T, bin, dir string, v cfgValues) (exited <-chan struct{}, hout *testkit.SyncBuffer) {
	t.Helper()
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(render(t, v)), 0o644); err != nil {
		t.Fatal(err)
	}
	hout = &testkit.SyncBuffer{}
	cmd := exec.Command(bin, "-f", cfg, "-db")
	cmd.Stdout, cmd.Stderr = hout, hout
	proc, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			t.Logf("haproxy's output:\n%s", hout.String())
		}
	})
	return proc.Done(), hout
}

// agentReply asks the agent for node's reply as HAProxy does.
func agentReply(addr, node string) string {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, node+"\n")
	b, _ := io.ReadAll(c)
	return strings.TrimSpace(string(b))
}

// routableScore reads node's load score from GET /routable/{node}, as
// JSON (the text rounds it).
func routableScore(base, node string) (float64, bool) {
	req, err := http.NewRequest(http.MethodGet, base+"/routable/"+node, nil)
	if err != nil {
		return 0, false
	}
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var a struct {
		Routable  bool     `json:"routable"`
		Stale     bool     `json:"stale"`
		LoadScore *float64 `json:"load_score"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&a) != nil || !a.Routable || a.Stale || a.LoadScore == nil {
		return 0, false
	}
	return *a.LoadScore, true
}

var weightRE = regexp.MustCompile(`^ready up (\d+)% #`)

// TestHAProxyAgent runs HAProxy with a backend of the overloaded fleet
// (glm-4.6-0 saturated, glm-4.6-1 its healthy peer) whose servers ask
// serve --haproxy-agent-listen for their weight and state: glm-4.6-0 is
// drained, glm-4.6-1 up with the weight of its load score. Then serve
// stops, and HAProxy keeps the last state the agent gave each server.
func TestHAProxyAgent(t *testing.T) {
	bin := testkit.Binary(t, closedloop.HAProxyProgram)
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	f := clitest.Sim(t, "overloaded", fleetPath)

	listen, agentAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, portText, _ := net.SplitHostPort(agentAddr)
	port, _ := strconv.Atoi(portText)
	// serve answers the agent; with stopAnswer "0" it closes the agent's
	// port at once on stopping, as a crash would.
	startServe := func(stopAnswer string) func() {
		stop, _ := clitest.Start(t, nil, "serve", "--listen", listen, "--fleet", fleetPath, "--interval", "1s",
			"--haproxy-agent-listen", agentAddr, "--log-level", "warn", "--haproxy-agent-stop-answer", stopAnswer)
		return stop
	}
	stopServe := startServe("0")

	v := backends(f.Nodes)
	v.Socket, v.Bind, v.AgentAddr, v.AgentPort = filepath.Join(dir, "haproxy.sock"), testkit.FreeAddr(t), "127.0.0.1", port
	exited, hout := runHAProxy(t, bin, dir, v)

	var last string
	var stats map[string]closedloop.ServerStat
	var weight int
	clitest.WaitFor(t, "glm-4.6-0 drained and glm-4.6-1 up with its load score's weight", 150*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("haproxy exited:\n%s", hout.String())
		default:
		}
		var err error
		stats, err = closedloop.ShowStat(v.Socket)
		last = fmt.Sprint(stats)
		if err != nil {
			last = err.Error()
			return false
		}
		sat, healthy := stats["glm-4.6-0"], stats["glm-4.6-1"]
		reply := agentReply(agentAddr, "glm-4.6-1")
		score, ok := routableScore("http://"+listen, "glm-4.6-1")
		last += "\nagent for glm-4.6-1: " + reply + "; load score " + strconv.FormatFloat(score, 'f', 3, 64)
		// The score is read after the reply: the same refresh's, unless
		// one came in between (the next poll then agrees).
		m := weightRE.FindStringSubmatch(reply)
		if m == nil || !ok {
			return false
		}
		weight, _ = strconv.Atoi(m[1])
		return strings.HasPrefix(sat.Status, "DRAIN") && healthy.Status == "UP" &&
			healthy.Weight == weight && weight == server.HAProxyWeight(score, 1)
	}, &last)
	t.Logf("with llmdiag up: glm-4.6-0 %+v; glm-4.6-1 %+v (agent weight %d%%)", stats["glm-4.6-0"], stats["glm-4.6-1"], weight)
	if d := stats["glm-4.6-1"].LastAgent; !strings.HasPrefix(d, "via agent : up (CAUSE_") {
		t.Errorf("glm-4.6-1's last agent reply %q, want up with its cause", d)
	}
	up := stats

	// llmdiag goes away at once (a crash, or --haproxy-agent-stop-answer
	// 0): the agent's connections are refused.
	stopServe()
	waitAgentDown := func() {
		clitest.WaitFor(t, "HAProxy to see the agent fail for every server", 30*time.Second, func() bool {
			var err error
			stats, err = closedloop.ShowStat(v.Socket)
			last = fmt.Sprint(stats)
			if err != nil {
				last = err.Error()
				return false
			}
			for _, s := range stats {
				if s.AgentStatus != "L4CON" {
					return false
				}
			}
			return len(stats) == len(f.Nodes)
		}, &last)
	}
	waitAgentDown()
	t.Logf("with llmdiag gone at once: glm-4.6-0 %+v; glm-4.6-1 %+v", stats["glm-4.6-0"], stats["glm-4.6-1"])
	// HAProxy keeps the state and weight the agent last gave: a failure
	// to reach the agent changes nothing (its documentation: connectivity
	// is the regular check's business). The drained node stays drained
	// until the agent answers again or an operator says otherwise.
	for _, n := range []string{"glm-4.6-0", "glm-4.6-1"} {
		if got, was := stats[n], up[n]; got.Status != was.Status || got.Weight != was.Weight {
			t.Errorf("%s with the agent unreachable: %s weight %d, want what it was, %s weight %d", n, got.Status, got.Weight, was.Status, was.Weight)
		}
	}

	// llmdiag back, with the default stop answer: glm-4.6-0 drained again;
	// then a graceful stop hands every server back, up at full weight,
	// before the agent's port closes, and HAProxy keeps that.
	stopServe = startServe("2s")
	clitest.WaitFor(t, "glm-4.6-0 drained again once llmdiag is back", 150*time.Second, func() bool {
		var err error
		stats, err = closedloop.ShowStat(v.Socket)
		last = fmt.Sprint(stats)
		return err == nil && strings.HasPrefix(stats["glm-4.6-0"].Status, "DRAIN") && stats["glm-4.6-0"].AgentStatus == "L7OK"
	}, &last)
	stopped := time.Now()
	stopServe() // returns once the agent's port is closed, 2 s on
	waitAgentDown()
	t.Logf("with llmdiag stopped gracefully (%v to stop): glm-4.6-0 %+v; glm-4.6-1 %+v", time.Since(stopped).Round(time.Millisecond), stats["glm-4.6-0"], stats["glm-4.6-1"])
	for _, n := range []string{"glm-4.6-0", "glm-4.6-1"} {
		if got := stats[n]; got.Status != "UP" || got.Weight != 100 {
			t.Errorf("%s after a graceful stop: %s weight %d, want UP weight 100 (the stop answer, fail open)", n, got.Status, got.Weight)
		}
	}
}
