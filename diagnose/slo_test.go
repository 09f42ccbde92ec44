package diagnose_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
)

// sloBounds are the fixture's TTFT buckets (vLLM's, around 1–5 s).
var sloBounds = []float64{0.5, 1, 2.5, 5, math.Inf(1)}

// Cumulative counts of the fixtures, per bucket of sloBounds.
var (
	tailHeavy = []float64{50, 80, 95, 99, 100} // 80% ≤ 1 s, 95% ≤ 2.5 s
	allFast   = []float64{99, 100, 100, 100, 100}
	empty     = []float64{0, 0, 0, 0, 0}
)

// sloMetrics is a fresh node's metrics over window with TTFT counts cum.
func sloMetrics(window string, cum []float64) *llmdiagv1.NodeMetrics {
	h := &sample.Histogram{Bounds: sloBounds, Counts: cum, Count: cum[len(cum)-1]}
	return &llmdiagv1.NodeMetrics{
		Node: "n1", Model: "m", Window: window, Up: true,
		ObservedAt: timestamppb.New(time.Unix(1e9, 0)), Staleness: durationpb.New(0),
		Queue: proto.Float64(0), Running: proto.Float64(4), KvPressure: proto.Float64(0.3),
		Ttft: metrics.Distribution(h, nil),
	}
}

// sloInput is the refresh's 5m window and the further windows, each with
// its own counts.
func sloInput(w5m, w30m, w1h, w6h []float64) diagnose.Input {
	in := diagnose.Input{Metrics: sloMetrics("5m", w5m)}
	for _, w := range []struct {
		window string
		cum    []float64
	}{{"30m", w30m}, {"1h", w1h}, {"6h", w6h}} {
		if w.cum != nil {
			in.Windows = append(in.Windows, sloMetrics(w.window, w.cum))
		}
	}
	return in
}

func sloThresholds(slos ...diagnose.SLO) diagnose.Thresholds {
	th := diagnose.DefaultThresholds()
	th.SLOs = diagnose.NewSLOSet(slos...)
	return th
}

// ttftSLO: 99% of first tokens within target over 30 days; the burn
// alerts' factors are then 14.4 (1h and 5m, CRIT) and 6 (6h and 30m, WARN).
func ttftSLO(target time.Duration) diagnose.SLO {
	return diagnose.SLO{Name: "ttft", Metric: diagnose.SLOTTFT, Target: target, Objective: 0.99, Period: 30 * 24 * time.Hour}
}

func sloFindingOf(t *testing.T, d *llmdiagv1.Diagnosis) *llmdiagv1.Finding {
	t.Helper()
	var out *llmdiagv1.Finding
	for _, f := range d.GetFindings() {
		if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_SLO_TTFT {
			if out != nil {
				t.Fatal("two TTFT SLO findings")
			}
			out = f
		}
	}
	return out
}

