package diagnose_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
)

func TestLoadSLOs(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name string
		doc  string
		want []diagnose.SLO
		errs []string // substrings the error must contain; nil: no error
	}{
		{name: "none", doc: "kv_warn: 0.85\n"},
		{name: "empty list", doc: "slos: []\n"},
		{name: "two, one per model", doc: `
kv_warn: 0.85
slos:
  - metric: ttft
    target: "2s"
    objective: 0.99
    period: "28d"
  - name: itl-deepseek
    metric: inter_token
    target: "100ms"
    objective: 0.995
    period: "30d"
    model: deepseek-v4
`, want: []diagnose.SLO{
			{Name: "ttft-2s", Metric: diagnose.SLOTTFT, Target: 2 * time.Second, Objective: 0.99, Period: 28 * day},
			{Name: "itl-deepseek", Metric: diagnose.SLOInterToken, Target: 100 * time.Millisecond, Objective: 0.995, Period: 30 * day, Model: "deepseek-v4"},
		}},
		{name: "every field wrong", doc: `
slos:
  - name: "bad name!"
    metric: tpot
    target: "2s"
    objective: 99
    period: "1h"
`, errs: []string{"slos[0].name: want letters", "slos[0].metric: want ttft, inter_token or e2e", "slos[0].objective: must be in (0, 1)", "slos[0].period: must be from 7d to 366d"}},
		{name: "wrong types", doc: "slos:\n  - {metric: ttft, target: 2, objective: high, period: 30}\n",
			errs: []string{"line 2: slos[0].target: want a duration", "slos[0].objective: want a number", "slos[0].period: want a duration"}},
		{name: "zero target, objective 1", doc: `
slos:
  - metric: e2e
    target: "0s"
    objective: 1
    period: "30d"
`, errs: []string{"slos[0].target: must be positive", "slos[0].objective: must be in (0, 1)"}},
		{name: "missing and unknown keys", doc: "slos:\n  - metric: ttft\n    objectve: 0.9\n", errs: []string{`unknown key "objectve"`, "slos[0].target: missing", "slos[0].objective: missing", "slos[0].period: missing"}},
		{name: "repeated name", doc: `
slos:
  - {name: a, metric: ttft, target: "1s", objective: 0.9, period: "7d"}
  - {name: a, metric: e2e, target: "1m", objective: 0.9, period: "7d"}
`, errs: []string{`slos[1].name: "a" repeats slos[0]`}},
		{name: "not a list", doc: "slos: ttft\n", errs: []string{"slos: want a list"}},
		{name: "repeated key", doc: "slos: []\nslos: []\n", errs: []string{"slos: repeated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := diagnose.LoadThresholds(strings.NewReader(tc.doc))
			if tc.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.SLOs.List(), tc.want) {
					t.Errorf("SLOs %+v, want %+v", got.SLOs.List(), tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", got.SLOs.List())
			}
			for _, s := range tc.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
		})
	}
}

// TestWriteSLOsRoundTrip: what WriteThresholds prints, LoadThresholds reads
// back to the same SLOs.
func TestWriteSLOsRoundTrip(t *testing.T) {
	th := diagnose.DefaultThresholds()
	want := []diagnose.SLO{
		{Name: "ttft-2s", Metric: diagnose.SLOTTFT, Target: 2 * time.Second, Objective: 0.99, Period: 28 * 24 * time.Hour},
		{Name: "e2e", Metric: diagnose.SLOE2E, Target: 90 * time.Second, Objective: 0.9, Period: 30 * 24 * time.Hour, Model: "m"},
	}
	th.SLOs = diagnose.NewSLOSet(want...)
	var b strings.Builder
	if err := diagnose.WriteThresholds(&b, th); err != nil {
		t.Fatal(err)
	}
	got, err := diagnose.LoadThresholds(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if !slices.Equal(got.SLOs.List(), want) {
		t.Errorf("read back %+v, want %+v", got.SLOs.List(), want)
	}
}
