package diagnose_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestSLOGolden: the seed's DeepSeek node with two SLOs, its histograms
// the same over every burn window (a steady node):
//
//   - ttft-2s, 99.5% of first tokens within 2 s over 28 days: 2 s lies
//     inside the bucket (1 s, 2.5 s], which holds 94.36–99.16% of them,
//     so the burn rate is 1.68–11.28×. Only the upper rate reaches the WARN
//     pair's 5.6×: WARN, "only if the requests of the bucket around the
//     target missed it";
//   - e2e-60s, 99% of requests within 60 s over 30 days (a bound): 26%,
//     a burn of 74×, past the CRIT pair's 14.4×: CRIT.
//
// The verdict (DECODE_BOUND, WARN, routable) is the seed's: the SLO
// findings come after the others and change nothing else.
func TestSLOGolden(t *testing.T) {
	in := diagnosetest.SeedInput()
	for _, w := range []time.Duration{30 * time.Minute, time.Hour, 6 * time.Hour} {
		m := proto.Clone(in.Metrics).(*llmdiagv1.NodeMetrics)
		m.Window = map[time.Duration]string{30 * time.Minute: "30m", time.Hour: "1h", 6 * time.Hour: "6h"}[w]
		m.Covered = durationpb.New(w)
		in.Windows = append(in.Windows, m)
	}
	th := diagnose.DefaultThresholds()
	th.SLOs = diagnose.NewSLOSet(
		diagnose.SLO{Name: "ttft-2s", Metric: diagnose.SLOTTFT, Target: 2 * time.Second, Objective: 0.995, Period: 28 * 24 * time.Hour},
		diagnose.SLO{Name: "e2e-60s", Metric: diagnose.SLOE2E, Target: time.Minute, Objective: 0.99, Period: 30 * 24 * time.Hour},
	)
	plain := diagnose.Diagnose(diagnosetest.SeedInput(), diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
	for _, tc := range []struct {
		lang       llmdiagv1.Language
		file       string
		ttft, e2e  string // substrings of the conclusions
		ttftValue  string
		e2eEvident string // one evidence line of e2e-60s
	}{
		{llmdiagv1.Language_LANGUAGE_EN, "slo.en.json", "only if the requests of the bucket around the target missed it", "burning fast",
			"94.36–99.16% within 2 s (1h)", "1h: 26% of 10,000 requests within 1 min, burn rate 74×"},
		{llmdiagv1.Language_LANGUAGE_ZH, "slo.zh.json", "前提是目标所在桶内的请求都超标", "错误预算快速消耗",
			"1h 内 94.36–99.16% 在 2 秒 以内", "1h：10,000 个请求中 26% 在 1 分钟 以内，消耗速率 74×"},
	} {
		t.Run(tc.lang.String(), func(t *testing.T) {
			d := diagnose.Diagnose(in, th, tc.lang)
			if d.GetStatus() != plain.GetStatus() || d.GetRootCause() != plain.GetRootCause() || d.GetRoutable() != plain.GetRoutable() {
				t.Errorf("verdict %v %v %v, want the seed's %v %v %v", d.GetStatus(), d.GetRootCause(), d.GetRoutable(), plain.GetStatus(), plain.GetRootCause(), plain.GetRoutable())
			}
			n := len(d.GetFindings())
			if n != len(plain.GetFindings())+2 {
				t.Fatalf("%d findings, want the seed's %d and two SLO findings", n, len(plain.GetFindings()))
			}
			ttft, e2e := d.GetFindings()[n-2], d.GetFindings()[n-1]
			if ttft.GetIndicator() != llmdiagv1.Indicator_INDICATOR_SLO_TTFT || ttft.GetStatus() != llmdiagv1.Status_STATUS_WARN ||
				!strings.Contains(ttft.GetConclusion(), tc.ttft) || ttft.GetValue() != tc.ttftValue {
				t.Errorf("ttft-2s: %v %v %q %q", ttft.GetIndicator(), ttft.GetStatus(), ttft.GetValue(), ttft.GetConclusion())
			}
			if e2e.GetIndicator() != llmdiagv1.Indicator_INDICATOR_SLO_E2E || e2e.GetStatus() != llmdiagv1.Status_STATUS_CRIT ||
				!strings.Contains(e2e.GetConclusion(), tc.e2e) || !slicesContains(e2e.GetEvidence(), tc.e2eEvident) {
				t.Errorf("e2e-60s: %v %v %q %q", e2e.GetIndicator(), e2e.GetStatus(), e2e.GetConclusion(), e2e.GetEvidence())
			}
			testkit.Golden(t, filepath.Join("testdata", tc.file), stableJSON(t, d))
		})
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
