package diagnose_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// TestGPUGolden: with DCGM data the seed's DeepSeek node still reads
// DECODE_BOUND and names what its GPUs do; the gpu-bandwidth scenario's
// node reads DECODE_BOUND at the memory-bandwidth limit; a thermally throttled GPU is a
// WARN finding the verdict names; an XID error is CRIT. In English and in
// Chinese, each against its golden report.
func TestGPUGolden(t *testing.T) {
	warn, crit := llmdiagv1.Status_STATUS_WARN, llmdiagv1.Status_STATUS_CRIT
	throttled := func() diagnose.Input {
		m := healthyMetrics()
		m.Gpu = diagnosetest.Throttle(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.42, 0.11, 0.21), 3)
		return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
	}
	xid := func() diagnose.Input {
		m := healthyMetrics()
		m.Gpu = diagnosetest.XID(diagnosetest.GPU(8, "NVIDIA H100 80GB HBM3", 0.42, 0.11, 0.21), 5, 48, timestamppb.New(m.GetObservedAt().AsTime().Add(-time.Minute)))
		return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
	}
	for _, tc := range []struct {
		name   string
		in     func() diagnose.Input
		status llmdiagv1.Status
		cause  llmdiagv1.Cause
		// Each must appear, per language: in the summary, in the evidence,
		// first among the recommendations.
		summary, evidence, firstRec map[llmdiagv1.Language]string
		row                         llmdiagv1.Indicator // the GPU row and its status
		rowStatus                   llmdiagv1.Status
		// unroutable: the node must be steered around (a GPU fault).
		unroutable bool
	}{
		{
			name: "seed-gpu", in: diagnosetest.SeedGPUInput, status: warn, cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND,
			summary: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "Yet the GPUs mostly wait (DRAM active ~12%, tensor pipes ~18%)",
				llmdiagv1.Language_LANGUAGE_ZH: "但 GPU 大多在等待（DRAM 活跃度 ~12%，Tensor 管线 ~18%）",
			},
			evidence: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "the 8 data-parallel ranks step in lockstep (EP 8)",
				llmdiagv1.Language_LANGUAGE_ZH: "8 个数据并行 rank 同步推进（EP 8）",
			},
			firstRec: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "Lower the prefill chunk",
				llmdiagv1.Language_LANGUAGE_ZH: "调小 Prefill 分块",
			},
			row: llmdiagv1.Indicator_INDICATOR_GPU_ACTIVITY, rowStatus: llmdiagv1.Status_STATUS_OK,
		},
		{
			name: "gpu-bandwidth", in: diagnosetest.GPUBandwidthInput, status: warn, cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND,
			summary: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "The GPUs confirm it: their memory interface is ~62% busy, the memory-bandwidth limit of decode.",
				llmdiagv1.Language_LANGUAGE_ZH: "GPU 指标印证了这一点：显存接口繁忙度 ~62%，已到 Decode 的显存带宽上限。",
			},
			evidence: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "GPUs at the memory-bandwidth limit of decode: DRAM active ~62% (≥ 60%) with SM active ~82%",
				llmdiagv1.Language_LANGUAGE_ZH: "GPU 处于 Decode 的显存带宽上限：DRAM 活跃度 ~62%（≥ 60%），SM 活跃度 ~82%",
			},
			firstRec: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "Add replicas, or serve a smaller or quantised model",
				llmdiagv1.Language_LANGUAGE_ZH: "增加副本，或换用更小/量化的模型",
			},
			row: llmdiagv1.Indicator_INDICATOR_GPU_ACTIVITY, rowStatus: llmdiagv1.Status_STATUS_OK,
		},
		{
			name: "gpu-throttled", in: throttled, status: warn, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED,
			summary: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "GPU throttling: GPU 3: sw_thermal_slowdown, hw_thermal_slowdown",
				llmdiagv1.Language_LANGUAGE_ZH: "GPU 降频：GPU 3：sw_thermal_slowdown, hw_thermal_slowdown",
			},
			evidence: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "Clocks held down by sw_thermal_slowdown, hw_thermal_slowdown on GPU 3",
				llmdiagv1.Language_LANGUAGE_ZH: "GPU 3 的时钟被 sw_thermal_slowdown, hw_thermal_slowdown 压低",
			},
			firstRec: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "Check cooling and power limits",
				llmdiagv1.Language_LANGUAGE_ZH: "检查降频 GPU 的散热与功耗上限",
			},
			row: llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING, rowStatus: warn,
		},
		{
			name: "gpu-xid", in: xid, status: crit, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED,
			summary: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "GPU XID errors: GPU 5: XID 48",
				llmdiagv1.Language_LANGUAGE_ZH: "GPU XID 错误：GPU 5：XID 48",
			},
			evidence: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "GPU fault: XID 48 needs a GPU reset or a reboot",
				llmdiagv1.Language_LANGUAGE_ZH: "GPU 故障：XID 48 需要重置 GPU 或重启",
			},
			firstRec: map[llmdiagv1.Language]string{
				llmdiagv1.Language_LANGUAGE_EN: "Drain the node",
				llmdiagv1.Language_LANGUAGE_ZH: "摘除该节点",
			},
			row: llmdiagv1.Indicator_INDICATOR_GPU_XID, rowStatus: crit, unroutable: true,
		},
	} {
		for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
			t.Run(tc.name+"/"+lang.String(), func(t *testing.T) {
				d := diagnose.Diagnose(tc.in(), diagnose.DefaultThresholds(), lang)
				if d.GetStatus() != tc.status || d.GetRootCause() != tc.cause {
					t.Errorf("verdict %v / %v, want %v / %v", d.GetStatus(), d.GetRootCause(), tc.status, tc.cause)
				}
				if !strings.Contains(d.GetSummary(), tc.summary[lang]) {
					t.Errorf("summary lacks %q:\n%s", tc.summary[lang], d.GetSummary())
				}
				if !slices.ContainsFunc(d.GetEvidence(), func(e string) bool { return strings.Contains(e, tc.evidence[lang]) }) {
					t.Errorf("evidence lacks %q:\n%s", tc.evidence[lang], strings.Join(d.GetEvidence(), "\n"))
				}
				if recs := d.GetRecommendations(); len(recs) == 0 || !strings.HasPrefix(recs[0], tc.firstRec[lang]) {
					t.Errorf("first recommendation %q, want it to start %q", recs, tc.firstRec[lang])
				}
				i := slices.IndexFunc(d.GetFindings(), func(f *llmdiagv1.Finding) bool { return f.GetIndicator() == tc.row })
				if i < 0 || d.GetFindings()[i].GetStatus() != tc.rowStatus {
					t.Errorf("no %v row with status %v", tc.row, tc.rowStatus)
				}
				if d.GetRoutable() == tc.unroutable {
					t.Errorf("routable %v, want %v", d.GetRoutable(), !tc.unroutable)
				}
				suffix := map[llmdiagv1.Language]string{llmdiagv1.Language_LANGUAGE_EN: "en", llmdiagv1.Language_LANGUAGE_ZH: "zh"}[lang]
				testkit.Golden(t, filepath.Join("testdata", tc.name+"."+suffix+".json"), stableJSON(t, d))
			})
		}
	}
}

