package diagnose_test

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
)

// stableJSON renders d as indented JSON whose bytes do not depend on
// protojson's deliberately unstable whitespace.
func stableJSON(t *testing.T, d *llmdiagv1.Diagnosis) []byte {
	t.Helper()
	raw, err := protojson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// TestSeedGolden is the product's first acceptance case: the worked
// diagnosis of a decode-bound DeepSeek v4 node in docs/verdict-rules.md.
func TestSeedGolden(t *testing.T) {
	wantIndicators := []llmdiagv1.Indicator{
		llmdiagv1.Indicator_INDICATOR_KV_PRESSURE,
		llmdiagv1.Indicator_INDICATOR_QUEUE,
		llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO,
		llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE,
		llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE,
		llmdiagv1.Indicator_INDICATOR_E2E_P99,
	}
	ok, warn := llmdiagv1.Status_STATUS_OK, llmdiagv1.Status_STATUS_WARN
	wantStatuses := []llmdiagv1.Status{ok, ok, ok, ok, warn, warn}

	for _, tc := range []struct {
		lang       llmdiagv1.Language
		file       string
		summary    []string // all must appear in the summary
		ruledOut   []string // each must start one ruled_out line
		conclusion []string // the six conclusions, as the seed words them
	}{
		{
			lang:     llmdiagv1.Language_LANGUAGE_EN,
			file:     "seed.en.json",
			summary:  []string{"Not memory, not queueing", "size (37B active parameters per token)", "data-parallel strategy (DP 8)", "single-request decode", "high concurrency", "long tail", "13.3 min"},
			ruledOut: []string{"not memory", "not queueing"},
			conclusion: []string{
				"Memory is not the bottleneck",
				"No significant queueing",
				"Healthy; occasional spikes are normal",
				"Prefill is normal",
				"Decode is slow, but consistent with the model",
				"Long tail under high concurrency",
			},
		},
		{
			lang:     llmdiagv1.Language_LANGUAGE_ZH,
			file:     "seed.zh.json",
			summary:  []string{"不是显存不够、不是请求排队，而是", "体量大", "数据并行策略", "单请求 Decode 速度有限", "高并发时", "长尾延迟显著上升"},
			ruledOut: []string{"不是显存不够", "不是请求排队"},
			conclusion: []string{
				"显存不是瓶颈",
				"不存在大量排队",
				"系统健康，偶发尖刺正常",
				"Prefill 阶段正常",
				"Decode 慢，但符合模型特性",
				"高并发时长尾延迟明显",
			},
		},
	} {
		t.Run(tc.lang.String(), func(t *testing.T) {
			d := diagnose.Diagnose(diagnosetest.SeedInput(), diagnose.DefaultThresholds(), tc.lang)

			if d.GetStatus() != warn || d.GetRootCause() != llmdiagv1.Cause_CAUSE_DECODE_BOUND || !d.GetRoutable() {
				t.Errorf("verdict = %v / %v / routable %v, want STATUS_WARN / CAUSE_DECODE_BOUND / routable true",
					d.GetStatus(), d.GetRootCause(), d.GetRoutable())
			}
			// The six core rows first, in order; then the further
			// indicators, which the example's figures partly leave unknown.
			wantExtra := []struct {
				ind    llmdiagv1.Indicator
				status llmdiagv1.Status
			}{
				{llmdiagv1.Indicator_INDICATOR_DECODE_SPEED, warn},
				{llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO, ok},
				{llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, llmdiagv1.Status_STATUS_UNKNOWN},
				{llmdiagv1.Indicator_INDICATOR_INTER_TOKEN, llmdiagv1.Status_STATUS_UNKNOWN},
				{llmdiagv1.Indicator_INDICATOR_ABORTS, llmdiagv1.Status_STATUS_UNKNOWN},
				{llmdiagv1.Indicator_INDICATOR_E2E_TREND, ok},
				{llmdiagv1.Indicator_INDICATOR_STALENESS, ok},
			}
			if len(d.GetFindings()) != len(wantIndicators)+len(wantExtra) {
				t.Fatalf("got %d findings, want the six core rows and %d more", len(d.GetFindings()), len(wantExtra))
			}
			for i, w := range wantExtra {
				if f := d.GetFindings()[len(wantIndicators)+i]; f.GetIndicator() != w.ind || f.GetStatus() != w.status {
					t.Errorf("finding %d = %v %v, want %v %v", len(wantIndicators)+i, f.GetIndicator(), f.GetStatus(), w.ind, w.status)
				}
			}
			for i, f := range d.GetFindings()[:len(wantIndicators)] {
				if f.GetIndicator() != wantIndicators[i] || f.GetStatus() != wantStatuses[i] || f.GetConclusion() != tc.conclusion[i] {
					t.Errorf("finding %d = %v %v %q, want %v %v %q", i,
						f.GetIndicator(), f.GetStatus(), f.GetConclusion(), wantIndicators[i], wantStatuses[i], tc.conclusion[i])
				}
			}
			for _, s := range tc.summary {
				if !strings.Contains(d.GetSummary(), s) {
					t.Errorf("summary lacks %q: %s", s, d.GetSummary())
				}
			}
			for _, r := range tc.ruledOut {
				if !slices.ContainsFunc(d.GetRuledOut(), func(l string) bool { return strings.HasPrefix(l, r) }) {
					t.Errorf("ruled_out lacks %q: %q", r, d.GetRuledOut())
				}
			}
			if e2e := d.GetFindings()[5].GetValue(); !strings.HasPrefix(e2e, "13.3 ") || !strings.Contains(e2e, "480") || !strings.Contains(e2e, "960") {
				t.Errorf("E2E P99 value = %q, want 13.3 min with its bucket 480–960 s", e2e)
			}
			if d.GetLanguage() != tc.lang || d.GetNode() != "deepseek-v4-node-01" || d.GetModel() != "deepseek-v4" || d.GetWindow() != "5m" {
				t.Errorf("header not copied: %v %q %q %q", d.GetLanguage(), d.GetNode(), d.GetModel(), d.GetWindow())
			}
			testkit.Golden(t, filepath.Join("testdata", tc.file), stableJSON(t, d))
		})
	}
}

// TestSeedPercentilesFromBuckets checks that the acceptance case is honest:
// its percentiles and their bucket bounds are what histogram_quantile gives
// for its bucket counts.
func TestSeedPercentilesFromBuckets(t *testing.T) {
	m := diagnosetest.SeedMetrics()
	for name, d := range map[string]*llmdiagv1.Distribution{"ttft": m.GetTtft(), "e2e": m.GetE2E()} {
		if len(d.GetBucketBounds()) != len(d.GetBucketCounts()) {
			t.Fatalf("%s: %d bounds, %d counts", name, len(d.GetBucketBounds()), len(d.GetBucketCounts()))
		}
		var bs []histogram.Bucket
		for i, b := range d.GetBucketBounds() {
			bs = append(bs, histogram.Bucket{UpperBound: b, Count: d.GetBucketCounts()[i]})
		}
		for _, p := range d.GetPercentiles() {
			e := histogram.Quantile(p.GetQuantile(), bs)
			if math.Abs(e.Value-p.GetValue()) > 1e-9 || e.Lower != p.GetLowerBound() || e.Upper != p.GetUpperBound() {
				t.Errorf("%s P%v = %v in (%v, %v], histogram_quantile gives %v in (%v, %v]", name, p.GetQuantile()*100,
					p.GetValue(), p.GetLowerBound(), p.GetUpperBound(), e.Value, e.Lower, e.Upper)
			}
		}
	}
}
