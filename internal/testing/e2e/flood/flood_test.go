package flood_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/refusal"
	"github.com/llmdiag/llmdiag/internal/testing/certtest"
	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/server"
)

func TestMain(m *testing.M) { clitest.Main(m) }

const (
	// legitClients call from 127.0.0.2 on, one address each.
	legitClients = 50
	// The run alternates rounds quiet windows and flood windows of
	// window each, so that what else the machine does weighs on both
	// alike: rounds×window of flood in all (30 s). A window outlasts
	// --handshake-timeout, which then closes the flooder's connections.
	rounds = 3
	window = 10 * time.Second
	// floodOpens is the flooder's connections in all its windows, opened
	// evenly; it holds at most floodHold at once.
	floodOpens = 3000
	floodHold  = 1000
	// callTimeout is generous: only a refusal is a failure, not a slow
	// answer on a busy machine.
	callTimeout = 10 * time.Second
	rpcEvery    = time.Second
	healthEvery = 2 * time.Second
	// Every reconnectEvery-th call of a client opens a new connection.
	reconnectEvery = 10
)

// Phases of the run; calls are recorded under the phase they began in.
const (
	warmUp = iota
	quiet
	flood
	over
	phases
)

var phaseNames = [phases]string{"warm-up", "quiet", "flood", "over"}

// token is legitimate client i's bearer token.
func token(i int) string { return fmt.Sprintf("flood-client-%02d-0123456789abcdef", i) }

// service is serve, running as a child process.
type service struct {
	addr, healthAddr, metricsAddr string
	tls                           *tls.Config
	log                           *childproc.LogTail
}

// startServe runs `llmdiag serve` on TLS with a tokens file and the seed
// fleet, default limits, until the test ends, and waits for it to answer
// health checks SERVING.
func startServe(tb testing.TB) service {
	tb.Helper()
	dir := tb.TempDir()
	_, fleetPath := simtest.Seed(tb)
	ca := certtest.NewCA(tb, "flood")
	certFile, keyFile := ca.Server(tb).WriteFiles(tb, dir, "server")
	var tokens strings.Builder
	tokens.WriteString("tokens:\n")
	for i := range legitClients {
		fmt.Fprintf(&tokens, "  - {name: client-%02d, role: reader, token: %s}\n", i, token(i))
	}
	tokensFile := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokensFile, []byte(tokens.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	s := service{addr: testkit.FreeAddr(tb), healthAddr: testkit.FreeAddr(tb), metricsAddr: testkit.FreeAddr(tb),
		tls: &tls.Config{RootCAs: ca.Pool()}, log: &childproc.LogTail{}}
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--listen", s.addr, "--fleet", fleetPath,
		"--tls-cert", certFile, "--tls-key", keyFile, "--auth-tokens", tokensFile,
		"--health-listen", s.healthAddr, "--metrics-listen", s.metricsAddr, "--interval", "1s", "--log-level", "warn")
	cmd.Env = append(os.Environ(), clitest.AsLLMDiag+"=1")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.WaitDelay = 5 * time.Second
	proc, err := childproc.Start(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		proc.Stop(syscall.SIGTERM, 15*time.Second)
		if tb.Failed() {
			tb.Logf("llmdiag serve (pid %d):\n%s", proc.Pid(), s.log.String())
		}
	})
	hc := s.healthClient(net.IPv4(127, 0, 0, 2))
	ready := childproc.Ready{Name: "llmdiag serve", Addr: s.addr, Timeout: time.Minute, Check: func(ctx context.Context) error {
		return s.check(ctx, hc, "https://"+s.addr)
	}}
	if err := ready.Wait(proc); err != nil {
		tb.Fatalf("%v\n%s", err, s.log.String())
	}
	return s
}

// dialer dials from ip.
func dialer(ip net.IP) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: callTimeout}
}

// healthClient checks health from ip as a load balancer's probe does: a
// new connection (TLS on the port, HTTP/1.1) for every check.
func (s service) healthClient(ip net.IP) *http.Client {
	return &http.Client{Timeout: callTimeout, Transport: &http.Transport{
		DialContext: dialer(ip).DialContext, TLSClientConfig: s.tls.Clone(), DisableKeepAlives: true,
	}}
}

// check is a Connect health check at base: nil when SERVING.
func (s service) check(ctx context.Context, hc *http.Client, base string) error {
	st, err := testkit.HealthStatus(ctx, hc, base, "")
	if err == nil && st != "SERVING" {
		err = fmt.Errorf("health: %s", st)
	}
	return err
}

