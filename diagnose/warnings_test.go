package diagnose_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Source warnings reach the evidence in both languages and change nothing else.
func TestWarningsSurfaceInEvidence(t *testing.T) {
	in := diagnosetest.SeedInput()
	plain := diagnose.Diagnose(in, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
	in.Metrics = proto.Clone(in.Metrics).(*llmdiagv1.NodeMetrics)
	in.Metrics.Warnings = []string{"query sum by (instance) (x): partial response"}
	for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
		d := diagnose.Diagnose(in, diagnose.DefaultThresholds(), lang)
		if !strings.Contains(strings.Join(d.GetEvidence(), "\n"), "partial response") {
			t.Errorf("%v: warning missing from evidence %q", lang, d.GetEvidence())
		}
		if d.GetRootCause() != plain.GetRootCause() || d.GetStatus() != plain.GetStatus() || d.GetRoutable() != plain.GetRoutable() {
			t.Errorf("%v: a warning changed the verdict", lang)
		}
	}
}
