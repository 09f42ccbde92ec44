package chaos

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sim"
)

// Shape of the run's world.
const (
	extraNodes    = 200 // simulated beside the seed fleet
	viaPrometheus = 100 // of the extra nodes, the first are read from Prometheus only
	replicaCount  = 3
	clientCount   = 50
	interval      = 2 * time.Second
	leaseTTL      = 3 * time.Second
	redisSync     = time.Second
	promScrape    = time.Second
	// historyLen (refreshes kept per node) and window (the default
	// window, which a direct scrape keeps every sample of) are small, so
	// that every replica's state is at its bound before the baseline ends:
	// what grows after that is not state filling up.
	historyLen = 10
	window     = time.Minute
)

// replicaLag is how far behind another replica's answer may be: its copy
// is at most one sync behind Redis, plus one read of Redis, and the
// leader's own copy is ahead of Redis by the write in flight. Two syncs
// bound it with room for a loaded machine.
const replicaLag = 2*redisSync + interval

// hangProxy serves one simulated node's /metrics through a reverse proxy
// that can be made to hang: accept, read the request, never answer (until
// the caller gives up), as a wedged exporter does.
type hangProxy struct {
	id   string
	addr string
	hang atomic.Bool
	srv  *http.Server
}

func startProxy(t *testing.T, id, backend string) *hangProxy {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangProxy{id: id, addr: ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = nil
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		http.Error(w, "backend: "+err.Error(), http.StatusBadGateway)
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.hang.Load() {
			<-r.Context().Done() // the caller's deadline, or Close
			return
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// replica is one `llmdiag serve` of the built binary, restartable with
// the same flags on the same ports.
type replica struct {
	name        string
	addr        string // Connect, gRPC, /routable
	metricsAddr string // /metrics, without authentication
	args        []string
	bin         string
	log         *testkit.SyncBuffer
	mu          sync.Mutex
	proc        *childproc.Proc
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(r.bin, r.args...)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.WaitDelay = 5 * time.Second
	p, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
}

func (r *replica) current() *childproc.Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// kill ends the replica with SIGKILL, as a crash would, and waits for it.
func (r *replica) kill() {
	if p := r.current(); p != nil {
		p.Stop(syscall.SIGKILL, 10*time.Second)
	}
}

// world is everything the run starts.
type world struct {
	t          *testing.T
	bin        string
	seed       *sim.Fleet
	extra      *sim.Fleet
	proxies    []*hangProxy // by extra node index
	prom       *promtest.Prometheus
	redis      *redistest.Server
	replicas   []*replica
	tokensPath string
	tokens     []string // by client
	adminToken string
	spareToken string
	nodes      []string // every node id the replicas serve
	// viaPrometheus are the nodes read from Prometheus only.
	viaPrometheus map[string]bool
	tokensMu      sync.Mutex
	extraTok      []tokenEntry // tokens beyond the clients', rewritten by rotation
}

type tokenEntry struct{ name, role, token string }

func randomToken(prefix string) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// writeTokens writes the tokens file whole (a rename, so a reader never
// sees half of it).
func (w *world) writeTokens() {
	w.tokensMu.Lock()
	defer w.tokensMu.Unlock()
	var b strings.Builder
	b.WriteString("tokens:\n")
	for i, tok := range w.tokens {
		fmt.Fprintf(&b, "  - name: client-%02d\n    role: router\n    token: %q\n", i, tok)
	}
	for _, e := range w.extraTok {
		fmt.Fprintf(&b, "  - name: %s\n    role: %s\n    token: %q\n", e.name, e.role, e.token)
	}
	tmp := w.tokensPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.tokensPath); err != nil {
		w.t.Fatal(err)
	}
}

// newWorld starts the fleet, Prometheus, Redis and the replicas, and
// returns once every replica serves a verdict on every node.
func newWorld(t *testing.T) *world {
	w := &world{t: t, viaPrometheus: map[string]bool{}}
	// Programs first: a missing one fails before anything is built.
	w.redis = redistest.Start(t)
	w.bin = testkit.BuildLLMDiag(t, raceEnabled)
	dir := t.TempDir()

	var seedFile string
	w.seed, seedFile = simtest.Seed(t)
	sf, err := fleet.Load(seedFile)
	if err != nil {
		t.Fatal(err)
	}

	// The 200: the seed's engines and models, idle unless asked (no
	// arrivals of their own), so that 200 of them cost the machine little.
	base := simtest.Scenario(t, "seed", 2)
	var nodes []sim.Node
	for i := range extraNodes {
		n := base.Nodes[i%len(base.Nodes)]
		n.ID = fmt.Sprintf("n-%03d", i)
		nodes = append(nodes, n)
	}
	cfg := sim.ExternalOnly(sim.Config{Name: "chaos", Seed: 2, Nodes: nodes})
	var extraFile string
	w.extra, extraFile = simtest.Start(t, cfg)
	ef, err := fleet.Load(extraFile)
	if err != nil {
		t.Fatal(err)
	}

	// Prometheus scrapes the seed fleet and the first 100 of the 200
	// (through their proxies), labelled with their node id.
	var targets []string
	labels := map[string]map[string]string{}
	for _, n := range sf.Nodes {
		u, _ := url.Parse(n.URL)
		targets = append(targets, u.Host)
		labels[u.Host] = map[string]string{"node": n.ID}
	}
	out := &fleet.File{}
	out.Nodes = append(out.Nodes, sf.Nodes...)
	for i, n := range ef.Nodes {
		p := startProxy(t, n.ID, strings.TrimSuffix(n.URL, "/metrics"))
		w.proxies = append(w.proxies, p)
		if i < viaPrometheus {
			w.viaPrometheus[n.ID] = true
			targets = append(targets, p.addr)
			labels[p.addr] = map[string]string{"node": n.ID}
			continue
		}
		n.URL = "http://" + p.addr + "/metrics"
		n.DCGM = ""
		out.Nodes = append(out.Nodes, n)
	}
	for _, n := range sf.Nodes {
		w.nodes = append(w.nodes, n.ID)
	}
	for _, n := range ef.Nodes {
		w.nodes = append(w.nodes, n.ID)
	}
	w.prom = promtest.Start(t, promtest.Options{Targets: targets, TargetLabels: labels, ScrapeInterval: promScrape})

	fleetPath := filepath.Join(dir, "fleet.yaml")
	data, err := out.Marshal()
	if err == nil {
		err = os.WriteFile(fleetPath, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}

	w.tokensPath = filepath.Join(dir, "tokens.yaml")
	for range clientCount {
		w.tokens = append(w.tokens, randomToken("client"))
	}
	w.adminToken = randomToken("admin")
	w.spareToken = randomToken("spare")
	w.extraTok = []tokenEntry{{"oncall", "admin", w.adminToken}, {"spare", "reader", w.spareToken}}
	w.writeTokens()

	for i := range replicaCount {
		r := &replica{name: fmt.Sprintf("r%d", i), addr: testkit.FreeAddr(t), metricsAddr: testkit.FreeAddr(t), bin: w.bin, log: &testkit.SyncBuffer{}}
		r.args = []string{"serve",
			"--fleet", fleetPath, "--prometheus", w.prom.URL(), "--node-label", "node",
			"--redis", w.redis.URL(), "--redis-prefix", "chaos:", "--replica-id", r.name,
			"--lease-ttl", leaseTTL.String(), "--redis-sync", redisSync.String(),
			"--listen", r.addr, "--metrics-listen", r.metricsAddr,
			"--interval", interval.String(), "--scrape-timeout", "1s",
			// State full by the end of the baseline, so that the resources
			// compared at the end are not the history still filling up.
			"--history", strconv.Itoa(historyLen), "--window", window.String(),
			"--auth-tokens", w.tokensPath,
			"--log-level", "warn",
		}
		r.start(t)
		w.replicas = append(w.replicas, r)
		t.Cleanup(func() {
			if p := r.current(); p != nil {
				p.Stop(syscall.SIGTERM, 15*time.Second)
			}
			if t.Failed() {
				t.Logf("%s output:\n%s", r.name, r.log)
			}
		})
	}
	for _, r := range w.replicas {
		w.waitServing(r, 3*time.Minute)
	}
	return w
}

// waitServing waits until r answers health SERVING and lists every node.
func (w *world) waitServing(r *replica, within time.Duration) time.Duration {
	w.t.Helper()
	var last string
	return testkit.Wait{For: within, Every: 100 * time.Millisecond, Last: func() string { return last }}.Until(w.t, r.name+" serving every node", func() bool {
		if h := health(r.addr); h != "SERVING" {
			last = "health " + h
			return false
		}
		n, err := w.countNodes(r)
		last = fmt.Sprintf("%d nodes listed (%v), want %d", n, err, len(w.nodes))
		return err == nil && n == len(w.nodes)
	})
}

// countNodes lists the nodes r serves, with the admin token.
func (w *world) countNodes(r *replica) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/llmdiag.v1.DiagnosisService/ListNodes", strings.NewReader(`{"readMask":"id"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.adminToken)
	resp, err := probeHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct{ Nodes []struct{ ID string } }
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	return len(out.Nodes), nil
}

// probeHTTP is the run's own HTTP client for health, /metrics and
// readiness checks, from an address of its own (not the flood's).
var probeHTTP = &http.Client{Timeout: 5 * time.Second, Transport: transportFrom("127.0.1.1")}

// transportFrom is an HTTP/1.1 transport that dials from the loopback
// address ip.
func transportFrom(ip string) *http.Transport {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second}
}

// health is addr's health status ("SERVING"), or why there is none.
func health(addr string) string {
	st, err := testkit.HealthStatus(context.Background(), probeHTTP, "http://"+addr, "")
	if err != nil {
		return err.Error()
	}
	return st
}

// scrapeMetrics reads the named series (no labels) from r's /metrics.
func scrapeMetrics(r *replica, names ...string) (map[string]float64, error) {
	resp, err := probeHTTP.Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	if len(out) != len(names) {
		return out, fmt.Errorf("%s: got %d of %v", r.name, len(out), names)
	}
	return out, sc.Err()
}

// leader is the replica holding the ingest lease, nil if none or several.
func (w *world) leader() *replica {
	var found []*replica
	for _, r := range w.replicas {
		m, err := scrapeMetrics(r, "llmdiag_lease_is_leader")
		if err == nil && m["llmdiag_lease_is_leader"] == 1 {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

// usage reads r's goroutines, heap goal and resident memory.
func usage(r *replica) (Usage, error) {
	m, err := scrapeMetrics(r, "go_goroutines", "go_memstats_next_gc_bytes", "process_resident_memory_bytes")
	if err != nil {
		return Usage{}, err
	}
	return Usage{Goroutines: m["go_goroutines"], HeapGoalBytes: m["go_memstats_next_gc_bytes"], RSSBytes: m["process_resident_memory_bytes"]}, nil
}

// bearerList is a one-node ListNodes with token: its HTTP status, 0 when
// the call did not reach the replica.
func bearerList(addr, token string) int {
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/llmdiag.v1.DiagnosisService/ListNodes", bytes.NewReader([]byte(`{"readMask":"id","pageSize":1}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := probeHTTP.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
