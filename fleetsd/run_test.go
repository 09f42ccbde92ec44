package fleetsd_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/fleetsd"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// sets runs d until the test ends and keeps every node set it applies.
type sets struct {
	mu   sync.Mutex
	all  [][]fleet.Node
	stop func()
}

func run(t *testing.T, d *fleetsd.Discovery) *sets {
	t.Helper()
	s := &sets{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- d.Run(ctx, func(n []fleet.Node) {
			s.mu.Lock()
			s.all = append(s.all, n)
			s.mu.Unlock()
		})
	}()
	s.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(func() {
		if s.stop != nil {
			s.stop()
		}
	})
	return s
}

// last is the last set applied and how many were.
func (s *sets) last() ([]fleet.Node, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) == 0 {
		return nil, 0
	}
	return s.all[len(s.all)-1], len(s.all)
}

func ids(nodes []fleet.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// value is the gathered value of the metric name with label value lv
// (any labels when lv is ""), -1 when absent.
func value(t *testing.T, reg *prometheus.Registry, name, lv string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if lv != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetValue() == lv }) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestHTTPSDFailureKeepsTargets: an http_sd endpoint that answers, then
// fails: the last targets are kept, the failure warned of once however
// many refreshes fail, and counted; when it answers again it recovers.
func TestHTTPSDFailureKeepsTargets(t *testing.T) {
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"targets": ["10.0.0.5:8000", "10.0.0.6:8000"], "labels": {"model": "deepseek-v4", "engine": "vllm"}}]`)
	}))
	defer srv.Close()
	f, err := fleetsd.Parse([]byte(fmt.Sprintf(`scrape_configs:
  - job_name: http
    http_sd_configs:
      - url: %s/targets
        refresh_interval: 50ms
`, srv.URL)), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var logs testkit.SyncBuffer
	d, err := fleetsd.New(f, fleetsd.Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg, Debounce: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := run(t, d)
	want := []string{"10.0.0.5:8000", "10.0.0.6:8000"}
	w := testkit.Wait{For: 20 * time.Second, Every: 20 * time.Millisecond}
	w.Until(t, "the first node set", func() bool { n, _ := s.last(); return slices.Equal(ids(n), want) })
	if got := value(t, reg, "llmdiag_discovery_targets", "http"); got != 2 {
		t.Errorf("llmdiag_discovery_targets{job=http} = %v, want 2", got)
	}

	failing.Store(true)
	w.Until(t, "three failed refreshes", func() bool { return value(t, reg, "llmdiag_discovery_failures_total", "http") >= 3 })
	if got := value(t, reg, "llmdiag_discovery_failing", "http"); got != 1 {
		t.Errorf("llmdiag_discovery_failing{job=http} = %v, want 1", got)
	}
	if n := strings.Count(logs.String(), `msg="discovery failing`); n != 1 {
		t.Errorf("%d failure warnings, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "503") {
		t.Errorf("the warning does not say what failed:\n%s", logs.String())
	}
	if n, _ := s.last(); !slices.Equal(ids(n), want) {
		t.Errorf("node set while failing: %v, want the last targets %v", ids(n), want)
	}
	if fl := d.Failing(); !strings.Contains(fl["http"], "503") {
		t.Errorf("Failing() = %v", fl)
	}

	failing.Store(false)
	w.Until(t, "recovery", func() bool { return value(t, reg, "llmdiag_discovery_failing", "http") == 0 })
	if !strings.Contains(logs.String(), `msg="discovery recovered" job=http`) {
		t.Errorf("no recovery line:\n%s", logs.String())
	}
	if n, _ := s.last(); !slices.Equal(ids(n), want) {
		t.Errorf("node set after recovery: %v, want %v", ids(n), want)
	}
}