// refused is llmdiag_refused_total by reason, from --metrics-listen.
func (s service) refused(tb testing.TB) map[refusal.Reason]float64 {
	tb.Helper()
	resp, err := http.Get("http://" + s.metricsAddr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[refusal.Reason]float64{}
	for _, m := range mfs[refusal.MetricName].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				out[refusal.Reason(l.GetValue())] = m.GetCounter().GetValue()
			}
		}
	}
	if len(out) != len(refusal.Reasons) {
		tb.Fatalf("%s: %v, want every reason", refusal.MetricName, out)
	}
	return out
}

// bearer adds a token to every request.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// recorder holds the legitimate calls' latencies and failures by phase.
type recorder struct {
	phase atomic.Int32
	mu    sync.Mutex
	rpc   [phases][]time.Duration
	check [phases][]time.Duration // health checks on the port
	side  [phases]int             // health checks on --health-listen
	fails [phases]int
	first []string // the first failures, for the log
	// warmed is the clients that have had an RPC and a health check
	// answered.
	warmed atomic.Int32
}

type kind int

const (
	rpcCall kind = iota
	portCheck
	sideCheck
)

// record files a call begun in phase ph.
func (r *recorder) record(ph int32, k kind, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if ph == warmUp {
			return // the fleet's first refresh may be on its way
		}
		r.fails[ph]++
		if len(r.first) < 10 {
			r.first = append(r.first, fmt.Sprintf("%s, %s: %v", phaseNames[ph], []string{"rpc", "health", "health port"}[k], err))
		}
		return
	}
	switch k {
	case rpcCall:
		r.rpc[ph] = append(r.rpc[ph], d)
	case portCheck:
		r.check[ph] = append(r.check[ph], d)
	case sideCheck:
		r.side[ph]++
	}
}

// legit is client i until stop: an RPC every rpcEvery on a connection
// of its own (alternately ListNodes and GetNodeMetrics of node, Connect
// or gRPC, a new connection every reconnectEvery calls), and a health
// check every healthEvery on a new connection.
func (s service) legit(i int, node string, rec *recorder, stop <-chan struct{}) {
	ip := net.IPv4(127, 0, 0, byte(i+2))
	tr := &http.Transport{DialContext: dialer(ip).DialContext, TLSClientConfig: s.tls.Clone(), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	var opts []connect.ClientOption
	if i%2 == 1 {
		opts = append(opts, connect.WithGRPC())
	}
	cl := llmdiagv1connect.NewDiagnosisServiceClient(&http.Client{Transport: bearer{token(i), tr}}, "https://"+s.addr, opts...)
	hc := s.healthClient(ip)
	var wg sync.WaitGroup
	wg.Add(1)
	var okRPC, okCheck atomic.Bool
	warm := func() {
		if okRPC.Load() && okCheck.Load() {
			rec.warmed.Add(1)
		}
	}
	go func() {
		defer wg.Done()
		tick := time.NewTicker(healthEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ph := rec.phase.Load()
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			t0 := time.Now()
			err := s.check(ctx, hc, "https://"+s.addr)
			rec.record(ph, portCheck, time.Since(t0), err)
			cancel()
			if err == nil && !okCheck.Swap(true) {
				warm()
			}
		}
	}()
	tick := time.NewTicker(rpcEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			wg.Wait()
			return
		case <-tick.C:
		}
		if n%reconnectEvery == reconnectEvery-1 {
			tr.CloseIdleConnections()
		}
		ph := rec.phase.Load()
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		t0 := time.Now()
		var err error
		if n%2 == 0 {
			_, err = cl.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
		} else {
			_, err = cl.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: node}))
		}
		rec.record(ph, rpcCall, time.Since(t0), err)
		cancel()
		if err == nil && n%2 == 1 && !okRPC.Swap(true) {
			warm()
		}
	}
}

// flooder opens connections from 127.0.0.1 and holds each idle, never
// sending a byte, until the server closes it.
type flooder struct {
	opens, dialErrs           int
	held, maxHeld             atomic.Int64
	byServer, byServerAfterTO atomic.Int64 // closed by the server; of those, after the handshake timeout

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
}

