package scenariotest

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
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

// acceptGPUXID: the node with an XID reads CRIT at every judged refresh,
// the XID named; its peer never does.
func acceptGPUXID(t *testing.T, res *Result) {
	t.Helper()
	checkGPURow(t, res, "kimi-k2.6-0", "kimi-k2.6-1", llmdiagv1.Indicator_INDICATOR_GPU_XID, llmdiagv1.Status_STATUS_CRIT, "XID 48")
	for _, i := range judgedReadings(res, "kimi-k2.6-0") {
		if r := res.Readings["kimi-k2.6-0"][i]; r.Status != llmdiagv1.Status_STATUS_CRIT {
			t.Errorf("%s: kimi-k2.6-0 at %v reads %v, want CRIT", res.Options.Engine, r.At, r.Status)
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
