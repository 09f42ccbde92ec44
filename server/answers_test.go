package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// noGeneration hides the store's Generation: a service over it makes
// every answer afresh, the reference the prepared answers are held to.
type noGeneration struct{ store.Store }

// TestPreparedAnswersAreFreshAnswers asks the same questions of two
// services over one store: one that prepares default-window answers once
// per store generation, and one that cannot (its store has no generation)
// and makes each afresh. Over every protocol and client, the answers are
// the same: when first prepared, when served again later with the data
// older (staleness and the report's age move on), after a refresh changed
// the store, and once the data is stale. With an SLO configured, the SLO
// finding of the DeepSeek nodes reads the windows the refresh read (both
// services are given the loop as Config.SLOReads), so a Chinese diagnosis,
// prepared or not, shows the figures of the stored English verdict.
func TestPreparedAnswersAreFreshAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		slos []diagnose.SLO
	}{
		{"no SLOs", nil},
		{"SLOs", []diagnose.SLO{testSLO}},
	} {
		t.Run(tc.name, func(t *testing.T) { testPreparedAnswers(t, tc.slos) })
	}
}

// testSLO is an SLO of the DeepSeek nodes of the fake source, whose first
// tokens are 99% within 0.5 s and 1% at 5 s or more: against 1 s at
// 99.95%, the budget burns at 20× in every window, past 13.44×: CRIT.
var testSLO = diagnose.SLO{Name: "ttft-1s", Metric: diagnose.SLOTTFT, Target: time.Second, Objective: 0.9995, Period: 28 * 24 * time.Hour, Model: "deepseek-v4"}

func testPreparedAnswers(t *testing.T, slos []diagnose.SLO) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := testkit.NewClock(t0.Add(2 * time.Second))
	src := &fakeSource{now: t0, nodes: []fleet.Node{
		{ID: "deepseek-v4-0", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, ActiveParamsBillions: 37}},
		{ID: "deepseek-v4-1", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, ActiveParamsBillions: 37}},
		{ID: "glm-0", Model: "glm-4.6", Profile: fleet.Profile{TensorParallel: 8, ActiveParamsBillions: 32}},
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tm, err := telemetry.New(prometheus.NewRegistry(), clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second
	th.SLOs = diagnose.NewSLOSet(slos...)
	st := memory.New(memory.Options{}, "test")
	loop := refresh.New(src, st, tm, log, clock.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th})
	if err := loop.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: th.StaleAfter, Thresholds: th, SLOReads: loop}
	prep := servertest.Start(t, servertest.Options{Store: st, Source: src, Log: log, Now: clock.Now, Config: cfg})
	fresh := servertest.Start(t, servertest.Options{Store: noGeneration{st}, Source: src, Log: log, Now: clock.Now, Config: cfg})
	prepAPIs, freshAPI := apis(t, prep.URL), apis(t, fresh.URL)["grpc-go"]

	type ask struct {
		name string
		call func(context.Context, api) (proto.Message, error)
	}
	var asks []ask
	for _, node := range []string{"deepseek-v4-0", "glm-0"} {
		asks = append(asks,
			ask{node + "/metrics", func(ctx context.Context, a api) (proto.Message, error) {
				return a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node})
			}},
			ask{node + "/metrics-offset-0", func(ctx context.Context, a api) (proto.Message, error) {
				return a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node, Window: "5m", Offset: durationpb.New(0)})
			}})
		for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_UNSPECIFIED, llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
			for _, format := range []llmdiagv1.ReportFormat{llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN, llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT} {
				asks = append(asks, ask{node + "/diagnose-" + lang.String() + "-" + format.String(), func(ctx context.Context, a api) (proto.Message, error) {
					return a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, Language: lang, Format: format})
				}})
			}
		}
	}
	// compare asks every question of both services; same says whether
	// answers prepared earlier may differ in what is as of their
	// preparation (the staleness finding of a diagnosis made on demand).
	compare := func(t *testing.T, stage string, asOfPreparation bool) {
		t.Helper()
		ctx := t.Context()
		for _, q := range asks {
			want, err := q.call(ctx, freshAPI)
			if err != nil {
				t.Fatalf("%s %s, afresh: %v", stage, q.name, err)
			}
			loose := asOfPreparation && strings.Contains(q.name, "ZH")
			if loose {
				want = withoutFindings(want)
			}
			for name, a := range prepAPIs {
				for range 2 { // prepared on first ask, served from it on the second
					got, err := q.call(ctx, a)
					if err != nil {
						t.Fatalf("%s %s over %s: %v", stage, q.name, name, err)
					}
					if loose {
						got = withoutFindings(got)
					}
					if !proto.Equal(want, got) {
						t.Errorf("%s %s over %s differs from the answer made afresh:\nafresh:   %v\nprepared: %v", stage, q.name, name, prototext.Format(want), prototext.Format(got))
					}
				}
			}
		}
	}
	compare(t, "first", false)
	if len(slos) > 0 {
		sameSLOFigures(t, prepAPIs["grpc-go"], "deepseek-v4-0", llmdiagv1.Status_STATUS_CRIT)
	}
	clock.Add(7 * time.Second) // older data: the staleness and the report's age move on
	compare(t, "later", true)

	src.now = t0.Add(10 * time.Second) // a refresh changes the store
	if err := loop.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	compare(t, "after a refresh", false)
	if len(slos) > 0 {
		sameSLOFigures(t, prepAPIs["grpc-go"], "deepseek-v4-0", llmdiagv1.Status_STATUS_CRIT)
	}
	resp, err := prepAPIs["grpc-go"].diagnose(t.Context(), &llmdiagv1.DiagnoseNodeRequest{Node: "glm-0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetDiagnosis().GetObservedAt().AsTime(); !got.Equal(src.now) {
		t.Errorf("after a refresh the answer was observed at %v, want %v", got, src.now)
	}

	clock.Add(time.Minute) // past StaleAfter: never a prepared verdict
	compare(t, "stale", false)
	if resp, err = prepAPIs["grpc-go"].diagnose(t.Context(), &llmdiagv1.DiagnoseNodeRequest{Node: "glm-0"}); err != nil || !resp.GetDiagnosis().GetStale() {
		t.Errorf("stale data: stale %v, err %v", resp.GetDiagnosis().GetStale(), err)
	}

	for name, a := range prepAPIs {
		if _, err := a.diagnose(t.Context(), &llmdiagv1.DiagnoseNodeRequest{Node: "nope-0"}); code(err) != connect.CodeNotFound.String() {
			t.Errorf("unknown node over %s: %v, want NotFound", name, err)
		}
		if _, err := a.getNodeMetrics(t.Context(), &llmdiagv1.GetNodeMetricsRequest{Node: "bad id!"}); code(err) != connect.CodeInvalidArgument.String() {
			t.Errorf("invalid node over %s: %v, want InvalidArgument", name, err)
		}
	}
}

