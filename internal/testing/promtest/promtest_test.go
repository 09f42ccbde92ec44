package promtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"

	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// exporter serves one counter on a loopback httptest server.
func exporter(t *testing.T) (addr string, c prometheus.Counter) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c = prometheus.NewCounter(prometheus.CounterOpts{Name: "promtest_requests_total", Help: "Requests."})
	reg.MustRegister(c)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), c
}

func TestStartQueryRestartStop(t *testing.T) {
	t.Parallel()
	addr, c := exporter(t)
	c.Add(42)
	p := promtest.Start(t, promtest.Options{
		Targets:        []string{addr},
		TargetLabels:   map[string]map[string]string{addr: {"node": "n-0"}},
		ScrapeInterval: 500 * time.Millisecond,
	})
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q is not on loopback", p.URL())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := p.WaitForScrapes(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForSamples(ctx, fmt.Sprintf(`count(up{job=%q} == 1) == 1`, p.Job()), 1); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	vec, err := p.QueryVector(ctx, `promtest_requests_total`, before)
	if err != nil {
		t.Fatal(err)
	}
	if len(vec) != 1 {
		t.Fatalf("got %d series, want 1: %v", len(vec), vec)
	}
	s := vec[0]
	if s.Value != 42 || s.Metric["instance"] != model.LabelValue(addr) || s.Metric["node"] != "n-0" || s.Metric["job"] != model.LabelValue(p.Job()) {
		t.Fatalf("sample %v, want 42 with instance=%s node=n-0 job=%s", s, addr, p.Job())
	}

	// Restart keeps the address and the data.
	url := p.URL()
	p.Restart(t)
	if p.URL() != url || !p.Running() {
		t.Fatalf("after restart: URL %s running %v, want %s running", p.URL(), p.Running(), url)
	}
	c.Add(8)
	if err := p.WaitForSamples(ctx, `promtest_requests_total == 50`, 1); err != nil {
		t.Fatal(err)
	}
	vec, err = p.QueryVector(ctx, `promtest_requests_total`, before)
	if err != nil || len(vec) != 1 || vec[0].Value != 42 {
		t.Fatalf("pre-restart sample after restart: %v, %v; want 42", vec, err)
	}

	p.Stop()
	p.Stop() // idempotent
	if p.Running() {
		t.Fatal("running after Stop")
	}
	qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
	defer qcancel()
	if _, err := p.Query(qctx, "up", time.Now()); err == nil {
		t.Fatal("query after Stop succeeded")
	}
	// A wait on a stopped server ends at its deadline with an error.
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	if err := p.WaitForSamples(wctx, "up", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForSamples on a stopped server: %v, want deadline exceeded", err)
	}
}

func startFails(t *testing.T, opts promtest.Options) string {
	t.Helper()
	msg := testkit.Fails(t, func(tb testing.TB) { promtest.Start(tb, opts) })
	if msg == "" {
		t.Fatalf("Start(%+v) did not fail", opts)
	}
	return msg
}

func TestMissingBinaryFailsWithInstallHint(t *testing.T) {
	t.Setenv("PROMETHEUS_BIN", t.TempDir()+"/no-such-prometheus")
	msg := startFails(t, promtest.Options{Targets: []string{"127.0.0.1:9"}})
	if !strings.Contains(msg, "apt-get install -y prometheus") {
		t.Errorf("message %q does not say how to install prometheus", msg)
	}
}

func TestRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]promtest.Options{
		"no targets":       {},
		"not loopback":     {Targets: []string{"10.0.0.1:9100"}},
		"no port":          {Targets: []string{"127.0.0.1"}},
		"duplicate":        {Targets: []string{"127.0.0.1:9", "127.0.0.1:9"}},
		"labels elsewhere": {Targets: []string{"127.0.0.1:9"}, TargetLabels: map[string]map[string]string{"127.0.0.1:8": {"node": "x"}}},
		"bad label":        {Targets: []string{"127.0.0.1:9"}, TargetLabels: map[string]map[string]string{"127.0.0.1:9": {"no-de": "x"}}},
		"bad extra yaml":   {Targets: []string{"127.0.0.1:9"}, ExtraScrapeConfigs: "job_name: x"},
	} {
		t.Run(name, func(t *testing.T) {
			if msg := startFails(t, opts); !strings.HasPrefix(msg, "promtest: ") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

func TestBrokenConfigShowsPrometheusError(t *testing.T) {
	t.Parallel()
	msg := startFails(t, promtest.Options{
		Targets:            []string{"127.0.0.1:9"},
		ExtraScrapeConfigs: "- job_name: broken\n  scrape_interval: notaduration\n",
		ReadyTimeout:       10 * time.Second,
	})
	if !strings.Contains(msg, "exited before it was ready") {
		t.Errorf("message %q, want prometheus to have exited", msg)
	}
}
