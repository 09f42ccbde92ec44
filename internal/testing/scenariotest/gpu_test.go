package scenariotest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sim"
)

// judgedReadings are a node's readings from judgeFrom on.
func judgedReadings(res *Result, node string) []int {
	var out []int
	for i, r := range res.Readings[node] {
		if r.At >= judgeFrom {
			out = append(out, i)
		}
	}
	return out
}

// hasGPURow reports whether d has the GPU row ind with status s.
func hasGPURow(d *llmdiagv1.Diagnosis, ind llmdiagv1.Indicator, s llmdiagv1.Status) bool {
	return slices.ContainsFunc(d.GetFindings(), func(f *llmdiagv1.Finding) bool {
		return f.GetIndicator() == ind && f.GetStatus() == s
	})
}

// acceptSeedGPU: with the nodes' DCGM exporters read, the seed's DeepSeek
// nodes' DECODE_BOUND verdicts name what the GPUs do, in English (as
// stored) and in Chinese (the same reading diagnosed again).
func acceptSeedGPU(t *testing.T, res *Result) {
	t.Helper()
	for _, node := range []string{"deepseek-v4-0", "deepseek-v4-1"} {
		named, decodeBound := 0, 0
		for _, i := range judgedReadings(res, node) {
			r := res.Readings[node][i]
			if r.Cause != decode {
				continue
			}
			decodeBound++
			if r.Metrics.GetGpu() == nil {
				t.Fatalf("%s at %v: no GPU section", node, r.At)
			}
			zh := diagnose.Diagnose(diagnose.Input{Metrics: r.Metrics, History: res.History(node, i), Profile: profileOf(res, node)},
				diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_ZH)
			if strings.Contains(r.Diagnosis.GetSummary(), "the GPUs") && strings.Contains(zh.GetSummary(), "GPU") &&
				slices.ContainsFunc(r.Diagnosis.GetEvidence(), func(e string) bool { return strings.HasPrefix(e, "GPUs ") }) {
				named++
			}
		}
		if _, dev := deviations[caseKey{"seed", res.Options.Engine, node, ""}]; dev && decodeBound == 0 {
			continue // the schema cannot show decode-bound (see deviations)
		}
		if decodeBound == 0 || named < decodeBound {
			t.Errorf("%s/%s: the GPU evidence is named in %d of %d DECODE_BOUND verdicts", res.Options.Engine, node, named, decodeBound)
		}
	}
}

// acceptGPUThrottled: the throttled node names the throttling at every
// judged refresh; its peer never does.
func acceptGPUThrottled(t *testing.T, res *Result) {
	t.Helper()
	checkGPURow(t, res, "glm-4.6-0", "glm-4.6-1", llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING, llmdiagv1.Status_STATUS_WARN, "GPU 3")
}

// gpuXIDWindow is the matrix's gpu_xid_window for the gpu-xid scenario
// (scenarioThresholds): short enough that a run sees its XID age out.
const gpuXIDWindow = 4 * time.Minute