// TestGPUAbsentChangesNothing: the seed without a GPU section is the seed
// golden; with one, the rows before the GPU rows are the same.
func TestGPUAbsentChangesNothing(t *testing.T) {
	for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
		plain := diagnose.Diagnose(diagnosetest.SeedInput(), diagnose.DefaultThresholds(), lang)
		gpu := diagnose.Diagnose(diagnosetest.SeedGPUInput(), diagnose.DefaultThresholds(), lang)
		n := len(plain.GetFindings())
		if len(gpu.GetFindings()) != n+3 {
			t.Fatalf("%v: %d findings with DCGM data, want the %d without and 3 GPU rows", lang, len(gpu.GetFindings()), n)
		}
		for i, f := range plain.GetFindings() {
			if g := gpu.GetFindings()[i]; g.GetIndicator() != f.GetIndicator() || g.GetConclusion() != f.GetConclusion() || g.GetStatus() != f.GetStatus() {
				t.Errorf("%v: row %d %v %q with DCGM data, %v %q without", lang, i, g.GetIndicator(), g.GetConclusion(), f.GetIndicator(), f.GetConclusion())
			}
		}
		if !strings.HasPrefix(gpu.GetSummary(), plain.GetSummary()) {
			t.Errorf("%v: the GPU summary does not extend the plain one:\n%s\n%s", lang, gpu.GetSummary(), plain.GetSummary())
		}
	}
}

// TestGPUXIDSentinelRoutable: a node whose DCGM exporter reports the XID
// field at DCGM's int64 "not supported" value (read from an exposition as
// the engine reads it) has no XID figure: it stays routable, with no
// GPU-fault finding, where a real XID drains it.
func TestGPUXIDSentinelRoutable(t *testing.T) {
	read := func(xid string) *llmdiagv1.GPUMetrics {
		body, err := os.ReadFile("../engine/testdata/dcgm-a100-throttled-xid.prom")
		if err != nil {
			t.Fatal(err)
		}
		// Every GPU's last XID, and none throttled.
		re := regexp.MustCompile(`(?m)^((?:DCGM_FI_DEV_XID_ERRORS|DCGM_FI_DEV_CLOCK_THROTTLE_REASONS)\{[^}]*\}) \S+$`)
		text := re.ReplaceAllStringFunc(string(body), func(l string) string {
			m := re.FindStringSubmatch(l)
			if strings.HasPrefix(l, "DCGM_FI_DEV_XID_ERRORS") {
				return m[1] + " " + xid
			}
			return m[1] + " 0"
		})
		exp, err := engine.Parse(strings.NewReader(text), engine.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		g, _ := engine.ExtractGPU(exp.Families)
		// Read after a read that found no XID: what it holds occurred
		// since.
		engine.StampXIDs(&llmdiagv1.GPUMetrics{XidRead: true}, g, time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
		return g
	}
	for _, tc := range []struct {
		xid      string
		routable bool
	}{
		{"9223372036854775794", true}, // DCGM_INT64_NOT_SUPPORTED as the exporter prints it
		{"48", false},                 // a real XID still drains the node
	} {
		m := healthyMetrics()
		m.Gpu = read(tc.xid)
		d := diagnose.Diagnose(diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
		if d.GetRoutable() != tc.routable {
			t.Errorf("XID %s: routable %v, want %v (%v / %v)", tc.xid, d.GetRoutable(), tc.routable, d.GetStatus(), d.GetRootCause())
		}
		for _, f := range d.GetFindings() {
			if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_GPU_XID && tc.routable {
				t.Errorf("XID %s: a GPU XID finding %v %q", tc.xid, f.GetStatus(), f.GetValue())
			}
			if tc.routable && f.GetStatus() == llmdiagv1.Status_STATUS_CRIT {
				t.Errorf("XID %s: CRIT finding %v %q", tc.xid, f.GetIndicator(), f.GetConclusion())
			}
		}
		if !tc.routable && !slices.ContainsFunc(d.GetFindings(), func(f *llmdiagv1.Finding) bool {
			return f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_GPU_XID && f.GetStatus() == llmdiagv1.Status_STATUS_CRIT
		}) {
			t.Errorf("XID %s: no CRIT XID finding", tc.xid)
		}
	}
}
