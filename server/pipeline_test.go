package server_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/sim"
	"github.com/llmdiag/llmdiag/source/scrape"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// TestBrokenTargetsAreIsolated runs the real pipeline (simulator over HTTP →
// scrape → refresh → store → handlers) with one node serving junk, one
// serving a histogram cut off mid-way and one down: those three are UNKNOWN
// or DOWN with the cause in the evidence; the others are diagnosed as usual.
func TestBrokenTargetsAreIsolated(t *testing.T) {
	cfg := simtest.Scenario(t, "seed", 1)
	cfg.Warmup = 2 * time.Minute
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetGarbage("glm-4.6-0", sim.GarbageJunk); err != nil {
		t.Fatal(err)
	}
	if err := f.SetGarbage("deepseek-v4-1", sim.GarbageTruncated); err != nil {
		t.Fatal(err)
	}
	if err := f.SetDown("kimi-k2.6-0", true); err != nil {
		t.Fatal(err)
	}
	simtest.Serve(t, f)
	ctx := t.Context()

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tm, _ := telemetry.New(prometheus.NewRegistry(), time.Now)
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second
	st := memory.New(memory.Options{}, "p")
	scraper := scrape.New(f.FleetFile().Nodes, nil, log, time.Now, scrape.Options{Timeout: 5 * time.Second})
	loop := refresh.New(scraper, st, tm, log, time.Now, refresh.Config{Thresholds: th})
	for range 2 {
		if err := loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	svc := server.NewService(st, scraper, log, time.Now, server.Config{StaleAfter: 30 * time.Second, Thresholds: th}, ctx.Done())

	tests := []struct {
		node     string
		status   llmdiagv1.Status
		evidence string // must appear in some finding's evidence or conclusion
	}{
		{"glm-4.6-0", llmdiagv1.Status_STATUS_UNKNOWN, "parse"},
		{"deepseek-v4-1", llmdiagv1.Status_STATUS_UNKNOWN, ""},
		{"kimi-k2.6-0", llmdiagv1.Status_STATUS_DOWN, "connect"},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			resp, err := svc.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: tc.node}))
			if err != nil {
				t.Fatal(err)
			}
			d := resp.Msg.GetDiagnosis()
			text := resp.Msg.GetReport()
			for _, fd := range d.GetFindings() {
				text += fd.GetConclusion() + strings.Join(fd.GetEvidence(), " ")
			}
			if tc.status == llmdiagv1.Status_STATUS_UNKNOWN {
				// A truncated histogram loses that family only: the node's
				// latency findings are UNKNOWN, never OK from a guess.
				for _, fd := range d.GetFindings() {
					if fd.GetIndicator() == llmdiagv1.Indicator_INDICATOR_E2E_P99 && fd.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN && tc.node == "glm-4.6-0" {
						t.Errorf("E2E finding %v on a node serving junk", fd.GetStatus())
					}
				}
			}
			m, err := svc.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: tc.node}))
			if err != nil {
				t.Fatal(err)
			}
			errs := strings.Join(m.Msg.GetMetrics().GetErrors(), "; ")
			if errs == "" {
				t.Fatalf("no errors recorded for %s", tc.node)
			}
			if !strings.Contains(text, strings.SplitN(m.Msg.GetMetrics().GetErrors()[0], ":", 2)[0]) {
				t.Errorf("the error %q is not in the diagnosis:\n%s", errs, text)
			}
			if tc.evidence != "" && !strings.Contains(errs, tc.evidence) {
				t.Errorf("errors %q lack %q", errs, tc.evidence)
			}
			if tc.status == llmdiagv1.Status_STATUS_DOWN && (d.GetStatus() != tc.status || d.GetRoutable()) {
				t.Errorf("status %v routable %v, want DOWN, not routable", d.GetStatus(), d.GetRoutable())
			}
			if tc.node == "glm-4.6-0" && d.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN {
				t.Errorf("junk target: status %v, want UNKNOWN", d.GetStatus())
			}
		})
	}
	// The healthy nodes are unaffected.
	for _, id := range []string{"deepseek-v4-0", "glm-4.6-1"} {
		resp, err := svc.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: id}))
		if err != nil {
			t.Fatal(err)
		}
		m := resp.Msg.GetMetrics()
		if len(m.GetErrors()) > 0 || m.GetE2E() == nil || m.KvPressure == nil || !m.GetUp() {
			t.Errorf("%s affected by its neighbours: errors %v e2e %v kv %v", id, m.GetErrors(), m.GetE2E() != nil, m.KvPressure)
		}
	}
}