// acceptGPUXID: the gpu-xid node's GPU reports XID 48 at sim.GPUXIDAt and
// again a minute later. Before it, no XID row is elevated and the node is
// routable; from the second refresh that reads it on, the node is CRIT
// and not routable, the XID row CRIT naming XID 48, through the repeat
// (whose refresh stamps the new occurrence) until gpu_xid_window after
// the repeat; from the second refresh after that, WARN and routable, the
// row saying the XID has not repeated. Its peer never has an XID row
// elevated.
func acceptGPUXID(t *testing.T, res *Result) {
	t.Helper()
	const node, peer = "kimi-k2.6-0", "kimi-k2.6-1"
	interval := res.Options.Interval
	first, repeat := sim.GPUXIDAt, sim.GPUXIDAt+time.Minute
	agedFrom := repeat + gpuXIDWindow + 2*interval
	xidRow := func(d *llmdiagv1.Diagnosis) *llmdiagv1.Finding {
		for _, f := range d.GetFindings() {
			if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_GPU_XID {
				return f
			}
		}
		return nil
	}
	checked := map[string]int{}
	for _, r := range res.Readings[node] {
		row := xidRow(r.Diagnosis)
		switch {
		case r.At < first:
			if row == nil || row.GetStatus() != llmdiagv1.Status_STATUS_OK || !r.Diagnosis.GetRoutable() {
				t.Errorf("%s: %s at %v, before the XID: row %v, routable %v", res.Options.Engine, node, r.At, row, r.Diagnosis.GetRoutable())
				return
			}
			checked["before"]++
		case r.At >= first+interval && r.At < repeat+gpuXIDWindow:
			if r.Status != llmdiagv1.Status_STATUS_CRIT || r.Diagnosis.GetRoutable() || row.GetStatus() != llmdiagv1.Status_STATUS_CRIT ||
				!strings.Contains(row.GetValue(), "XID 48") {
				t.Errorf("%s: %s at %v, XID current: %v, routable %v, row %v", res.Options.Engine, node, r.At, r.Status, r.Diagnosis.GetRoutable(), row)
				return
			}
			xs := r.Metrics.GetGpu().GetXidErrors()
			wantAt, wantCount := first, uint64(1)
			if r.At >= repeat {
				wantAt, wantCount = repeat, 2
			}
			if len(xs) != 1 || xs[0].GetCount() != wantCount || xs[0].GetAtFirstRead() ||
				xs[0].GetOccurredAt().AsTime().Sub(epoch.Add(res.Config.Warmup)) > wantAt+interval ||
				xs[0].GetOccurredAt().AsTime().Sub(epoch.Add(res.Config.Warmup)) < wantAt {
				t.Errorf("%s: %s at %v: XIDs %v, want XID 48 counted %d, occurred within a refresh of %v", res.Options.Engine, node, r.At, xs, wantCount, wantAt)
				return
			}
			checked["current"]++
		case r.At >= agedFrom:
			if r.Status != llmdiagv1.Status_STATUS_WARN || !r.Diagnosis.GetRoutable() || row.GetStatus() != llmdiagv1.Status_STATUS_WARN ||
				!strings.Contains(row.GetConclusion(), "has not repeated") {
				t.Errorf("%s: %s at %v, XID aged: %v, routable %v, row %v", res.Options.Engine, node, r.At, r.Status, r.Diagnosis.GetRoutable(), row)
				return
			}
			checked["aged"]++
		}
	}
	for _, phase := range []string{"before", "current", "aged"} {
		if checked[phase] == 0 {
			t.Errorf("%s: %s: no refresh %s the XID was judged", res.Options.Engine, node, phase)
		}
	}
	for _, r := range res.Readings[peer] {
		if row := xidRow(r.Diagnosis); row != nil && row.GetStatus() != llmdiagv1.Status_STATUS_OK {
			t.Errorf("%s: peer %s at %v: XID row %v", res.Options.Engine, peer, r.At, row)
			return
		}
	}
}

// acceptGPUXIDOld: the gpu-xid-old node's GPU holds XID 31 (the
// application's) from before the run: at every refresh it is reported,
// as at the first read, with an OK XID row, and the node is routable.
func acceptGPUXIDOld(t *testing.T, res *Result) {
	t.Helper()
	const node = "kimi-k2.6-0"
	for _, r := range res.Readings[node] {
		xs := r.Metrics.GetGpu().GetXidErrors()
		if len(xs) != 1 || xs[0].GetXid() != 31 || !xs[0].GetAtFirstRead() {
			t.Errorf("%s: %s at %v: XIDs %v, want XID 31 at the first read", res.Options.Engine, node, r.At, xs)
			return
		}
		if !r.Diagnosis.GetRoutable() || !hasGPURow(r.Diagnosis, llmdiagv1.Indicator_INDICATOR_GPU_XID, llmdiagv1.Status_STATUS_OK) {
			t.Errorf("%s: %s at %v: routable %v, findings %v", res.Options.Engine, node, r.At, r.Diagnosis.GetRoutable(), r.Diagnosis.GetFindings())
			return
		}
	}
}