// run floods addr for at most d or n more connections, at most
// floodHold held at once, then closes what it holds.
func (f *flooder) run(addr string, d time.Duration, n int) {
	f.mu.Lock()
	f.conns, f.closing = map[net.Conn]struct{}{}, false
	f.mu.Unlock()
	var wg sync.WaitGroup
	tick := time.NewTicker(d / time.Duration(n))
	defer tick.Stop()
	start, from := time.Now(), f.opens
	for f.opens-from < n && time.Since(start) < d {
		<-tick.C
		// As many as are due by now: a late tick does not slow the flood.
		due := from + min(n, int(time.Since(start)*time.Duration(n)/d))
		for ; f.opens < due && f.held.Load() < floodHold; f.opens++ {
			wg.Add(1)
			go func() { defer wg.Done(); f.hold(addr) }()
		}
	}
	f.mu.Lock()
	f.closing = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	wg.Wait()
}

func (f *flooder) hold(addr string) {
	c, err := dialer(net.IPv4(127, 0, 0, 1)).Dial("tcp", addr)
	if err != nil {
		f.mu.Lock()
		f.dialErrs++
		f.mu.Unlock()
		return
	}
	f.mu.Lock()
	if f.closing {
		f.mu.Unlock()
		c.Close()
		return
	}
	f.conns[c] = struct{}{}
	f.mu.Unlock()
	for n, m := f.held.Add(1), f.maxHeld.Load(); n > m && !f.maxHeld.CompareAndSwap(m, n); m = f.maxHeld.Load() {
	}
	t0 := time.Now()
	_, err = io.Copy(io.Discard, c)
	lived := time.Since(t0)
	f.held.Add(-1)
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
	if !errors.Is(err, net.ErrClosed) {
		f.byServer.Add(1)
		if lived >= server.DefaultHandshakeTimeout {
			f.byServerAfterTO.Add(1)
		}
	}
}

// p99 is the nearest-rank 99th percentile of ds.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// result is what runFlood measured.
type result struct {
	quietP99, floodP99 time.Duration
}

