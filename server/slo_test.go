package server_test

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// TestOnDemandDiagnosesReadSLOWindows: a diagnosis the service makes
// itself (in Chinese, over another window) gets the SLO windows: those the
// refresh read for the stored verdict when the service is given them
// (Config.SLOReads), at no read of the source; else read from the source
// ending now, within the request's budget, the finding naming a window the
// budget could not cover. Either way its figures are the stored verdict's
// (the fake source's windows all hold the same requests). A node no SLO
// applies to reads nothing.
func TestOnDemandDiagnosesReadSLOWindows(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refresh  bool // Config.SLOReads is the loop
		budget   int  // Config.RequestQueryBudget; 0: default
		node     string
		window   string
		lang     llmdiagv1.Language
		reads    []windowRead // the source's reads the diagnosis causes
		noSLO    bool         // no SLO finding
		evidence string       // one of the finding's evidence
	}{
		{name: "refresh's windows, zh", refresh: true, node: "deepseek-v4-0", lang: llmdiagv1.Language_LANGUAGE_ZH},
		{name: "refresh's windows, another window", refresh: true, node: "deepseek-v4-0", window: "1h",
			reads: []windowRead{{"1h", 0}}},
		{name: "read, zh", node: "deepseek-v4-0", lang: llmdiagv1.Language_LANGUAGE_ZH,
			reads: []windowRead{{"30m", 0}, {"1h", 0}, {"6h", 0}}},
		{name: "read, another window", node: "deepseek-v4-0", window: "1h",
			reads: []windowRead{{"1h", 0}, {"30m", 0}, {"6h", 0}}},
		{name: "read, over budget", budget: 250, node: "deepseek-v4-0", window: "1h",
			reads: []windowRead{{"1h", 0}, {"30m", 0}}, evidence: "6h: not read, over the request's query budget"},
		{name: "read, over budget, zh", budget: 250, node: "deepseek-v4-0", lang: llmdiagv1.Language_LANGUAGE_ZH,
			reads: []windowRead{{"30m", 0}, {"1h", 0}}, evidence: "6h：未读取，超出本次请求的查询预算"},
		{name: "no SLO for the model", node: "glm-0", lang: llmdiagv1.Language_LANGUAGE_ZH, noSLO: true},
		{name: "no SLO for the model, another window", node: "glm-0", window: "1h", noSLO: true,
			reads: []windowRead{{"1h", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			clock := testkit.NewClock(t0.Add(2 * time.Second))
			fake := &fakeSource{now: t0, nodes: []fleet.Node{
				{ID: "deepseek-v4-0", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, ActiveParamsBillions: 37}},
				{ID: "glm-0", Model: "glm-4.6", Profile: fleet.Profile{TensorParallel: 8, ActiveParamsBillions: 32}},
			}}
			src := chargingSource{fake, 100} // as a Prometheus source charges a fleet-wide read
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			tm, err := telemetry.New(prometheus.NewRegistry(), clock.Now)
			if err != nil {
				t.Fatal(err)
			}
			th := diagnose.DefaultThresholds()
			th.StaleAfter = 30 * time.Second
			th.SLOs = diagnose.NewSLOSet(testSLO)
			st := memory.New(memory.Options{}, "test")
			loop := refresh.New(src, st, tm, log, clock.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th})
			if err := loop.Once(t.Context()); err != nil {
				t.Fatal(err)
			}
			cfg := server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: th.StaleAfter, Thresholds: th, RequestQueryBudget: tc.budget}
			if tc.refresh {
				cfg.SLOReads = loop
			}
			srv := servertest.Start(t, servertest.Options{Store: st, Source: src, Log: log, Now: clock.Now, Config: cfg})
			a := apis(t, srv.URL)["grpc-go"]

			before := len(fake.windowReads())
			resp, err := a.diagnose(t.Context(), &llmdiagv1.DiagnoseNodeRequest{Node: tc.node, Window: tc.window, Language: tc.lang})
			if err != nil {
				t.Fatal(err)
			}
			if got := fake.windowReads()[before:]; !slices.Equal(got, tc.reads) {
				t.Errorf("source reads %v, want %v", got, tc.reads)
			}
			if tc.noSLO {
				for _, f := range resp.GetDiagnosis().GetFindings() {
					if f.GetSlo() != nil {
						t.Errorf("SLO finding for a node no SLO applies to: %v", f)
					}
				}
				return
			}
			got := sloFinding(t, resp.GetDiagnosis())
			if tc.evidence != "" && !slices.Contains(got.GetEvidence(), tc.evidence) {
				t.Errorf("evidence %q, want %q among it", got.GetEvidence(), tc.evidence)
			}
			// The pair of the CRIT alert (1h, 5m) is read in every case.
			if got.GetStatus() != llmdiagv1.Status_STATUS_CRIT {
				t.Errorf("SLO finding %s (%q), want CRIT", got.GetStatus(), got.GetEvidence())
			}
			rec, err := st.Get(t.Context(), tc.node)
			if err != nil {
				t.Fatal(err)
			}
			want := proto.Clone(sloFinding(t, rec.Diagnosis).GetSlo()).(*llmdiagv1.SLOBurn)
			if tc.evidence != "" { // the window not read has no figures
				for _, w := range want.Windows {
					if w.GetWindow() == "6h" {
						w.Reset()
						w.Window = "6h"
					}
				}
			}
			if !proto.Equal(got.GetSlo(), want) {
				t.Errorf("SLO figures differ from the stored verdict's:\ngot:  %v\nwant: %v", prototext.Format(got.GetSlo()), prototext.Format(want))
			}
		})
	}
}
