package fleetsd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
