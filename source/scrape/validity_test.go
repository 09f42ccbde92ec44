package scrape_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/scrape"
)

// refreshOne scrapes one target serving body once.
func refreshOne(t *testing.T, body string, opts scrape.Options) source.Observation {
	t.Helper()
	srv := serveBody(t, body)
	now := time.Unix(1768264439, 0)
	opts.Timeout = 30 * time.Second // a generous bound on a busy machine
	s := scrape.New([]fleet.Node{{ID: "n", URL: srv.URL + "/metrics"}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, opts)
	obs, err := s.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 1 || obs[0].Metrics == nil {
		t.Fatalf("observations %v", obs)
	}
	return obs[0]
}

// evidence is the diagnosis of m's evidence, in English, one line each.
func evidence(m *llmdiagv1.NodeMetrics) (*llmdiagv1.Diagnosis, string) {
	d := diagnose.Diagnose(diagnose.Input{Metrics: m}, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
	return d, strings.Join(d.GetEvidence(), "\n")
}

// TestExpositionProblems: a real vLLM scrape made invalid — an indented
// line, a histogram cut off before its +Inf bucket — is read without the
// family concerned, and the warning reaches NodeMetrics.warnings and the
// diagnosis evidence. It is no error: the rest of the node is read.
func TestExpositionProblems(t *testing.T) {
	real, err := os.ReadFile("../../engine/testdata/vllm-v1-dynamo-metrics_examples.prom")
	if err != nil {
		t.Fatal(err)
	}
	running := []byte("\nvllm:num_requests_running{")
	if bytes.Count(real, running) != 1 {
		t.Fatal("fixture changed: want one vllm:num_requests_running series")
	}
	inf := []byte(`vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf"`)
	if bytes.Count(real, inf) != 1 {
		t.Fatal("fixture changed: want one E2E +Inf bucket")
	}
	tests := []struct {
		name    string
		body    string
		warning string
		check   func(*llmdiagv1.NodeMetrics) bool // the family left out is unknown
	}{
		{
			name:    "indented line",
			body:    string(bytes.Replace(real, running, []byte("\n  vllm:num_requests_running{"), 1)),
			warning: `family vllm:num_requests_running left out: line 119 is indented: Prometheus reads the leading blanks as part of the metric name and fails the scrape`,
			check:   func(m *llmdiagv1.NodeMetrics) bool { return m.Running == nil && m.Queue != nil },
		},
		{
			name:    "histogram cut before +Inf",
			body:    string(real[:bytes.Index(real, inf)]),
			warning: `family vllm:e2e_request_latency_seconds left out: histogram series {engine="0",model_name="Qwen/Qwen3-0.6B"}: no +Inf bucket`,
			check:   func(m *llmdiagv1.NodeMetrics) bool { return m.GetE2E() == nil && m.Running != nil },
		},
		{
			name:    "histogram without +Inf",
			body:    truncatedHistogram,
			warning: `family vllm:e2e_request_latency_seconds left out: histogram series {engine="0",model_name="m"}: no +Inf bucket`,
			check:   func(m *llmdiagv1.NodeMetrics) bool { return m.GetE2E() == nil && m.Running != nil },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := refreshOne(t, tc.body, scrape.Options{}).Metrics
			if !m.GetUp() || len(m.GetErrors()) != 0 {
				t.Fatalf("up %v errors %q, want up without errors", m.GetUp(), m.GetErrors())
			}
			if len(m.GetWarnings()) != 1 || m.GetWarnings()[0] != tc.warning {
				t.Fatalf("warnings %q, want [%q]", m.GetWarnings(), tc.warning)
			}
			if !tc.check(m) {
				t.Errorf("the family left out was read, or the others were not: %v", m)
			}
			if _, ev := evidence(m); !strings.Contains(ev, tc.warning) {
				t.Errorf("evidence %q, want the warning", ev)
			}
		})
	}
}

// flood is an exposition that floods the parser: 264,000 series of
// vllm:num_requests_running, each a distinct value of label, 15 MB (under
// the 16 MiB body cap).
func flood(label string) string {
	var b strings.Builder
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	for i := range 264_000 {
		fmt.Fprintf(&b, "vllm:num_requests_running{%s=\"%d\",model_name=\"m\"} 1\n", label, i)
	}
	return b.String()
}

// TestFloodRefused: the 264,000-series exposition is refused by the series
// cap (or, with distinct engine values, the rank cap) with the cap and its
// flag named; the node has no running count and no data-parallel degree,
// reads UNKNOWN with the cap in the evidence, and the scrape allocated
// under 64 MiB in all.
func TestFloodRefused(t *testing.T) {
	tests := []struct {
		label, want string
	}{
		{"pod", "exposition refused at line 50002: more than the limit of 50000 series (serve --scrape-max-series)"},
		{"engine", `exposition refused at line 1026: more than the limit of 1024 values of label "engine" (serve --scrape-max-ranks)`},
	}
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			body := flood(tc.label)
			if len(body) >= 16<<20 {
				t.Fatalf("body %d bytes, want under 16 MiB", len(body))
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			o := refreshOne(t, body, scrape.Options{})
			runtime.ReadMemStats(&after)
			m := o.Metrics
			if len(m.GetErrors()) != 1 || !strings.HasSuffix(m.GetErrors()[0], tc.want) {
				t.Fatalf("errors %q, want one ending %q", m.GetErrors(), tc.want)
			}
			if m.Running != nil || o.Sample.Running != nil || o.Sample.DataParallel != 0 {
				t.Errorf("running %v, data-parallel %d: want neither", m.Running, o.Sample.DataParallel)
			}
			d, ev := evidence(m)
			if d.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN || d.GetRoutable() {
				t.Errorf("status %v routable %v, want UNKNOWN, not routable", d.GetStatus(), d.GetRoutable())
			}
			if !strings.Contains(ev, tc.want) {
				t.Errorf("evidence %q, want the cap named", ev)
			}
			// Everything allocated meanwhile (the test server's side
			// included) bounds how far the heap grew.
			if total := after.TotalAlloc - before.TotalAlloc; total >= 64<<20 {
				t.Errorf("scrape allocated %d MiB, want under 64 MiB", total>>20)
			}
		})
	}
}
