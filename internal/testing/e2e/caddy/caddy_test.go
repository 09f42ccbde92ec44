package caddy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// caddyProgram is Debian's caddy (bookworm: 2.6.2).
var caddyProgram = testkit.Program{Name: "caddy", Env: "LLMDIAG_CADDY", Get: "apt-get install -y caddy"}

// routerToken is the router's token in the test's tokens file.
const routerToken = "router-token-0123456789abcdef"

// cfgTemplate is the Caddyfile the test runs and docs/integrations.md
// shows (rendered with docValues). Caddy 2.6 sends an upstream's active
// health check to the upstream's own address (health_port changes only
// the port), with one health_uri for every upstream of a reverse_proxy.
// So each node has a hop of its own on loopback: the model's
// reverse_proxy balances over the hops and checks each at
// /llmdiag/routable, and a node's hop sends that path on to llmdiag as
// /routable/{node} and everything else to the node. With FailOpen, a hop
// whose request to llmdiag fails (llmdiag unreachable, no answer) answers
// the check 200: within the front's health_timeout, since the hop gives
// up on llmdiag after 1 s connecting or 2 s waiting for its answer.
var cfgTemplate = template.Must(template.New("Caddyfile").Parse(`{
	admin {{.Admin}}
	auto_https off
}

# The model's endpoint: its nodes, each through its hop below. A node is
# taken out while its check (llmdiag's answer) is not 200.
http://:{{.Port}} {
	bind {{.Bind}}
	respond /llmdiag/* 404
	reverse_proxy{{range .Nodes}} 127.0.0.1:{{.Hop}}{{end}} {
		lb_policy least_conn
		health_uri /llmdiag/routable
		health_headers {
			Authorization "Bearer {{.Token}}"
		}
		health_interval {{.Interval}}
		health_timeout 3s
		health_status 200
	}
}
{{range .Nodes}}
# {{.ID}}: its traffic, and its check asked of llmdiag.
http://:{{.Hop}} {
	bind 127.0.0.1
	handle /llmdiag/routable {
		reverse_proxy {{$.LLMDiag}} {
			rewrite /routable/{{.ID}}
			transport http {
				dial_timeout 1s
				response_header_timeout 2s
			}
		}
	}
	handle {
		reverse_proxy {{.Addr}}
	}
{{- if $.FailOpen}}
	# llmdiag unreachable: the check passes (fail-open); other errors as they are.
	handle_errors {
		respond /llmdiag/routable "llmdiag unreachable: routable (fail open)" 200
		respond "{err.status_code} {err.status_text}" {err.status_code}
	}
{{- end}}
}
{{end}}`))

type cfgValues struct {
	Admin, Bind, Token, LLMDiag, Interval string
	Port                                  int
	FailOpen                              bool
	Nodes                                 []cfgNode
}

// cfgNode is one node: its id, its OpenAI endpoint's address and its
// hop's loopback port.
type cfgNode struct {
	ID, Addr string
	Hop      int
}

// docValues render the configuration docs/integrations.md shows.
var docValues = cfgValues{
	Admin: "localhost:2019", Bind: "0.0.0.0", Port: 8000, Token: "rtr-0123456789abcdef0123456789abcdef",
	LLMDiag: "llmdiag.llmdiag:8080", Interval: "5s", FailOpen: true,
	Nodes: []cfgNode{{"glm-4.6-0", "10.0.1.10:8000", 9000}, {"glm-4.6-1", "10.0.1.11:8000", 9001}},
}