// TestBuildBounds: a second target with an id taken is refused as a
// duplicate (the first job's kept), and the cap refuses beyond MaxTargets,
// by id; both counted.
func TestBuildBounds(t *testing.T) {
	f, err := fleetsd.Parse([]byte(`scrape_configs:
  - job_name: a
    static_configs: [{targets: ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"]}]
  - job_name: b
    static_configs: [{targets: ["10.0.0.3:1", "10.0.0.4:1"], labels: {model: other}}]
`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d, err := fleetsd.New(f, fleetsd.Options{Registerer: reg, MaxTargets: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := run(t, d)
	w := testkit.Wait{For: 20 * time.Second, Every: 20 * time.Millisecond}
	w.Until(t, "a node set", func() bool { _, n := s.last(); return n > 0 })
	got, _ := s.last()
	// 10.0.0.3:1 twice: a's is kept, b's refused as a duplicate (its model
	// differs); 10.0.0.4:1 is beyond the cap.
	if !slices.Equal(ids(got), []string{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"}) || got[2].Labels["job"] != "a" {
		t.Fatalf("node set %v", got)
	}
	for reason, want := range map[string]float64{"duplicate": 1, "max_targets": 1, "invalid": 0} {
		if v := value(t, reg, "llmdiag_discovery_refused", reason); v != want {
			t.Errorf("llmdiag_discovery_refused{reason=%s} = %v, want %v", reason, v, want)
		}
	}
}

// TestFileSDChurnBounded: a file_sd file of 1,000 targets rewritten 30
// times, each time with another 1,000, every 100 ms and every second for
// 30 s: every node set handed over is one version of the file, whole
// (1,000 nodes), never more; the updates are batched (rewritten faster
// than the debounce, fewer sets than versions) and a version is handed
// over once at most (the file's reader may read one version on two file
// events: Run does not hand the same set over again), after at most one
// empty set first (the Manager may sync before the file's first read);
// and once the writes stop the set is the last version.
func TestFileSDChurnBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: rewrites a file_sd file of 1,000 targets every 100 ms, then every second for 30 s")
	}
	for _, tc := range []struct {
		every   time.Duration
		maxSets int // of 31 versions
	}{
		{100 * time.Millisecond, 31},
		{time.Second, 31},
	} {
		t.Run(tc.every.String(), func(t *testing.T) { fileSDChurn(t, tc.every, tc.maxSets) })
	}
}

func fileSDChurn(t *testing.T, every time.Duration, maxSets int) {
	dir := t.TempDir()
	path := filepath.Join(dir, "targets.yaml")
	version := func(v int) string {
		var b strings.Builder
		b.WriteString("- targets:\n")
		for i := range 1000 {
			// Each version shifts the window of ports by 37.
			fmt.Fprintf(&b, "  - 127.0.0.1:%d\n", 10000+v*37+i)
		}
		b.WriteString(fmt.Sprintf("  labels: {version: \"%d\"}\n", v))
		return b.String()
	}
	write := func(v int) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(version(v)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	f, err := fleetsd.Parse([]byte("scrape_configs:\n  - job_name: churn\n    file_sd_configs: [{files: [targets.yaml]}]\n"), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := fleetsd.New(f, fleetsd.Options{Registerer: prometheus.NewRegistry(), MaxTargets: 1000, Debounce: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := run(t, d)
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := 0
	for v := 1; v <= 30; v++ {
		<-tick.C
		write(v)
		last = v
	}
	wantLast := fmt.Sprint(last)
	w := testkit.Wait{For: 30 * time.Second, Every: 20 * time.Millisecond}
	w.Until(t, "the last version", func() bool {
		n, _ := s.last()
		return len(n) == 1000 && n[0].Labels["version"] == wantLast && n[0].ID == fmt.Sprintf("127.0.0.1:%d", 10000+last*37)
	})
	s.stop()
	s.stop = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	versions, seen := 0, map[string]int{}
	for i, set := range s.all {
		switch {
		case len(set) == 0 && i == 0:
			continue // the Manager's first sync may come before the file's first read
		case len(set) != 1000:
			t.Fatalf("set %d has %d nodes, want a whole version (1,000)", i, len(set))
		}
		versions++
		if j, ok := seen[set[0].Labels["version"]]; ok {
			t.Fatalf("sets %d and %d are both version %s", j, i, set[0].Labels["version"])
		}
		seen[set[0].Labels["version"]] = i
		for _, n := range set {
			if n.Labels["version"] != set[0].Labels["version"] {
				t.Fatalf("set %d mixes versions %s and %s", i, set[0].Labels["version"], n.Labels["version"])
			}
		}
	}
	if versions > maxSets {
		t.Errorf("%d versions handed over (%d sets) for 31 versions written, want at most %d", versions, len(s.all), maxSets)
	}
}

// TestKubernetesAPIServerAway: Kubernetes discovery whose API server does
// not answer (the Kubernetes client retries a refused connection without
// a word, and Prometheus's failures counter does not move): the job is
// failing, from the client's requests that got no answer or once
// FirstUpdate has passed, warned of once, counted.
func TestKubernetesAPIServerAway(t *testing.T) {
	closed := testkit.ClosedAddr(t)
	f, err := fleetsd.Parse([]byte(fmt.Sprintf(`scrape_configs:
  - job_name: k8s
    kubernetes_sd_configs:
      - role: pod
        api_server: http://%s
`, closed)), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var logs testkit.SyncBuffer
	d, err := fleetsd.New(f, fleetsd.Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg, Debounce: 50 * time.Millisecond, FirstUpdate: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := run(t, d)
	w := testkit.Wait{For: 20 * time.Second, Every: 20 * time.Millisecond}
	w.Until(t, "the job failing", func() bool { return value(t, reg, "llmdiag_discovery_failing", "k8s") == 1 })
	if n, _ := s.last(); len(n) != 0 {
		t.Errorf("node set %v, want none", n)
	}
	if n := strings.Count(logs.String(), `msg="discovery failing`); n != 1 ||
		!strings.Contains(logs.String(), "kubernetes discovery has sent no targets 200ms after it started") && !strings.Contains(logs.String(), "the Kubernetes API server "+closed+" did not answer") {
		t.Errorf("%d failure warnings, want 1 naming the Kubernetes API:\n%s", n, logs.String())
	}
	if v := value(t, reg, "llmdiag_discovery_failures_total", "k8s"); v < 1 {
		t.Errorf("llmdiag_discovery_failures_total{job=k8s} = %v", v)
	}
}
