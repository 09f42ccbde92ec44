package scrape_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/scrape"
)

func serveFile(t *testing.T, path string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return serveBody(t, string(body))
}

func serveBody(t *testing.T, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string { return "http://" + testkit.ClosedAddr(t) + "/metrics" }

const truncatedHistogram = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 1
vllm:e2e_request_latency_seconds_bucket{engine="0",le="2.0",model_name="m"} 2
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 2
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 2.5
`

func TestRefreshIsolatesBadTargets(t *testing.T) {
	vllm := serveFile(t, "../../engine/testdata/vllm-v1-dynamo-metrics_examples.prom")
	sglang := serveFile(t, "../../engine/testdata/sglang-dynamo-metrics_examples.prom")
	garbage := serveBody(t, "<html>this is not prometheus</html>\n\x00\x01")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "db_password=hunter2\nanother line\n")
	}))
	t.Cleanup(plain.Close)
	cut := serveBody(t, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\nvllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=")
	trunc := serveBody(t, truncatedHistogram)
	targets := []fleet.Node{
		{ID: "vllm", URL: vllm.URL + "/metrics"},
		{ID: "sglang", URL: sglang.URL + "/metrics"},
		{ID: "garbage", URL: garbage.URL, Engine: "vllm"},
		{ID: "plain", URL: plain.URL, Engine: "vllm"},
		{ID: "cut", URL: cut.URL, Engine: "vllm"},
		{ID: "truncated-histogram", URL: trunc.URL},
		{ID: "down", URL: deadURL(t)},
	}
	now := time.Unix(1768264439, 0)
	s := scrape.New(targets, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, scrape.Options{Timeout: 2 * time.Second})
	obs, err := s.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]source.Observation{}
	for _, o := range obs {
		byID[o.Node.ID] = o
	}
	tests := []struct {
		node       string
		engine     llmdiagv1.Engine
		up         bool
		errContain string // "" means no errors
		hasE2E     bool
		hasRunning bool
	}{
		{"vllm", llmdiagv1.Engine_ENGINE_VLLM, true, "", true, true},
		{"sglang", llmdiagv1.Engine_ENGINE_SGLANG, true, "", true, true},
		// A page that is not an exposition is refused by its content type
		// (Go sniffs text/html here), one served as text by the parse; the
		// error quotes neither (TestNoContentInErrors).
		{"garbage", llmdiagv1.Engine_ENGINE_VLLM, false, "HTTP 200 with content type text/html, not a Prometheus text exposition", false, false},
		{"plain", llmdiagv1.Engine_ENGINE_VLLM, true, "not in the Prometheus text format (the first line refused is line 1; 2 problems)", false, false},
		{"cut", llmdiagv1.Engine_ENGINE_VLLM, true, "parse", false, false},
		// A warning, not an error: see TestExpositionProblems.
		{"truncated-histogram", llmdiagv1.Engine_ENGINE_VLLM, true, "", false, true},
		{"down", llmdiagv1.Engine_ENGINE_UNSPECIFIED, false, "connect", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			m := byID[tc.node].Metrics
			if m == nil {
				t.Fatal("no metrics")
			}
			if m.GetNode() != tc.node || m.GetUp() != tc.up || m.GetEngine() != tc.engine {
				t.Fatalf("node %q up %v engine %v; want %q %v %v", m.GetNode(), m.GetUp(), m.GetEngine(), tc.node, tc.up, tc.engine)
			}
			errs := strings.Join(m.GetErrors(), "; ")
			if strings.Contains(errs, "hunter2") || strings.Contains(errs, "<html>") {
				t.Fatalf("errors %q quote the answer", errs)
			}
			if tc.errContain == "" && errs != "" || !strings.Contains(errs, tc.errContain) {
				t.Fatalf("errors %q, want containing %q", errs, tc.errContain)
			}
			if (m.GetE2E() != nil) != tc.hasE2E || (m.Running != nil) != tc.hasRunning {
				t.Fatalf("e2e %v running %v; want e2e %v running %v", m.GetE2E(), m.Running, tc.hasE2E, tc.hasRunning)
			}
			// One scrape: the answer is honestly the lifetime window.
			if m.GetWindow() != "lifetime" {
				t.Fatalf("window %q after one scrape, want lifetime", m.GetWindow())
			}
		})
	}
	// The real vLLM scrape's E2E: 2 requests, both in (1.5, 2] — hand-checked
	// in package engine; here the P50 must lie in that bucket.
	p50 := byID["vllm"].Metrics.GetE2E().GetPercentiles()[0]
	if p50.GetLowerBound() != 1.5 || p50.GetUpperBound() != 2 || p50.GetValue() != 1.75 {
		t.Fatalf("vllm E2E P50 = %v, want 1.75 in [1.5, 2]", p50)
	}
}

// TestWindowFromRing: two scrapes a minute apart give a window with rates.
func TestWindowFromRing(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		k := n.Add(1)
		io.WriteString(w, "# TYPE vllm:generation_tokens_total counter\n")
		io.WriteString(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} "+map[int64]string{1: "1000", 2: "7000"}[k]+"\n")
	}))
	t.Cleanup(srv.Close)
	now := time.Unix(1000, 0)
	s := scrape.New([]fleet.Node{{ID: "a", URL: srv.URL, Model: "configured"}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, scrape.Options{})
	if _, err := s.Refresh(context.Background(), "5m"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	obs, err := s.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	m := obs[0].Metrics
	if m.GetCovered().AsDuration() != time.Minute {
		t.Fatalf("covered %v, want the 1m the ring spans", m.GetCovered().AsDuration())
	}
	if m.GetWindow() != "5m" || m.GetGenerationTokensPerSecond() != 100 || m.GetModel() != "configured" {
		t.Fatalf("window %q rate %v model %q; want 5m, 6000/60 = 100, configured", m.GetWindow(), m.GetGenerationTokensPerSecond(), m.GetModel())
	}
	if _, err := s.Window(context.Background(), "a", "bogus", 0); err == nil {
		t.Fatal("bad window accepted")
	}
	if _, err := s.Window(context.Background(), "zz", "5m", 0); err == nil {
		t.Fatal("unknown node accepted")
	}
	life, err := s.Window(context.Background(), "a", "lifetime", 0)
	if err != nil || life.GetWindow() != "lifetime" {
		t.Fatalf("lifetime: %v %v", life, err)
	}
	// A minute ago only the first scrape existed: its lifetime.
	ago, err := s.Window(context.Background(), "a", "5m", time.Minute)
	if err != nil || ago.GetWindow() != "lifetime" || !ago.GetObservedAt().AsTime().Equal(now.Add(-time.Minute)) {
		t.Fatalf("offset 1m: %v %v", ago, err)
	}
	if _, err := s.Window(context.Background(), "a", "5m", time.Hour); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("offset beyond the ring: %v", err)
	}
}

// TestErrorsHideTheURLPassword: a target's URL may carry credentials; no
// error the scraper reports, and no log line it writes, repeats the
// password, whether the target is down, answers an error or serves what
// cannot be parsed.
func TestErrorsHideTheURLPassword(t *testing.T) {
	const secret = "s3cret-pw"
	withUser := func(raw string) string { return strings.Replace(raw, "http://", "http://scraper:"+secret+"@", 1) }
	garbage := serveBody(t, "\x00\x01 not an exposition\n")
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	targets := []fleet.Node{
		{ID: "down", URL: withUser(deadURL(t)), Engine: "vllm"},
		{ID: "failing", URL: withUser(failing.URL + "/metrics"), Engine: "vllm"},
		{ID: "garbage", URL: withUser(garbage.URL + "/metrics"), Engine: "vllm"},
	}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := scrape.New(targets, nil, log, time.Now, scrape.Options{Timeout: 5 * time.Second})
	obs, err := s.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range obs {
		errs := strings.Join(o.Metrics.GetErrors(), "; ")
		if errs == "" {
			t.Errorf("%s: no error reported", o.Node.ID)
		}
		if strings.Contains(errs, secret) {
			t.Errorf("%s: errors show the password: %s", o.Node.ID, errs)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("logs show the password:\n%s", logs.String())
	}
}

// TestLongRetention: beyond FullResolution (6m) samples are thinned to one
// a minute up to LongRetention (6h), so a 6h window is covered whole;
// without it the ring reaches back 1h and the 6h window says it covers 1h
// only.
func TestLongRetention(t *testing.T) {
	for _, tc := range []struct {
		name    string
		long    time.Duration
		covered time.Duration
	}{
		{"long retention 6h", 6 * time.Hour, 6 * time.Hour},
		{"retention only", 0, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, "# TYPE vllm:generation_tokens_total counter\n")
				fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", 30*n.Add(1))
			}))
			t.Cleanup(srv.Close)
			now := time.Unix(1000, 0)
			s := scrape.New([]fleet.Node{{ID: "a", URL: srv.URL}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now },
				scrape.Options{Retention: time.Hour, LongRetention: tc.long})
			const step = 30 * time.Second // 30 tokens a scrape: 1 token/s
			for i := range int(7 * time.Hour / step) {
				if i > 0 {
					now = now.Add(step)
				}
				if _, err := s.Refresh(context.Background(), "5m"); err != nil {
					t.Fatal(err)
				}
			}
			m, err := s.Window(context.Background(), "a", "6h", 0)
			if err != nil {
				t.Fatal(err)
			}
			if c := m.GetCovered().AsDuration(); c > tc.covered || c < tc.covered-time.Minute {
				t.Errorf("6h window covers %v, want %v (to the minute)", c, tc.covered)
			}
			if m.GetWindow() != "6h" || m.GetGenerationTokensPerSecond() != 1 {
				t.Errorf("window %q at %v tokens/s, want 6h at 1", m.GetWindow(), m.GetGenerationTokensPerSecond())
			}
			// The last FullResolution (6m) keeps every sample: 5m is
			// exact; beyond, one a minute: 30m starts at most a minute
			// early.
			m, err = s.Window(context.Background(), "a", "5m", 0)
			if err != nil || m.GetCovered().AsDuration() != 5*time.Minute {
				t.Errorf("5m window covers %v (%v), want 5m", m.GetCovered().AsDuration(), err)
			}
			m, err = s.Window(context.Background(), "a", "30m", 0)
			if c := m.GetCovered().AsDuration(); err != nil || c < 30*time.Minute || c > 31*time.Minute {
				t.Errorf("30m window covers %v (%v), want 30m to 31m", c, err)
			}
		})
	}
}
