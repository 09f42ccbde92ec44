package fleetsd

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	clientmetrics "k8s.io/client-go/tools/metrics"

	"github.com/llmdiag/llmdiag/inferencepool"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestWatchKubeRequests: a Kubernetes job whose API server stops
// answering after its first list (client-go retries quietly: only its
// request metric says so) is failing within a Debounce or two, warned of
// once, naming the API server; answers from another API server, or to
// inferencepool's client, do not end it, answers from its own do.
func TestWatchKubeRequests(t *testing.T) {
	const host = "127.0.0.1:1"
	f, err := Parse([]byte("scrape_configs:\n  - job_name: k8s\n    kubernetes_sd_configs:\n      - role: pod\n        api_server: http://"+host+"\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	d, err := New(f, Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ps := d.kubeProviders()
	if len(ps) != 1 || ps[0].host != host || !ps[0].prom {
		t.Fatalf("providers %+v, want one of API server %s", ps, host)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.watchKube(ctx, &kubeFailures{}, ps) }()
	defer func() { cancel(); <-done }()
	if clientmetrics.RequestResult != clientmetrics.ResultMetric(kubeReqs) {
		t.Fatal("client-go's request metric is not fleetsd's")
	}
	w := testkit.Wait{For: 10 * time.Second, Every: 5 * time.Millisecond}
	failing := func() bool {
		return strings.Contains(d.Failing()["k8s"], "the Kubernetes API server "+host+" did not answer")
	}

	// Each look fails a request (watchKube counts from its start).
	w.Until(t, "the job failing", func() bool {
		kubeReqs.Increment(ctx, "<error>", "GET", host)
		return failing()
	})
	// Another API server's answers, and answers neither failed nor
	// successful, do not end it.
	kubeReqs.Increment(ctx, "200", "GET", "10.0.0.1:443")
	kubeReqs.Increment(ctx, "404", "GET", host)
	kubeReqs.Increment(inferencepool.Context(ctx), "200", "GET", host) // inferencepool's own
	if c := kubeReqs.counts(host); c.answered != 0 {
		t.Fatalf("counts %+v, want nothing answered", c)
	}
	if !failing() {
		t.Fatal("recovered on another API server's answer")
	}
	w.Until(t, "the job recovered", func() bool {
		kubeReqs.Increment(ctx, "200", "GET", host)
		return len(d.Failing()) == 0
	})
	if n := strings.Count(logs.String(), `msg="discovery failing`); n != 1 {
		t.Errorf("%d failure warnings, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `msg="discovery recovered" job=k8s`) {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}
}

// TestAPIHost: the API server a Kubernetes config talks to, as client-go
// names it: api_server's, the kubeconfig file's (inferencepool's too).
func TestAPIHost(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.1.2.3:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Parse([]byte(`scrape_configs:
  - job_name: a
    kubernetes_sd_configs: [{role: pod, api_server: "https://k8s.example:8443"}]
  - job_name: b
    kubernetes_sd_configs: [{role: pod, kubeconfig_file: `+kc+`}]
  - job_name: c
    kubernetes_sd_configs: [{role: inferencepool, kubeconfig_file: `+kc+`}]
`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k8s.example:8443", "10.1.2.3:6443", "10.1.2.3:6443"}
	for i, j := range f.Jobs {
		if got := apiHost(j.Config.ServiceDiscoveryConfigs[0]); got != want[i] {
			t.Errorf("job %s: API server %q, want %q", j.Name(), got, want[i])
		}
	}
}

// TestWatchKubeRestartsWhenBack: while a job's API server is away it is
// asked for /version every Debounce; once it answers, the job recovers
// and its discoverer is told to start anew (a fresh LIST), not left to
// the Kubernetes client's backoff.
func TestWatchKubeRestartsWhenBack(t *testing.T) {
	var answering atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" || !answering.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	f, err := Parse([]byte("scrape_configs:\n  - job_name: k8s\n    kubernetes_sd_configs:\n      - role: pod\n        api_server: "+srv.URL+"\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	d, err := New(f, Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	restart := make(chan struct{}, 1)
	d.restart[provider{job: "k8s"}] = restart
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.watchKube(ctx, &kubeFailures{}, d.kubeProviders()) }()
	defer func() { cancel(); <-done }()
	w := testkit.Wait{For: 10 * time.Second, Every: 5 * time.Millisecond}
	w.Until(t, "the job failing", func() bool {
		kubeReqs.Increment(ctx, "<error>", "GET", host)
		return len(d.Failing()) == 1
	})
	select {
	case <-restart:
		t.Fatal("restarted while the API server does not answer")
	default:
	}
	answering.Store(true)
	select {
	case <-restart:
	case <-time.After(10 * time.Second):
		t.Fatalf("no restart within 10s of the API server answering; log:\n%s", logs.String())
	}
	if len(d.Failing()) != 0 {
		t.Errorf("still failing: %v", d.Failing())
	}
}

// countingConfig makes discoverers that each send one group naming their
// number, and records when each stops.
type countingConfig struct {
	mu      sync.Mutex
	made    int
	stopped []int
}

func (*countingConfig) Name() string { return "counting" }

func (*countingConfig) NewDiscovererMetrics(prometheus.Registerer, discovery.RefreshMetricsInstantiator) discovery.DiscovererMetrics {
	return nil
}

func (c *countingConfig) NewDiscoverer(discovery.DiscovererOptions) (discovery.Discoverer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.made++
	return countingDiscoverer{c: c, n: c.made}, nil
}

type countingDiscoverer struct {
	c *countingConfig
	n int
}

func (cd countingDiscoverer) Run(ctx context.Context, up chan<- []*targetgroup.Group) {
	select {
	case up <- []*targetgroup.Group{{Source: fmt.Sprint(cd.n)}}:
	case <-ctx.Done():
	}
	<-ctx.Done()
	cd.c.mu.Lock()
	cd.c.stopped = append(cd.c.stopped, cd.n)
	cd.c.mu.Unlock()
}

// TestWatchedRestart: a restart stops the running discoverer and runs a
// new one, whose groups are handed on.
func TestWatchedRestart(t *testing.T) {
	f, err := Parse([]byte("scrape_configs:\n  - job_name: j\n    static_configs: [{targets: [\"127.0.0.1:1\"]}]\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingConfig{}
	w := &watched{Config: c, d: d, p: provider{job: "j"}, restart: make(chan struct{}, 1)}
	wd, err := w.NewDiscoverer(discovery.DiscovererOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan []*targetgroup.Group)
	done := make(chan struct{})
	go func() { defer close(done); wd.Run(ctx, up) }()
	defer func() { cancel(); <-done }()
	next := func() string {
		t.Helper()
		select {
		case g := <-up:
			return g[0].Source
		case <-time.After(10 * time.Second):
			t.Fatal("no groups within 10s")
			return ""
		}
	}
	if s := next(); s != "1" {
		t.Fatalf("groups of discoverer %s, want 1", s)
	}
	w.restart <- struct{}{}
	if s := next(); s != "2" {
		t.Fatalf("groups of discoverer %s after the restart, want 2", s)
	}
	testkit.Wait{For: 10 * time.Second}.Until(t, "the first discoverer stopped", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.stopped) == 1 && c.stopped[0] == 1
	})
}

// TestKubeRequestsCancelledNotCounted: a request that failed because its
// own context was cancelled (discoverers started anew) says nothing of the
// API server and is not counted; one that got no answer is.
func TestKubeRequestsCancelledNotCounted(t *testing.T) {
	k := &kubeRequests{byHost: map[string]*kubeCounts{}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k.Increment(ctx, "<error>", "GET", "h:1")
	if c := k.counts("h:1"); c.failed != 0 || c.answered != 0 {
		t.Errorf("a cancelled request counted: %+v", c)
	}
	k.Increment(context.Background(), "<error>", "GET", "h:1")
	k.Increment(context.Background(), "200", "GET", "h:1")
	if c := k.counts("h:1"); c.failed != 1 || c.answered != 1 {
		t.Errorf("counts %+v, want one failed and one answered", c)
	}
}
