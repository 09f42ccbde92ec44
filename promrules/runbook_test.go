package promrules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/promrules"
	"github.com/llmdiag/llmdiag/runbook"
)

// TestRunbookURLs: every alert links to the runbook of its cause, or of the
// cause its indicator leads to, under the base URL given.
func TestRunbookURLs(t *testing.T) {
	// want is the runbook of every alert; an alert missing here fails.
	want := map[string]string{
		"LLMDiagKVExhausted":           "kv-exhausted",
		"LLMDiagKVPressureHigh":        "kv-exhausted",
		"LLMDiagPreemptionsHigh":       "kv-exhausted",
		"LLMDiagPreemptions":           "kv-exhausted",
		"LLMDiagQueueHigh":             "overloaded",
		"LLMDiagQueueing":              "burst",
		"LLMDiagOverloaded":            "overloaded",
		"LLMDiagQueueRunningRatioHigh": "burst",
		"LLMDiagTargetDown":            "target-down",
		"LLMDiagTTFTP99Critical":       "prefill-bound",
		"LLMDiagTTFTP99High":           "prefill-bound",
		"LLMDiagE2EP99Critical":        "decode-bound",
		"LLMDiagE2EP99High":            "decode-bound",
		"LLMDiagInterTokenP99Critical": "decode-bound",
		"LLMDiagInterTokenP99High":     "decode-bound",
		"LLMDiagGPUXIDFault":           "unexplained",
		"LLMDiagGPUXID":                "unexplained",
	}
	// sloWant is the runbook of the SLO burn alerts by the SLO's metric.
	sloWant := map[string]string{"slo_ttft": "prefill-bound", "slo_e2e": "decode-bound", "slo_inter_token": "decode-bound"}
	th := diagnose.DefaultThresholds()
	month := 30 * 24 * time.Hour
	th.SLOs = diagnose.NewSLOSet(
		diagnose.SLO{Name: "ttft-2s", Metric: diagnose.SLOTTFT, Target: 2 * time.Second, Objective: 0.99, Period: month},
		diagnose.SLO{Name: "e2e-1m", Metric: diagnose.SLOE2E, Target: time.Minute, Objective: 0.99, Period: month},
		diagnose.SLO{Name: "itl-100ms", Metric: diagnose.SLOInterToken, Target: 100 * time.Millisecond, Objective: 0.99, Period: month},
	)
	for _, tc := range []struct{ base, want string }{
		{"", "http://127.0.0.1:8080/runbooks/"},
		{"https://llmdiag.example.com", "https://llmdiag.example.com/runbooks/"},
		{"https://ops.example.com/llmdiag/", "https://ops.example.com/llmdiag/runbooks/"},
		{"http://10.0.0.7:9090", "http://10.0.0.7:9090/runbooks/"},
	} {
		t.Run(tc.base, func(t *testing.T) {
			f, _, err := promrules.Build(promrules.Config{Thresholds: th, RunbookBaseURL: tc.base})
			if err != nil {
				t.Fatal(err)
			}
			alerts, slo := 0, map[string]bool{}
			for _, r := range f.Groups[0].Rules {
				if r.Alert == "" {
					continue
				}
				alerts++
				u := r.Annotations["runbook_url"]
				slug, ok := strings.CutPrefix(u, tc.want)
				if !ok {
					t.Errorf("%s: runbook_url %q does not start with %q", r.Alert, u, tc.want)
					continue
				}
				expect, known := want[r.Alert]
				if ind := r.Labels["llmdiag_indicator"]; strings.HasPrefix(ind, "slo_") {
					expect, known = sloWant[ind], true
					slo[ind] = true
				}
				if !known {
					t.Errorf("%s: an alert this test does not know: add its runbook to want", r.Alert)
					continue
				}
				if slug != expect {
					t.Errorf("%s: runbook %q, want %q", r.Alert, slug, expect)
				}
				if c := r.Labels["llmdiag_cause"]; c != "" {
					if cs := runbook.Slug(llmdiagv1.Cause(llmdiagv1.Cause_value["CAUSE_"+c])); slug != cs {
						t.Errorf("%s: llmdiag_cause %s but runbook %q, want its cause's, %q", r.Alert, c, slug, cs)
					}
				}
				if !hasRunbook(slug) {
					t.Errorf("%s: runbook %q is none the runbook package serves", r.Alert, slug)
				}
			}
			if alerts < len(want)+2*len(sloWant) || len(slo) != len(sloWant) {
				t.Errorf("%d alerts, SLO metrics %v: want the %d of want and two per SLO of each metric", alerts, slo, len(want))
			}
		})
	}
}

func hasRunbook(slug string) bool {
	for _, c := range runbook.Causes() {
		if runbook.Slug(c) == slug {
			return true
		}
	}
	return false
}

func TestRunbookBaseURLRejected(t *testing.T) {
	for _, base := range []string{
		"127.0.0.1:8080", "ftp://host/", "http://", "https://host/?x=1", "https://host/#top",
		"https://user:secret@host/", "https://user:secret@host/?q=1", "http://user:secret@host:bad/", "https://host/{{ $labels.instance }}", "/runbooks", "http://host/a b",
	} {
		t.Run(base, func(t *testing.T) {
			_, _, err := promrules.Build(promrules.Config{Thresholds: diagnose.DefaultThresholds(), RunbookBaseURL: base})
			if err == nil || !strings.Contains(err.Error(), "runbook base URL") {
				t.Fatalf("accepted, or the error does not name the setting: %v", err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}
