package haproxy_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
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

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/server"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// haproxyProgram is Debian's haproxy.
var haproxyProgram = testkit.Program{Name: "haproxy", Env: "LLMDIAG_HAPROXY", Get: "apt-get install -y haproxy"}

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
	b, err := os.ReadFile(clitest.RepoPath(t, "docs", "integrations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := render(t, docValues); !strings.Contains(string(b), "```\n"+want+"```\n") {
		t.Errorf("docs/integrations.md does not hold the haproxy.cfg the test runs; the HAProxy section should show:\n%s", want)
	}
}

// serverStat is one server's row of HAProxy's show stat.
type serverStat struct {
	status, agentStatus, lastAgent string
	weight                         int
}

// showStat asks HAProxy's runtime API for show stat: the servers by name.
func showStat(sock string) (map[string]serverStat, string, error) {
	b, err := runtimeCommand(sock, "show stat")
	if err != nil {
		return nil, "", err
	}
	text := strings.TrimPrefix(string(b), "# ")
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, string(b), err
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	get := func(row []string, name string) string {
		if i, ok := col[name]; ok && i < len(row) {
			return row[i]
		}
		return ""
	}
	out := map[string]serverStat{}
	for _, row := range rows[1:] {
		if sv := get(row, "svname"); sv != "" && sv != "FRONTEND" && sv != "BACKEND" {
			w, _ := strconv.Atoi(get(row, "weight"))
			out[sv] = serverStat{status: get(row, "status"), agentStatus: get(row, "agent_status"), lastAgent: get(row, "last_agt"), weight: w}
		}
	}
	return out, string(b), nil
}

// runtimeCommand sends one command to HAProxy's runtime API and returns
// its answer.
func runtimeCommand(sock, cmd string) ([]byte, error) {
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return nil, err
	}
	return io.ReadAll(c)
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
	bin := testkit.Binary(t, haproxyProgram)
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	f := clitest.Sim(t, "overloaded", fleetPath)

	listen, agentAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, portText, _ := net.SplitHostPort(agentAddr)
	port, _ := strconv.Atoi(portText)
	var out, errw testkit.SyncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--listen", listen, "--fleet", fleetPath, "--interval", "1s",
			"--haproxy-agent-listen", agentAddr, "--log-level", "warn"}, clitest.Env(nil, &out, &errw))
	}()
	stopServe := func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, errw.String())
			}
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop within 15s of cancellation")
		}
	}
	defer func() {
		if ctx.Err() == nil {
			stopServe()
		}
	}()

	v := cfgValues{Socket: filepath.Join(dir, "haproxy.sock"), Bind: testkit.FreeAddr(t), AgentAddr: "127.0.0.1", AgentPort: port}
	models := map[string]int{}
	for _, n := range f.Nodes {
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
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(render(t, v)), 0o644); err != nil {
		t.Fatal(err)
	}
	var hout testkit.SyncBuffer
	cmd := exec.Command(bin, "-f", cfg, "-db")
	cmd.Stdout, cmd.Stderr = &hout, &hout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("haproxy's output:\n%s", hout.String())
		}
	})

	var last string
	var stats map[string]serverStat
	var weight int
	clitest.WaitFor(t, "glm-4.6-0 drained and glm-4.6-1 up with its load score's weight", 150*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("haproxy exited:\n%s", hout.String())
		default:
		}
		var err error
		stats, last, err = showStat(v.Socket)
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
		return strings.HasPrefix(sat.status, "DRAIN") && healthy.status == "UP" &&
			healthy.weight == weight && weight == server.HAProxyWeight(score, 1)
	}, &last)
	t.Logf("with llmdiag up: glm-4.6-0 %+v; glm-4.6-1 %+v (agent weight %d%%)", stats["glm-4.6-0"], stats["glm-4.6-1"], weight)
	if d := stats["glm-4.6-1"].lastAgent; !strings.HasPrefix(d, "via agent : up (CAUSE_") {
		t.Errorf("glm-4.6-1's last agent reply %q, want up with its cause", d)
	}
	up := stats

	// llmdiag goes away: the agent's connections are refused.
	stopServe()
	clitest.WaitFor(t, "HAProxy to see the agent fail for every server", 30*time.Second, func() bool {
		var err error
		stats, last, err = showStat(v.Socket)
		if err != nil {
			last = err.Error()
			return false
		}
		for _, s := range stats {
			if s.agentStatus != "L4CON" {
				return false
			}
		}
		return len(stats) == len(f.Nodes)
	}, &last)
	t.Logf("with llmdiag down: glm-4.6-0 %+v; glm-4.6-1 %+v", stats["glm-4.6-0"], stats["glm-4.6-1"])
	// HAProxy keeps the state and weight the agent last gave: a failure
	// to reach the agent changes nothing (its documentation: connectivity
	// is the regular check's business). The drained node stays drained
	// until the agent answers again or an operator says otherwise.
	for _, n := range []string{"glm-4.6-0", "glm-4.6-1"} {
		if got, was := stats[n], up[n]; got.status != was.status || got.weight != was.weight {
			t.Errorf("%s with the agent unreachable: %s weight %d, want what it was, %s weight %d", n, got.status, got.weight, was.status, was.weight)
		}
	}
	// The operator's way back: set the server ready through the runtime API.
	if _, err := runtimeCommand(v.Socket, "set server glm-4.6/glm-4.6-0 state ready"); err != nil {
		t.Fatal(err)
	}
	clitest.WaitFor(t, "glm-4.6-0 up once set ready", 10*time.Second, func() bool {
		var err error
		stats, last, err = showStat(v.Socket)
		return err == nil && strings.HasPrefix(stats["glm-4.6-0"].status, "UP")
	}, &last)
}
