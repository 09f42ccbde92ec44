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

// An indicator whose family the exposition's parse left out reads UNKNOWN
// pointing at the warnings, not "not exposed"; the warning itself is in the
// evidence.
func TestLeftOutFamilyPointsAtWarnings(t *testing.T) {
	in := diagnosetest.SeedInput()
	in.Metrics = proto.Clone(in.Metrics).(*llmdiagv1.NodeMetrics)
	in.Metrics.KvPressure = nil
	in.Metrics.Warnings = []string{"family vllm:kv_cache_usage_perc left out: line 40 is indented: Prometheus reads the leading blanks as part of the metric name and fails the scrape"}
	for _, tc := range []struct {
		lang       llmdiagv1.Language
		conclusion string
	}{
		{llmdiagv1.Language_LANGUAGE_EN, "Unknown: the engine does not expose it, or the source left it out for a problem its warnings name (see the evidence)"},
		{llmdiagv1.Language_LANGUAGE_ZH, "未知：引擎未暴露该指标，或数据源因其警告所述的问题将其剔除（见证据）"},
	} {
		d := diagnose.Diagnose(in, diagnose.DefaultThresholds(), tc.lang)
		var kv *llmdiagv1.Finding
		for _, f := range d.GetFindings() {
			if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_KV_PRESSURE {
				kv = f
			}
		}
		if kv.GetStatus() != llmdiagv1.Status_STATUS_UNKNOWN || kv.GetConclusion() != tc.conclusion {
			t.Errorf("%v: KV finding %v %q, want UNKNOWN %q", tc.lang, kv.GetStatus(), kv.GetConclusion(), tc.conclusion)
		}
		if !strings.Contains(strings.Join(d.GetEvidence(), "\n"), "vllm:kv_cache_usage_perc left out") {
			t.Errorf("%v: warning missing from evidence %q", tc.lang, d.GetEvidence())
		}
	}
}
