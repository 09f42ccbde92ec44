package scenariotest

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// acceptLoRA: the lora-contention node is never OVERLOADED and stays
// routable (its queue never saturates); where the schema exports the
// adapters, every LORA_CONTENTION verdict names max_lora 1, the adapter
// holding the slot and those waited for (among sql, chat and code), and
// recommends more slots first, in English (as stored) and in Chinese (the
// same reading diagnosed again).
func acceptLoRA(t *testing.T, res *Result) {
	t.Helper()
	const node = "qwen3-8b-0"
	langs := []struct {
		lang              llmdiagv1.Language
		summary, evidence string
		rec               string
	}{
		{llmdiagv1.Language_LANGUAGE_EN, "all 1 adapter slot(s) (max_lora) are held by ", "LoRA adapters: ", "Raise max_loras (vLLM --max-loras, now 1)"},
		{llmdiagv1.Language_LANGUAGE_ZH, "全部 1 个适配器槽位（max_lora）被 ", "LoRA 适配器：", "调高 max_loras（vLLM --max-loras，当前 1）"},
	}
	loras := 0
	for _, i := range judgedReadings(res, node) {
		r := res.Readings[node][i]
		if r.Cause == overload || !r.Diagnosis.GetRoutable() {
			t.Errorf("%s: %s at %v reads %v, routable %v: the queue never saturates", res.Options.Engine, node, r.At, r.Cause, r.Diagnosis.GetRoutable())
			return
		}
		if r.Cause != lora {
			continue
		}
		loras++
		m := r.Metrics
		names := []string{"sql", "chat", "code"}
		if len(m.GetLoraRunningAdapters()) != 1 || !slices.Contains(names, m.GetLoraRunningAdapters()[0]) ||
			slices.Contains(m.GetLoraWaitingAdapters(), m.GetLoraRunningAdapters()[0]) || m.GetMaxLora() != 1 {
			t.Errorf("%s: %s at %v: LORA_CONTENTION from adapters running %q, waiting %q, max_lora %v", res.Options.Engine, node, r.At,
				m.GetLoraRunningAdapters(), m.GetLoraWaitingAdapters(), m.GetMaxLora())
			return
		}
		for _, l := range langs {
			d := r.Diagnosis
			if l.lang != llmdiagv1.Language_LANGUAGE_EN {
				d = diagnose.Diagnose(diagnose.Input{Metrics: m, History: res.History(node, i), Profile: profileOf(res, node)},
					diagnose.DefaultThresholds(), l.lang)
			}
			named := d.GetRootCause() == lora && strings.Contains(d.GetSummary(), l.summary+m.GetLoraRunningAdapters()[0]) &&
				slices.ContainsFunc(d.GetEvidence(), func(e string) bool { return strings.HasPrefix(e, l.evidence) }) &&
				len(d.GetRecommendations()) > 0 && strings.HasPrefix(d.GetRecommendations()[0], l.rec)
			if !named {
				t.Errorf("%s: %s at %v (%v): the contention is not named:\n%s\n%s\n%s", res.Options.Engine, node, r.At, l.lang,
					d.GetSummary(), strings.Join(d.GetEvidence(), "\n"), strings.Join(d.GetRecommendations(), "\n"))
				return
			}
		}
	}
	if _, dev := deviations[caseKey{"lora-contention", res.Options.Engine, node, ""}]; !dev && loras == 0 {
		t.Errorf("%s: %s never reads LORA_CONTENTION", res.Options.Engine, node)
	}
	if _, dev := deviations[caseKey{"lora-contention", res.Options.Engine, node, ""}]; dev && loras > 0 {
		t.Errorf("%s: %s reads LORA_CONTENTION %d times in a schema without adapters", res.Options.Engine, node, loras)
	}
}