// runFlood serves, calls through a quiet phase and a flood, and holds the
// run to its promises: no legitimate call or health check fails, the
// flooder is held to the pending cap and closed at the deadline.
func runFlood(tb testing.TB) result {
	s := startServe(tb)
	// The nodes, once the first refresh has measured them.
	hc := &http.Client{Transport: bearer{token(0), &http.Transport{TLSClientConfig: s.tls.Clone(), ForceAttemptHTTP2: true}}}
	probe := llmdiagv1connect.NewDiagnosisServiceClient(hc, "https://"+s.addr)
	var nodes []string
	var last string
	testkit.Wait{For: time.Minute, Last: func() string { return last }}.Until(tb, "the seed fleet's metrics", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		resp, err := probe.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
		if err != nil {
			last = err.Error()
			return false
		}
		nodes = nodes[:0]
		for _, n := range resp.Msg.GetNodes() {
			if _, err := probe.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: n.GetId()})); err != nil {
				last = n.GetId() + ": " + err.Error()
				return false
			}
			nodes = append(nodes, n.GetId())
		}
		return len(nodes) > 0
	})

	var rec recorder
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range legitClients {
		wg.Go(func() { s.legit(i, nodes[i%len(nodes)], &rec, stop) })
	}
	// The health port, checked from outside the flood too.
	side := &http.Client{Timeout: callTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	wg.Go(func() {
		tick := time.NewTicker(healthEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ph := rec.phase.Load()
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			rec.record(ph, sideCheck, 0, s.check(ctx, side, "http://"+s.healthAddr))
			cancel()
		}
	})
	stopAll := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopAll()
	testkit.Wait{For: time.Minute}.Until(tb, "every client answered once", func() bool { return rec.warmed.Load() == legitClients })
	if got := s.refused(tb); sum(got) != 0 {
		tb.Fatalf("refused before the flood: %v", got)
	}

	var (
		f          flooder
		afterQuiet map[refusal.Reason]float64
		floodTook  time.Duration
		// most is how many connections the flood's windows can have
		// closed at the deadline (see below).
		most float64
	)
	for round := range rounds {
		rec.phase.Store(quiet)
		// The window lasts window: a span of load, not a wait for a
		// condition.
		<-time.After(window)
		if round == 0 {
			afterQuiet = s.refused(tb)
		}
		rec.phase.Store(flood)
		t0 := time.Now()
		f.run(s.addr, window, floodOpens/rounds)
		d := time.Since(t0)
		floodTook += d
		// At most the cap pending at once, each for the deadline at
		// least unless the flooder closed it at the window's end (a
		// handshake cut short, which net/http's error log counts too).
		most += float64(server.DefaultMaxPendingPerHost * (int(d/server.DefaultHandshakeTimeout) + 1))
	}
	rec.phase.Store(over)
	stopAll()
	afterFlood := s.refused(tb)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := result{quietP99: p99(rec.rpc[quiet]), floodP99: p99(rec.rpc[flood])}
	tb.Logf("quiet %v: %d RPCs p99 %v, %d health checks p99 %v, %d on the health port",
		rounds*window, len(rec.rpc[quiet]), r.quietP99, len(rec.check[quiet]), p99(rec.check[quiet]), rec.side[quiet])
	tb.Logf("flood %v: %d RPCs p99 %v, %d health checks p99 %v, %d on the health port",
		floodTook.Round(time.Millisecond), len(rec.rpc[flood]), r.floodP99, len(rec.check[flood]), p99(rec.check[flood]), rec.side[flood])
	tb.Logf("p99 ratio flood/quiet %.2f (health checks %.2f)", ratio(r.floodP99, r.quietP99), ratio(p99(rec.check[flood]), p99(rec.check[quiet])))
	tb.Logf("flooder: %d opened (%d dial errors), at most %d open at once as it saw them; %d closed by the server, %d of them after %v; refused: %v",
		f.opens, f.dialErrs, f.maxHeld.Load(), f.byServer.Load(), f.byServerAfterTO.Load(), server.DefaultHandshakeTimeout, afterFlood)

	// What happens, strictly.
	for _, ph := range []int{quiet, flood} {
		if rec.fails[ph] != 0 {
			tb.Errorf("%s: %d legitimate calls or health checks failed: %s", phaseNames[ph], rec.fails[ph], strings.Join(rec.first, "; "))
		}
		if len(rec.rpc[ph]) == 0 || len(rec.check[ph]) == 0 || rec.side[ph] == 0 {
			tb.Errorf("%s: %d RPCs, %d health checks, %d on the health port answered; want some of each", phaseNames[ph], len(rec.rpc[ph]), len(rec.check[ph]), rec.side[ph])
		}
	}
	if sum(afterQuiet) != 0 {
		tb.Errorf("refused in the first quiet window: %v", afterQuiet)
	}
	conns, handshakes := afterFlood[refusal.Connections], afterFlood[refusal.Handshake]
	if sum(afterFlood) != conns+handshakes {
		tb.Errorf("refused for other reasons than the flood's: %v", afterFlood)
	}
	// The flooder met the cap (connections refused at accept) and the
	// deadline (connections closed for sending nothing).
	if conns == 0 || handshakes == 0 || f.byServerAfterTO.Load() == 0 {
		tb.Errorf("refused %v, %d closed by the server after %v: want the flooder refused at accept and closed at the deadline", afterFlood, f.byServerAfterTO.Load(), server.DefaultHandshakeTimeout)
	}
	if opened := float64(f.opens - f.dialErrs); conns+handshakes > opened {
		tb.Errorf("%g refused of %g connections opened: counted more than once", conns+handshakes, opened)
	}
	if handshakes > most {
		tb.Errorf("%g connections closed at the deadline in %v of flood: more than %d pending at once (at most %g)", handshakes, floodTook, server.DefaultMaxPendingPerHost, most)
	}
	logs := s.log.String()
	for _, want := range []string{"limit=--max-pending-conns-per-ip", "limit=--handshake-timeout"} {
		if !strings.Contains(logs, want) {
			tb.Errorf("serve's log names no %s", want)
		}
	}
	return r
}

func sum(m map[refusal.Reason]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// TestFloodFromOneAddress: on the default limits, one address opening
// 3,000 idle connections in 30 s fails no legitimate call or health
// check, and is held to the pending cap and deadline.
func TestFloodFromOneAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a minute of flood against serve")
	}
	runFlood(t)
}

// BenchmarkFloodP99Ratio reports the legitimate calls' p99 during the
// flood over their p99 before it, in the same run:
//
//	go test -run '^$' -bench FloodP99Ratio -benchtime 1x ./internal/testing/e2e/flood/
func BenchmarkFloodP99Ratio(b *testing.B) {
	if testing.Short() {
		b.Skip("-short: a minute of flood against serve")
	}
	var r result
	for range b.N {
		r = runFlood(b)
	}
	b.ReportMetric(ratio(r.floodP99, r.quietP99), "ratio")
	b.ReportMetric(float64(r.quietP99)/1e6, "quiet-p99-ms")
	b.ReportMetric(float64(r.floodP99)/1e6, "flood-p99-ms")
}
