package replicas_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/childproc"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestServeIsolatesBrokenTargets checks fault isolation,
// through the real binary: the seed simulator's five nodes beside 60
// targets that accept a connection and never answer, 10 that answer HTTP
// 500 and 10 that refuse connections. Health is SERVING by the second
// refresh; the simulated nodes keep fresh verdicts at every refresh
// (staleness below two intervals, over several refreshes); every broken
// target reads DOWN or UNKNOWN with its own error.
//
// The interval is 4 s and the scrape timeout 2 s: a refresh waits at most
// one scrape timeout, so the simulated nodes' data is at most ~6 s old when
// the next refresh stores it, 2 s under the 8 s bound — room for a loaded
// machine, while a refresh that waited for its slowest target (up to its
// 10 s deadline) or blanked the fleet would break the bound.
func TestServeIsolatesBrokenTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds llmdiag and runs it beside 80 broken targets, about 30 s")
	}
	const (
		interval      = 4 * time.Second
		scrapeTimeout = 2 * time.Second
	)
	bin := testkit.BuildLLMDiag(t, raceEnabled)
	dir := t.TempDir()

	simFleet := filepath.Join(dir, "sim.yaml")
	startBinary(t, "sim", bin, "sim", "--scenario", "seed", "--fleet-out", simFleet, "--log-level", "warn")
	testkit.Eventually(t, 60*time.Second, "the simulator's fleet file", func() bool { _, err := os.Stat(simFleet); return err == nil })
	f, err := fleet.Load(simFleet)
	if err != nil {
		t.Fatal(err)
	}
	var simIDs []string
	for _, n := range f.Nodes {
		simIDs = append(simIDs, n.ID)
	}
	if len(simIDs) != 5 {
		t.Fatalf("the seed simulates %d nodes, want 5", len(simIDs))
	}

	// The broken targets, each with what its own error must name.
	type broken struct{ id, hostPort, names string }
	var targets []broken
	add := func(kind string, i int, hostPort, names string) {
		id := fmt.Sprintf("%s-%02d", kind, i)
		targets = append(targets, broken{id, hostPort, names})
		f.Nodes = append(f.Nodes, fleet.Node{ID: id, URL: "http://" + hostPort + "/metrics", Model: "broken", Engine: "vllm"})
	}
	for i := range 60 {
		add("hang", i, silentListener(t), "no answer")
	}
	for i := range 10 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "engine crashed", http.StatusInternalServerError)
		}))
		t.Cleanup(srv.Close)
		add("http500", i, strings.TrimPrefix(srv.URL, "http://"), "HTTP 500")
	}
	for i := range 10 {
		add("refused", i, testkit.ClosedAddr(t), "connection refused")
	}
	// Written whole before serve starts, which reads it once.
	fleetPath := filepath.Join(dir, "fleet.yaml")
	data, err := f.Marshal()
	if err == nil {
		err = os.WriteFile(fleetPath, data, 0o644)
	}
	if err != nil {
		t.Fatalf("fleet file: %v", err)
	}

	addr := testkit.FreeAddr(t)
	// The checks below diagnose five nodes every testkit.Poll (250 calls
	// a second from one host): past the default rate limit, so none.
	serveLog := startBinary(t, "serve", bin, "serve", "--fleet", fleetPath, "--listen", addr,
		"--interval", interval.String(), "--scrape-timeout", scrapeTimeout.String(), "--log-level", "warn", "--rate-limit", "0")
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	rpcCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 5*time.Second)
	}

	// SERVING by the second refresh: the count is read before the health,
	// so a NOT_SERVING after two counted refreshes is a failure.
	testkit.Eventually(t, 90*time.Second, "health SERVING", func() bool {
		n := refreshes(addr)
		h := health(addr, "")
		if h != "SERVING" && n >= 2 {
			t.Fatalf("health %s after %d refreshes\n%s", h, n, serveLog)
		}
		return h == "SERVING"
	})

	// verdicts returns each simulated node's verdict, or why it has none.
	verdicts := func() (map[string]*llmdiagv1.Diagnosis, error) {
		out := make(map[string]*llmdiagv1.Diagnosis, len(simIDs))
		for _, id := range simIDs {
			ctx, cancel := rpcCtx()
			resp, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: id}))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
			out[id] = resp.Msg.GetDiagnosis()
		}
		return out, nil
	}
	fresh := func(d *llmdiagv1.Diagnosis) error {
		switch s := d.GetStatus(); {
		case s == llmdiagv1.Status_STATUS_UNKNOWN, s == llmdiagv1.Status_STATUS_DOWN, s == llmdiagv1.Status_STATUS_UNSPECIFIED:
			return fmt.Errorf("%s: %v (%v): %s", d.GetNode(), s, d.GetRootCause(), strings.Join(d.GetEvidence(), "; "))
		case d.GetStaleness().AsDuration() >= 2*interval:
			return fmt.Errorf("%s: staleness %v, want below two intervals (%v)", d.GetNode(), d.GetStaleness().AsDuration(), 2*interval)
		}
		return nil
	}
	// The simulator may still be warming up when the first scrapes come:
	// wait until every simulated node has a verdict once.
	var last error
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("last answer: %v", last)
		}
	})
	testkit.Eventually(t, 60*time.Second, "a verdict on every simulated node", func() bool {
		vs, err := verdicts()
		if err != nil {
			last = err
			return false
		}
		for _, d := range vs {
			if last = fresh(d); last != nil {
				return false
			}
		}
		return true
	})

	// From then on, at every moment of four refreshes, every simulated
	// node has a fresh verdict.
	start := refreshes(addr)
	var checks int
	var oldest time.Duration
	testkit.Eventually(t, 90*time.Second, "four more refreshes", func() bool {
		vs, err := verdicts()
		if err != nil {
			t.Fatalf("after %d checks: %v\n%s", checks, err, serveLog)
		}
		for _, d := range vs {
			if err := fresh(d); err != nil {
				t.Fatalf("after %d checks over %d refreshes: %v", checks, refreshes(addr)-start, err)
			}
			oldest = max(oldest, d.GetStaleness().AsDuration())
		}
		checks++
		return refreshes(addr) >= start+4
	})
	t.Logf("%d checks of the 5 simulated nodes over 4 refreshes; the oldest data seen was %v old (bound %v)", checks, oldest.Round(time.Millisecond), 2*interval)

	// Every broken target is down or unknown, with its own error.
	why := map[string]string{} // node → why it does not read so yet
	t.Cleanup(func() {
		if t.Failed() {
			for _, b := range targets {
				if why[b.id] != "" {
					t.Logf("%s: %s", b.id, why[b.id])
				}
			}
		}
	})
	for _, b := range targets {
		why[b.id] = "not asked yet"
	}
	testkit.Eventually(t, 60*time.Second, "every broken target down with its own error", func() bool {
		for _, b := range targets {
			if why[b.id] == "" {
				continue
			}
			ctx, cancel := rpcCtx()
			m, merr := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: b.id}))
			d, derr := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: b.id}))
			cancel()
			if merr != nil || derr != nil {
				why[b.id] = fmt.Sprint(merr, derr)
				continue
			}
			errs := strings.Join(m.Msg.GetMetrics().GetErrors(), "; ")
			switch status := d.Msg.GetDiagnosis().GetStatus(); {
			case status != llmdiagv1.Status_STATUS_DOWN && status != llmdiagv1.Status_STATUS_UNKNOWN:
				why[b.id] = fmt.Sprintf("status %v", status)
			case !strings.Contains(errs, b.hostPort) || !strings.Contains(errs, b.names):
				why[b.id] = fmt.Sprintf("errors %q, want %s's own, naming %q", errs, b.hostPort, b.names)
			default:
				why[b.id] = ""
			}
		}
		for _, b := range targets {
			if why[b.id] != "" {
				return false
			}
		}
		return true
	})
}

// startBinary starts bin with args, its output in the returned buffer, and
// stops it (SIGTERM, then SIGKILL) at cleanup, logging its output if the
// test failed.
func startBinary(t *testing.T, name, bin string, args ...string) *testkit.SyncBuffer {
	t.Helper()
	out := &testkit.SyncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	p, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(syscall.SIGTERM, 15*time.Second)
		if t.Failed() {
			t.Logf("%s (pid %d) output:\n%s", name, p.Pid(), out)
		}
	})
	return out
}

// silentListener accepts connections on loopback and never answers; it
// closes each when the client does, and itself at cleanup.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.Copy(io.Discard, conn) // until the client gives up
			}()
		}
	}()
	return ln.Addr().String()
}

// refreshes is how many refreshes the service at addr has finished, from
// its own /metrics; -1 when it cannot tell.
func refreshes(addr string) int {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "llmdiag_refresh_duration_seconds_count "); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}