func render(t *testing.T, v cfgValues) string {
	t.Helper()
	var b strings.Builder
	if err := cfgTemplate.Execute(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCaddyConfigDocumented: docs/integrations.md holds the Caddyfile
// TestCaddyHealthChecks runs.
func TestCaddyConfigDocumented(t *testing.T) {
	clitest.DocHolds(t, "docs/integrations.md", "```caddyfile", render(t, docValues), "the Caddyfile the test runs (section Caddy)")
}

// TestCaddyConfigAdapts: Caddy reads the documented Caddyfile, with and
// without the fail-open fallback (caddy adapt: no listener, no lookup of
// the documented host names).
func TestCaddyConfigAdapts(t *testing.T) {
	bin := testkit.Binary(t, caddyProgram)
	for _, failOpen := range []bool{true, false} {
		v := docValues
		v.FailOpen = failOpen
		dir := t.TempDir()
		cfg := filepath.Join(dir, "Caddyfile")
		if err := os.WriteFile(cfg, []byte(render(t, v)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "adapt", "--config", cfg, "--adapter", "caddyfile")
		cmd.Env = caddyEnv(dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fail-open %v: caddy adapt: %v\n%s", failOpen, err, out)
		}
		if strings.Contains(string(out), `"level":"warn"`) || strings.Contains(string(out), "WARN") {
			t.Errorf("fail-open %v: caddy adapt warns:\n%s", failOpen, out)
		}
	}
}

// TestCaddyFailOpenFallback asks a node's hop directly, with nothing
// listening at llmdiag's address nor at the node's: with FailOpen the
// check path is answered 200 and the node's traffic still fails (502),
// without it the check fails too.
func TestCaddyFailOpenFallback(t *testing.T) {
	bin := testkit.Binary(t, caddyProgram)
	for _, tc := range []struct {
		failOpen  bool
		checkCode int
		checkBody string
	}{
		{failOpen: true, checkCode: http.StatusOK, checkBody: "llmdiag unreachable: routable (fail open)"},
		{failOpen: false, checkCode: http.StatusBadGateway},
	} {
		t.Run(fmt.Sprintf("fail-open=%v", tc.failOpen), func(t *testing.T) {
			hop := freePort(t)
			v := cfgValues{Admin: testkit.FreeAddr(t), Bind: "127.0.0.1", Port: freePort(t), Token: routerToken,
				LLMDiag: testkit.FreeAddr(t), Interval: "1s", FailOpen: tc.failOpen,
				Nodes: []cfgNode{{ID: "glm-4.6-0", Addr: testkit.FreeAddr(t), Hop: hop}}}
			startCaddy(t, bin, "caddy", v)
			base := "http://127.0.0.1:" + strconv.Itoa(hop)
			get := func(method, path string) (int, string) {
				req, err := http.NewRequest(method, base+path, strings.NewReader("{}"))
				if err != nil {
					return 0, err.Error()
				}
				resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			var code int
			var body, last string
			clitest.WaitFor(t, "the hop to answer", 30*time.Second, func() bool {
				code, body = get(http.MethodGet, "/llmdiag/routable")
				last = fmt.Sprintf("HTTP %d %q", code, body)
				return code != 0
			}, &last)
			if code != tc.checkCode || (tc.checkBody != "" && body != tc.checkBody) {
				t.Errorf("the check with llmdiag unreachable: HTTP %d %q, want %d %q", code, body, tc.checkCode, tc.checkBody)
			}
			if code, body := get(http.MethodPost, "/v1/completions"); code != http.StatusBadGateway {
				t.Errorf("a request to a node that does not answer: HTTP %d %q, want 502", code, body)
			}
		})
	}
}

// caddyEnv is the environment of a caddy the test runs: its home, data
// and configuration directories (where it autosaves its configuration) in
// dir.
func caddyEnv(dir string) []string {
	return append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
}

// caddyProc is a caddy the test started, and its log.
type caddyProc struct {
	name string
	v    cfgValues
	log  testkit.SyncBuffer
}

// startCaddy runs caddy with v's Caddyfile in a temp dir until the test
// ends (SIGTERM, then SIGKILL after 10s).
func startCaddy(t *testing.T, bin, name string, v cfgValues) *caddyProc {
	t.Helper()
	p := &caddyProc{name: name, v: v}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(render(t, v)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", cfg, "--adapter", "caddyfile")
	cmd.Dir, cmd.Env = dir, caddyEnv(dir)
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	proc, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.log.String())
		}
	})
	return p
}

// healthEvent is one line of Caddy's active health checker's log.
type healthEvent struct {
	at     time.Time
	msg    string // "host is up", "unexpected status code", "HTTP request failed"
	status int
}

// healthEvents reads the active health checker's lines about node's hop
// from Caddy's log (JSON lines, Caddy's default when its output is not a
// terminal).
func (p *caddyProc) healthEvents(node string) []healthEvent {
	var hop string
	for _, n := range p.v.Nodes {
		if n.ID == node {
			hop = "127.0.0.1:" + strconv.Itoa(n.Hop)
		}
	}
	var out []healthEvent
	sc := bufio.NewScanner(strings.NewReader(p.log.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			TS     float64 `json:"ts"`
			Logger string  `json:"logger"`
			Msg    string  `json:"msg"`
			Host   string  `json:"host"`
			Status int     `json:"status_code"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || !strings.Contains(l.Logger, "health_checker") || l.Host != hop {
			continue
		}
		sec, frac := math.Modf(l.TS)
		out = append(out, healthEvent{at: time.Unix(int64(sec), int64(frac*1e9)), msg: l.Msg, status: l.Status})
	}
	return out
}

// lastHealth is node's latest health event with msg (and status, when
// not 0) at or after since.
func (p *caddyProc) lastHealth(node, msg string, status int, since time.Time) (healthEvent, bool) {
	evs := p.healthEvents(node)
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.at.Before(since) {
			break
		}
		if e.msg == msg && (status == 0 || e.status == status) {
			return e, true
		}
	}
	return healthEvent{}, false
}

// firstHealth is node's first health event with msg and status.
func (p *caddyProc) firstHealth(node, msg string, status int) (healthEvent, bool) {
	for _, e := range p.healthEvents(node) {
		if e.msg == msg && e.status == status {
			return e, true
		}
	}
	return healthEvent{}, false
}

// completion is one completion request sent through Caddy: the status,
// the node that answered (from the simulator's completion id, cmpl-NODE-N)
// and the body, or the error.
type completion struct {
	code       int
	node, body string
}

func complete(url string, timeout time.Duration) completion {
	c := &http.Client{Timeout: timeout}
	resp, err := c.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"glm-4.6","prompt":"hi","max_tokens":1}`))
	if err != nil {
		return completion{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := completion{code: resp.StatusCode, body: string(b)}
	var a struct {
		ID string `json:"id"`
	}
	if resp.StatusCode == http.StatusOK && json.Unmarshal(b, &a) == nil {
		if id, ok := strings.CutPrefix(a.ID, "cmpl-"); ok {
			if i := strings.LastIndexByte(id, '-'); i > 0 {
				out.node = id[:i]
			}
		}
	}
	return out
}

// routable is a router's GET /routable/{node}: the status and the body.
func routable(base, node string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, base+"/routable/"+node, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+routerToken)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// freePort is a free loopback port (testkit.FreeAddr's, never one given
// before in this process: one Caddyfile's sites must not share a port).
func freePort(t *testing.T) int { return port(t, testkit.FreeAddr(t)) }

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCaddyHealthChecks runs two Caddys over the overloaded fleet
// (glm-4.6-0 saturated, glm-4.6-1 its healthy peer), one with the plain
// configuration and one with the fail-open fallback, their active health
// checks asking serve's GET /routable/{node} with a router's token.
// While llmdiag answers, both take glm-4.6-0 out (Caddy's health checker
// logs its 503) and send every request to glm-4.6-1. Then serve stops: the
// plain Caddy marks every node unhealthy and answers 503 itself
// (fail-closed); the fail-open one puts glm-4.6-0 back and keeps serving.
func TestCaddyHealthChecks(t *testing.T) {
	bin := testkit.Binary(t, caddyProgram)
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	f := clitest.Sim(t, "overloaded", fleetPath)

	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {name: caddy, role: router, token: "+routerToken+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := testkit.FreeAddr(t)
	stopServe, _ := clitest.Start(t, nil, "serve", "--listen", listen, "--fleet", fleetPath, "--interval", "1s",
		"--auth-tokens", tokens, "--log-level", "warn")

	caddys := map[bool]*caddyProc{}
	for _, failOpen := range []bool{false, true} {
		v := cfgValues{Admin: testkit.FreeAddr(t), Bind: "127.0.0.1", Port: freePort(t), Token: routerToken,
			LLMDiag: listen, Interval: "1s", FailOpen: failOpen}
		for _, n := range f.Nodes {
			if n.Model != "glm-4.6" {
				continue
			}
			host := strings.TrimPrefix(strings.TrimPrefix(n.URL, "http://"), "https://")
			host, _, _ = strings.Cut(host, "/")
			v.Nodes = append(v.Nodes, cfgNode{ID: n.ID, Addr: host, Hop: freePort(t)})
		}
		if len(v.Nodes) != 2 {
			t.Fatalf("the overloaded fleet's glm-4.6 nodes: %+v, want glm-4.6-0 and glm-4.6-1", v.Nodes)
		}
		caddys[failOpen] = startCaddy(t, bin, map[bool]string{false: "caddy (fail-closed)", true: "caddy (fail-open)"}[failOpen], v)
	}
	front := func(p *caddyProc) string { return "http://127.0.0.1:" + strconv.Itoa(p.v.Port) }

	// llmdiag reads glm-4.6-0 saturated (not a scrape that timed out on a
	// busy machine) and glm-4.6-1 routable.
	base := "http://" + listen
	var last string
	clitest.WaitFor(t, "llmdiag: glm-4.6-0 not routable for its load, glm-4.6-1 routable", 150*time.Second, func() bool {
		code, body := routable(base, "glm-4.6-0")
		peer, peerBody := routable(base, "glm-4.6-1")
		last = fmt.Sprintf("glm-4.6-0: HTTP %d %q; glm-4.6-1: HTTP %d %q", code, body, peer, peerBody)
		return code == http.StatusServiceUnavailable && !strings.Contains(body, "CAUSE_TARGET_DOWN") && !strings.Contains(body, "CAUSE_NO_DATA") &&
			peer == http.StatusOK && strings.HasPrefix(peerBody, "routable 0.")
	}, &last)
	saturatedAt := time.Now()
	t.Logf("llmdiag: %s", last)

	for _, failOpen := range []bool{false, true} {
		p := caddys[failOpen]
		var out healthEvent
		clitest.WaitFor(t, p.name+" to take glm-4.6-0 out on llmdiag's 503", 30*time.Second, func() bool {
			var ok bool
			out, ok = p.firstHealth("glm-4.6-0", "unexpected status code", http.StatusServiceUnavailable)
			last = fmt.Sprintf("glm-4.6-0's health events: %+v", p.healthEvents("glm-4.6-0"))
			return ok
		}, &last)
		t.Logf("%s: glm-4.6-0's first failed check (503) %v after the test saw llmdiag answer 503 for it (negative: Caddy's check saw it first)", p.name, out.at.Sub(saturatedAt).Round(time.Millisecond))
		// Requests through Caddy: every one answered by glm-4.6-1. Each
		// would reach glm-4.6-0 half the time (least_conn, ties broken at
		// random) if Caddy had kept it; its queue holds a request far
		// longer than the client's 10 s.
		var answers []string
		clitest.WaitFor(t, p.name+" to send 16 requests in a row to glm-4.6-1", 120*time.Second, func() bool {
			answers = answers[:0]
			for range 16 {
				c := complete(front(p), 10*time.Second)
				answers = append(answers, fmt.Sprintf("HTTP %d %s", c.code, c.node))
				if c.code != http.StatusOK || c.node != "glm-4.6-1" {
					last = fmt.Sprintf("%v; last body %q", answers, c.body)
					return false
				}
			}
			return true
		}, &last)
		t.Logf("%s with llmdiag up: 16 requests in a row, every one answered by glm-4.6-1, %v after the test read glm-4.6-0's 503", p.name, time.Since(saturatedAt).Round(time.Millisecond))
	}

	// llmdiag goes away: its port refuses connections.
	stopServe()
	stoppedAt := time.Now()

	// Fail-closed: the hop answers the check 502, every node is
	// unhealthy, and Caddy answers 503 without reaching a node.
	closed := caddys[false]
	var c completion
	clitest.WaitFor(t, "the fail-closed Caddy to answer 503 itself", 30*time.Second, func() bool {
		c = complete(front(closed), 10*time.Second)
		last = fmt.Sprintf("HTTP %d %s %q; glm-4.6-1's health events: %+v", c.code, c.node, c.body, closed.healthEvents("glm-4.6-1"))
		return c.code == http.StatusServiceUnavailable
	}, &last)
	t.Logf("%s: 503 %v after serve stopped", closed.name, time.Since(stoppedAt).Round(time.Millisecond))
	clitest.WaitFor(t, "the fail-closed Caddy's log to show both nodes' checks failing with the hop's 502", 30*time.Second, func() bool {
		last = ""
		for _, n := range []string{"glm-4.6-0", "glm-4.6-1"} {
			if _, ok := closed.lastHealth(n, "unexpected status code", http.StatusBadGateway, stoppedAt); !ok {
				last += fmt.Sprintf("%s: %+v; ", n, closed.healthEvents(n))
			}
		}
		return last == ""
	}, &last)
	for range 4 {
		if c := complete(front(closed), 10*time.Second); c.code != http.StatusServiceUnavailable {
			t.Errorf("%s with llmdiag down: HTTP %d from %q, want 503 (no upstreams available)", closed.name, c.code, c.node)
		}
	}

	// Fail-open: the hop's handle_errors answers the check 200, glm-4.6-0
	// comes back, and requests are served.
	open := caddys[true]
	var back healthEvent
	clitest.WaitFor(t, "the fail-open Caddy to put glm-4.6-0 back", 30*time.Second, func() bool {
		var ok bool
		back, ok = open.lastHealth("glm-4.6-0", "host is up", 0, stoppedAt)
		last = fmt.Sprintf("glm-4.6-0's health events: %+v", open.healthEvents("glm-4.6-0"))
		return ok
	}, &last)
	t.Logf("%s: glm-4.6-0 up again %v after serve stopped", open.name, back.at.Sub(stoppedAt).Round(time.Millisecond))
	if _, ok := open.lastHealth("glm-4.6-1", "unexpected status code", 0, stoppedAt); ok {
		t.Errorf("%s: glm-4.6-1 failed a check with llmdiag down: %+v", open.name, open.healthEvents("glm-4.6-1"))
	}
	// Concurrent requests: least_conn spreads them over both nodes; those
	// glm-4.6-0 queues outlast the client. None is refused by Caddy.
	var mu sync.Mutex
	var got []completion
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c := complete(front(open), 10*time.Second)
			mu.Lock()
			got = append(got, c)
			mu.Unlock()
		})
	}
	wg.Wait()
	served, outcomes := 0, map[string]int{}
	for _, c := range got {
		outcome := fmt.Sprintf("HTTP %d %s", c.code, c.node)
		if c.code == 0 {
			outcome = "no answer within 10s"
		}
		outcomes[outcome]++
		switch {
		case c.code == http.StatusOK && c.node == "glm-4.6-1":
			served++
		case c.code >= 500:
			t.Errorf("%s with llmdiag down: HTTP %d %q, want a node's answer", open.name, c.code, c.body)
		}
	}
	if served == 0 {
		t.Errorf("%s with llmdiag down: no request answered by glm-4.6-1: %+v", open.name, got)
	}
	t.Logf("%s with llmdiag down: %d concurrent requests: %v", open.name, len(got), outcomes)
}