// sameSLOFigures asks a for node's diagnosis in English (the verdict the
// refresh stored) and in Chinese (made by the service), and fails unless
// both carry one SLO finding of status want with the same figures, every
// window read.
func sameSLOFigures(t *testing.T, a api, node string, want llmdiagv1.Status) {
	t.Helper()
	var figures []*llmdiagv1.SLOBurn
	for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
		resp, err := a.diagnose(t.Context(), &llmdiagv1.DiagnoseNodeRequest{Node: node, Language: lang})
		if err != nil {
			t.Fatal(err)
		}
		f := sloFinding(t, resp.GetDiagnosis())
		if f.GetStatus() != want {
			t.Errorf("%s SLO finding in %s: %s (%s), want %s", node, lang, f.GetStatus(), f.GetEvidence(), want)
		}
		for _, w := range f.GetSlo().GetWindows() {
			if w.AttainmentLower == nil {
				t.Errorf("%s SLO finding in %s: window %s without attainment (%s)", node, lang, w.GetWindow(), f.GetEvidence())
			}
		}
		figures = append(figures, f.GetSlo())
	}
	if !proto.Equal(figures[0], figures[1]) {
		t.Errorf("%s SLO figures differ:\nen: %v\nzh: %v", node, prototext.Format(figures[0]), prototext.Format(figures[1]))
	}
}

// sloFinding is d's one SLO finding.
func sloFinding(t *testing.T, d *llmdiagv1.Diagnosis) *llmdiagv1.Finding {
	t.Helper()
	var out *llmdiagv1.Finding
	for _, f := range d.GetFindings() {
		if f.GetSlo() != nil {
			if out != nil {
				t.Fatalf("two SLO findings: %v and %v", out, f)
			}
			out = f
		}
	}
	if out == nil {
		t.Fatalf("no SLO finding in %v", d.GetFindings())
	}
	return out
}

// withoutFindings is a diagnosis answer without its findings and report,
// where a verdict made on demand gives the staleness finding as of when it
// was made; the staleness itself stays.
func withoutFindings(m proto.Message) proto.Message {
	r := proto.Clone(m).(*llmdiagv1.DiagnoseNodeResponse)
	r.Diagnosis.Findings, r.Report = nil, ""
	return r
}

// TestPreparedAnswersUnderConcurrency asks for every kind of answer from
// several goroutines while refreshes change the store: no call fails, and
// every answer is of an observation the store held (run with -race: the
// prepared answers and peers are shared between calls).
func TestPreparedAnswersUnderConcurrency(t *testing.T) {
	url, st, src := startServerAt(t, time.Now())
	a := apis(t, url)["grpc-go"]
	log := slog.New(slog.DiscardHandler)
	tm, err := telemetry.New(prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second
	loop := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th})
	t0 := src.now
	observed := map[int64]bool{} // what the refreshes write, Unix ns
	for i := range 4 {
		observed[t0.Add(time.Duration(i)*time.Second).UnixNano()] = true
	}
	ctx := t.Context()
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var err error
			defer func() { errs <- err }()
			for i := range 60 {
				node := []string{"deepseek-v4-0", "deepseek-v4-1", "glm-0"}[(g+i)%3]
				var at time.Time
				if i%3 == 0 {
					var r *llmdiagv1.GetNodeMetricsResponse
					if r, err = a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node}); err != nil {
						return
					}
					at = r.GetMetrics().GetObservedAt().AsTime()
				} else {
					var r *llmdiagv1.DiagnoseNodeResponse
					lang := llmdiagv1.Language(1 + i%2)
					if r, err = a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, Language: lang}); err != nil {
						return
					}
					at = r.GetDiagnosis().GetObservedAt().AsTime()
				}
				if !observed[at.UnixNano()] {
					err = fmt.Errorf("%s: an answer observed at %v, which no refresh wrote", node, at)
					return
				}
			}
		}()
	}
	for i := range 3 {
		src.now = t0.Add(time.Duration(i+1) * time.Second)
		if err := loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