// TestSLOFindingByHand checks attainment and burn figures worked out by
// hand. With the tail-heavy fixture, 80 of 100 first tokens come within
// 1 s and 95 within 2.5 s:
//
//   - target 1 s (a bound): attainment 80%, burn (1−0.80)/(1−0.99) = 20×;
//   - target 2 s (inside (1, 2.5]): attainment 80–95%, burn 5–20×;
//   - target 2.5 s (a bound): 95%, 5×.
func TestSLOFindingByHand(t *testing.T) {
	for _, tc := range []struct {
		name               string
		target             time.Duration
		in                 diagnose.Input
		want               llmdiagv1.Status
		value              string
		conclusion         []string // substrings of the English conclusion
		lo1h, hi1h, burn1h float64  // attainment bounds and upper burn over 1h
	}{
		{"bound, burning everywhere", time.Second, sloInput(tailHeavy, tailHeavy, tailHeavy, tailHeavy),
			llmdiagv1.Status_STATUS_CRIT, "80% within 1 s (1h)", []string{"burning fast", "14.4×", "1h and 5m", "2% of the 30d budget"}, 0.8, 0.8, 20},
		{"inside a bucket: only if the bucket missed", 2 * time.Second, sloInput(tailHeavy, tailHeavy, tailHeavy, tailHeavy),
			llmdiagv1.Status_STATUS_CRIT, "80–95% within 2 s (1h)", []string{"burning fast", "only if the requests of the bucket around the target missed it"}, 0.8, 0.95, 20},
		{"bound, within budget", 2500 * time.Millisecond, sloInput(tailHeavy, tailHeavy, tailHeavy, tailHeavy),
			llmdiagv1.Status_STATUS_OK, "95% within 2.5 s (1h)", []string{"Within budget", "below 14.4×", "below 6×"}, 0.95, 0.95, 5},
		// The last 5 minutes recovered: the fast pair resets, the slow one
		// (6h and 30m, 20× ≥ 6×) still fires.
		{"recovered in the short window", time.Second, sloInput(allFast, tailHeavy, tailHeavy, tailHeavy),
			llmdiagv1.Status_STATUS_WARN, "80% within 1 s (1h)", []string{"burning steadily", "6×", "6h and 30m"}, 0.8, 0.8, 20},
		// A burst in the last 5 minutes alone burns no real share of the
		// budget: the long windows are fine.
		{"short burst only", time.Second, sloInput(tailHeavy, allFast, allFast, allFast),
			llmdiagv1.Status_STATUS_OK, "100% within 1 s (1h)", []string{"Within budget"}, 1, 1, 0},
		{"no requests", time.Second, sloInput(empty, empty, empty, empty),
			llmdiagv1.Status_STATUS_OK, "", []string{"Within budget"}, math.NaN(), math.NaN(), math.NaN()},
		{"long windows not read", time.Second, sloInput(tailHeavy, nil, nil, nil),
			llmdiagv1.Status_STATUS_UNKNOWN, "", []string{"Unknown"}, math.NaN(), math.NaN(), math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := sloThresholds(ttftSLO(tc.target))
			en := diagnose.Diagnose(tc.in, th, llmdiagv1.Language_LANGUAGE_EN)
			f := sloFindingOf(t, en)
			if f == nil {
				t.Fatal("no SLO finding")
			}
			if f.GetStatus() != tc.want || f.GetValue() != tc.value {
				t.Errorf("finding %s %q, want %s %q (%s)", f.GetStatus(), f.GetValue(), tc.want, tc.value, f.GetConclusion())
			}
			for _, s := range tc.conclusion {
				if !strings.Contains(f.GetConclusion(), s) {
					t.Errorf("conclusion %q lacks %q", f.GetConclusion(), s)
				}
			}
			var w1h *llmdiagv1.SLOWindow
			for _, w := range f.GetSlo().GetWindows() {
				if w.GetWindow() == "1h" {
					w1h = w
				}
			}
			if w1h == nil {
				t.Fatalf("no 1h window in %v", f.GetSlo())
			}
			if math.IsNaN(tc.lo1h) {
				if w1h.AttainmentLower != nil {
					t.Errorf("1h attainment %v, want absent", w1h.GetAttainmentLower())
				}
			} else if w1h.GetAttainmentLower() != tc.lo1h || w1h.GetAttainmentUpper() != tc.hi1h || math.Abs(w1h.GetBurnRateUpper()-tc.burn1h) > 1e-9 {
				t.Errorf("1h attainment [%v, %v] burn %v, want [%v, %v] %v", w1h.GetAttainmentLower(), w1h.GetAttainmentUpper(), w1h.GetBurnRateUpper(), tc.lo1h, tc.hi1h, tc.burn1h)
			}
			zh := diagnose.Diagnose(tc.in, th, llmdiagv1.Language_LANGUAGE_ZH)
			fz := sloFindingOf(t, zh)
			if fz.GetStatus() != f.GetStatus() || len(fz.GetEvidence()) != len(f.GetEvidence()) || fz.GetConclusion() == f.GetConclusion() {
				t.Errorf("Chinese finding %s %q differs in structure from English %s %q", fz.GetStatus(), fz.GetConclusion(), f.GetStatus(), f.GetConclusion())
			}
			if len(f.GetEvidence()) != len(diagnose.SLOWindows()) {
				t.Errorf("%d evidence lines, want one per window: %q", len(f.GetEvidence()), f.GetEvidence())
			}
		})
	}
}

