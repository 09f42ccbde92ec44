package diagnose_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// stalledInput is a vLLM node whose progress counters have read the same
// for flat refreshes (the current one included) 5 s apart, with queue and
// running as given at each.
func stalledInput(flat int, queue, running float64) diagnose.Input {
	return stalledInputEvery(5*time.Second, flat, queue, running)
}

// stalledInputEvery is stalledInput with refreshes interval apart.
func stalledInputEvery(interval time.Duration, flat int, queue, running float64) diagnose.Input {
	m := healthyMetrics()
	m.InterToken = dist(0.02, 0.05)
	m.Queue, m.Running = f64(queue), f64(running)
	m.Progress = f64(123456)
	m.ProgressSince = timestamppb.New(observed.Add(-time.Duration(flat-1) * interval))
	var h []diagnose.Point
	for i := 10; i >= 1; i-- {
		h = append(h, diagnose.Point{At: observed.Add(-time.Duration(i) * interval), Up: true, Queue: f64(queue), Running: f64(running)})
	}
	return diagnose.Input{Metrics: m, History: h}
}

func TestStalled(t *testing.T) {
	th := diagnose.DefaultThresholds()
	stalled := llmdiagv1.Cause_CAUSE_STALLED
	for _, tc := range []struct {
		name           string
		in             diagnose.Input
		edit           func(in *diagnose.Input)
		want           bool
		summaryHasNone bool
	}{
		{"flat 3 refreshes, 10 running 4 waiting", stalledInput(3, 4, 10), nil, true, false},
		{"flat 2 refreshes: not yet", stalledInput(2, 4, 10), nil, false, false},
		{"running 0 while requests wait", stalledInput(3, 7, 0), nil, true, true},
		{"idle: nothing running or waiting", stalledInput(50, 0, 0), nil, false, false},
		{"pending only now, idle before", stalledInput(50, 2, 0), func(in *diagnose.Input) {
			for i := range in.History {
				in.History[i].Queue, in.History[i].Running = f64(0), f64(0)
			}
		}, false, false},
		{"no progress counters", stalledInput(5, 4, 10), func(in *diagnose.Input) { in.Metrics.Progress = nil }, false, false},
		{"request counters only, flat 15 s", stalledInput(4, 4, 10), func(in *diagnose.Input) { in.Metrics.InterToken = nil }, false, false},
		{"request counters only, flat 2 min", stalledInput(25, 4, 10), func(in *diagnose.Input) {
			in.Metrics.InterToken = nil
			for i := 10; i < 30; i++ {
				in.History = append([]diagnose.Point{{At: observed.Add(-time.Duration(i+1) * 5 * time.Second), Up: true, Queue: f64(4), Running: f64(10)}}, in.History...)
			}
		}, true, false},
		{"target down", stalledInput(5, 4, 10), func(in *diagnose.Input) { in.Metrics.Up = false }, false, false},
		// At --interval 1s, three flat refreshes span 2 s: one long
		// prefill step. The counters must be flat for stalled_min_for.
		{"1 s refreshes, flat 3 (2 s): a long step, not a hang", stalledInputEvery(time.Second, 3, 4, 10), nil, false, false},
		{"1 s refreshes, flat 8 (7 s): not yet", stalledInputEvery(time.Second, 8, 4, 10), nil, false, false},
		{"1 s refreshes, flat 9 (8 s)", stalledInputEvery(time.Second, 9, 4, 10), nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if tc.edit != nil {
				tc.edit(&in)
			}
			for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
				d := diagnose.Diagnose(in, th, lang)
				if got := d.GetRootCause() == stalled; got != tc.want {
					t.Fatalf("%v: cause %v, want STALLED %v: %s", lang, d.GetRootCause(), tc.want, d.GetSummary())
				}
				if !in.Metrics.GetUp() && d.GetRootCause() != llmdiagv1.Cause_CAUSE_TARGET_DOWN {
					t.Errorf("down node reads %v, want TARGET_DOWN", d.GetRootCause())
				}
				hasRow := false
				for _, x := range d.GetFindings() {
					hasRow = hasRow || x.GetIndicator() == llmdiagv1.Indicator_INDICATOR_PROGRESS
				}
				if hasRow != tc.want {
					t.Errorf("%v: progress row %v, want %v", lang, hasRow, tc.want)
				}
				if !tc.want {
					continue
				}
				if d.GetStatus() != llmdiagv1.Status_STATUS_CRIT || d.GetRoutable() {
					t.Errorf("%v: status %v routable %v, want CRIT and not routable", lang, d.GetStatus(), d.GetRoutable())
				}
				if lang == llmdiagv1.Language_LANGUAGE_EN && tc.summaryHasNone != strings.Contains(d.GetSummary(), "none running") {
					t.Errorf("summary %q: want 'none running' %v", d.GetSummary(), tc.summaryHasNone)
				}
			}
		})
	}
}

// TestStalledGolden is the STALLED report in English and Chinese: 12
// running and 30 waiting on a vLLM node whose counters have not moved for
// 10 s (three refreshes).
func TestStalledGolden(t *testing.T) {
	in := stalledInput(3, 30, 12)
	for _, tc := range []struct {
		lang llmdiagv1.Language
		file string
	}{
		{llmdiagv1.Language_LANGUAGE_EN, "stalled.en.json"},
		{llmdiagv1.Language_LANGUAGE_ZH, "stalled.zh.json"},
	} {
		d := diagnose.Diagnose(in, diagnose.DefaultThresholds(), tc.lang)
		testkit.Golden(t, filepath.Join("testdata", tc.file), stableJSON(t, d))
	}
}