// acceptGPUBandwidth: at every judged refresh the decode-bound node reads
// DRAM active ≥ 60% from its DCGM exporter, and its DECODE_BOUND verdict
// names the memory-bandwidth limit in its summary and evidence and puts
// "more replicas or a smaller or quantised model" first, in English (as
// stored) and in Chinese (the same reading diagnosed again). The peer's
// verdicts never name it.
func acceptGPUBandwidth(t *testing.T, res *Result) {
	t.Helper()
	const node, peer = "llama-3.3-70b-0", "llama-3.3-70b-1"
	langs := []struct {
		lang                   llmdiagv1.Language
		summary, evidence, rec string
	}{
		{llmdiagv1.Language_LANGUAGE_EN, "the memory-bandwidth limit of decode", "GPUs at the memory-bandwidth limit of decode: DRAM active ~", "Add replicas, or serve a smaller or quantised model"},
		{llmdiagv1.Language_LANGUAGE_ZH, "已到 Decode 的显存带宽上限", "GPU 处于 Decode 的显存带宽上限：DRAM 活跃度 ~", "增加副本，或换用更小/量化的模型"},
	}
	decodeBound := 0
	for _, i := range judgedReadings(res, node) {
		r := res.Readings[node][i]
		if dram := r.Metrics.GetGpu().GetDramActive(); dram < 0.6 {
			t.Errorf("%s: %s at %v: DRAM active %.3f, want ≥ 0.6", res.Options.Engine, node, r.At, dram)
			return
		}
		if r.Cause != decode {
			continue
		}
		decodeBound++
		for _, l := range langs {
			d := r.Diagnosis
			if l.lang != llmdiagv1.Language_LANGUAGE_EN {
				d = diagnose.Diagnose(diagnose.Input{Metrics: r.Metrics, History: res.History(node, i), Profile: profileOf(res, node)},
					diagnose.DefaultThresholds(), l.lang)
			}
			named := strings.Contains(d.GetSummary(), l.summary) &&
				slices.ContainsFunc(d.GetEvidence(), func(e string) bool { return strings.HasPrefix(e, l.evidence) }) &&
				len(d.GetRecommendations()) > 0 && strings.HasPrefix(d.GetRecommendations()[0], l.rec)
			if !named {
				t.Errorf("%s: %s at %v (%v): the memory-bandwidth limit is not named:\n%s\n%s\n%s", res.Options.Engine, node, r.At, l.lang,
					d.GetSummary(), strings.Join(d.GetEvidence(), "\n"), strings.Join(d.GetRecommendations(), "\n"))
				return
			}
		}
	}
	if _, dev := deviations[caseKey{"gpu-bandwidth", res.Options.Engine, node, ""}]; !dev && decodeBound == 0 {
		t.Errorf("%s: %s never reads DECODE_BOUND", res.Options.Engine, node)
	}
	for _, r := range res.Readings[peer] {
		if strings.Contains(r.Diagnosis.GetSummary(), langs[0].summary) {
			t.Errorf("%s: peer %s at %v names the memory-bandwidth limit: %s", res.Options.Engine, peer, r.At, r.Diagnosis.GetSummary())
			return
		}
	}
}

func checkGPURow(t *testing.T, res *Result, node, peer string, ind llmdiagv1.Indicator, s llmdiagv1.Status, named string) {
	t.Helper()
	for _, i := range judgedReadings(res, node) {
		r := res.Readings[node][i]
		text := r.Diagnosis.GetSummary() + "\n" + strings.Join(r.Diagnosis.GetEvidence(), "\n")
		if !hasGPURow(r.Diagnosis, ind, s) || !strings.Contains(text, named) {
			t.Errorf("%s: %s at %v: no %v %v row naming %q:\n%s", res.Options.Engine, node, r.At, ind, s, named, text)
			return
		}
	}
	for _, r := range res.Readings[peer] {
		if hasGPURow(r.Diagnosis, ind, s) {
			t.Errorf("%s: peer %s at %v has a %v %v row", res.Options.Engine, peer, r.At, ind, s)
			return
		}
	}
}

// profileOf is node's deployment profile as the fleet file gives it.
func profileOf(res *Result, node string) *llmdiagv1.Profile {
	for _, n := range res.Config.Nodes {
		if n.ID == node {
			return n.Profile.Proto()
		}
	}
	return nil
}