// TestSLOPartialWindow: a window its metrics cover less than 90% of (a
// direct scrape whose samples reach back 1h, asked for 6h) is not judged:
// the pair that needs it is unknown, and the evidence says how much was
// covered. Another pair firing still decides.
func TestSLOPartialWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		w5m     []float64
		covered time.Duration
		want    llmdiagv1.Status
	}{
		{"6h covered 1h, fast pair quiet", allFast, time.Hour, llmdiagv1.Status_STATUS_UNKNOWN},
		{"6h covered 1h, fast pair fires", tailHeavy, time.Hour, llmdiagv1.Status_STATUS_CRIT},
		{"6h covered 5h30m (over 90%)", allFast, 5*time.Hour + 30*time.Minute, llmdiagv1.Status_STATUS_WARN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sloInput(tc.w5m, tailHeavy, tailHeavy, tailHeavy)
			for _, m := range in.Windows {
				d, _, _ := metrics.ParseWindow(m.GetWindow())
				m.Covered = durationpb.New(d)
				if d == 6*time.Hour {
					m.Covered = durationpb.New(tc.covered)
				}
			}
			th := sloThresholds(ttftSLO(time.Second))
			f := sloFindingOf(t, diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_EN))
			if f.GetStatus() != tc.want {
				t.Fatalf("status %s, want %s: %s %q", f.GetStatus(), tc.want, f.GetConclusion(), f.GetEvidence())
			}
			partial := slices.ContainsFunc(f.GetEvidence(), func(e string) bool { return e == "6h: only the last 1h covered, not judged" })
			if partial != (tc.covered == time.Hour) {
				t.Errorf("evidence %q: partial 6h said %v, want %v", f.GetEvidence(), partial, tc.covered == time.Hour)
			}
			fz := sloFindingOf(t, diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_ZH))
			if tc.covered == time.Hour && !slices.Contains(fz.GetEvidence(), "6h：仅覆盖最近 1h，不予判定") {
				t.Errorf("Chinese evidence %q lacks the partial 6h window", fz.GetEvidence())
			}
		})
	}
}

// TestSLOLeavesVerdictAlone: without SLOs the diagnosis is what it was; with
// one burning, only the SLO finding is added, and an SLO of another model
// adds nothing.
func TestSLOLeavesVerdictAlone(t *testing.T) {
	in := sloInput(tailHeavy, tailHeavy, tailHeavy, tailHeavy)
	plain := diagnose.Diagnose(in, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
	other := ttftSLO(time.Second)
	other.Model = "other-model"
	if d := diagnose.Diagnose(in, sloThresholds(other), llmdiagv1.Language_LANGUAGE_EN); !proto.Equal(d, plain) {
		t.Errorf("an SLO of another model changed the diagnosis")
	}
	withSLO := diagnose.Diagnose(in, sloThresholds(ttftSLO(time.Second)), llmdiagv1.Language_LANGUAGE_EN)
	if n := len(withSLO.GetFindings()); n != len(plain.GetFindings())+1 {
		t.Fatalf("%d findings with the SLO, want %d+1", n, len(plain.GetFindings()))
	}
	got := proto.Clone(withSLO).(*llmdiagv1.Diagnosis)
	got.Findings = slices.Delete(got.Findings, len(got.Findings)-1, len(got.Findings))
	if !proto.Equal(got, plain) {
		t.Errorf("the SLO changed more than its own finding:\n%v\nvs\n%v", got, plain)
	}
}

func TestBurnFactors(t *testing.T) {
	a := diagnose.BurnAlerts()
	for _, tc := range []struct {
		period     time.Duration
		crit, warn float64
	}{
		{30 * 24 * time.Hour, 14.4, 6},
		{28 * 24 * time.Hour, 13.44, 5.6},
	} {
		if c, w := a[0].Factor(tc.period), a[1].Factor(tc.period); math.Abs(c-tc.crit) > 1e-9 || math.Abs(w-tc.warn) > 1e-9 {
			t.Errorf("period %v: factors %v, %v, want %v, %v", tc.period, c, w, tc.crit, tc.warn)
		}
	}
}
