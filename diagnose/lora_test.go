package diagnose_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// loraInput is the LoRA shape of the simulator's lora-contention scenario
// (loraContention: adapter a holds the one slot, 3 running, 3 queued for
// b), on a node otherwise healthy, whose queue history reads the same
// for the last 10 minutes.
func loraInput(edit func(m *llmdiagv1.NodeMetrics)) diagnose.Input {
	m := healthyMetrics()
	loraContention(m)
	if edit != nil {
		edit(m)
	}
	return diagnose.Input{Metrics: m, History: flatHistory(10, m.GetQueue(), m.GetRunning())}
}

// TestLoRAContention: requests queued for an adapter that is not loaded,
// with every slot held by others, read LORA_CONTENTION; one adapter in use,
// a free slot, or an adapter waited for that also runs do not.
func TestLoRAContention(t *testing.T) {
	lora := llmdiagv1.Cause_CAUSE_LORA_CONTENTION
	for _, tc := range []struct {
		name   string
		in     diagnose.Input
		cause  llmdiagv1.Cause
		status llmdiagv1.Status
		// ruledOut must start some ruled-out line when the cause is not
		// LORA_CONTENTION; "" for none about LoRA adapters.
		ruledOut string
	}{
		{name: "one slot, two adapters, 3 running, 3 waiting", in: loraInput(nil), cause: lora, status: crit},
		{name: "a shorter queue: WARN", in: loraInput(func(m *llmdiagv1.NodeMetrics) {
			m.Queue, m.Running, m.QueueRunningRatio = f64(1), f64(4), f64(0.25)
		}), cause: lora, status: warn},
		{name: "two slots, both held, a third adapter waits", in: loraInput(func(m *llmdiagv1.NodeMetrics) {
			m.LoraAdaptersRunning, m.LoraAdaptersWaiting, m.MaxLora = f64(2), f64(1), f64(2)
			m.LoraRunningAdapters, m.LoraWaitingAdapters = []string{"a", "b"}, []string{"c"}
		}), cause: lora, status: crit},
		{name: "one adapter in use", in: loraInput(func(m *llmdiagv1.NodeMetrics) {
			m.LoraAdaptersWaiting = f64(0)
			m.LoraWaitingAdapters = nil
		}), cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: crit, ruledOut: "not LoRA adapters: no request waits"},
		{name: "max_lora not reached", in: loraInput(func(m *llmdiagv1.NodeMetrics) { m.MaxLora = f64(2) }),
			cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: crit, ruledOut: "not LoRA adapters: 1 of 2 adapter slots"},
		{name: "the adapter waited for is running", in: loraInput(func(m *llmdiagv1.NodeMetrics) {
			m.LoraWaitingAdapters = []string{"a"}
		}), cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: crit, ruledOut: "not LoRA adapters: some adapters waited for (a) are loaded"},
		{name: "one adapter waited for runs, another does not", in: loraInput(func(m *llmdiagv1.NodeMetrics) {
			m.LoraAdaptersWaiting = f64(2)
			m.LoraWaitingAdapters = []string{"a", "b"}
		}), cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: crit, ruledOut: "not LoRA adapters: some adapters waited for (a, b) are loaded"},
		{name: "max_lora not exported", in: loraInput(func(m *llmdiagv1.NodeMetrics) { m.MaxLora = nil }),
			cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: crit, ruledOut: "not known whether LoRA adapters explain it"},
		{name: "adapters without names", in: loraInput(func(m *llmdiagv1.NodeMetrics) {
			m.LoraRunningAdapters, m.LoraWaitingAdapters = nil, nil
		}), cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: crit, ruledOut: "not known whether LoRA adapters explain it"},
		{name: "no LoRA exported: nothing said of adapters", in: loraInput(func(m *llmdiagv1.NodeMetrics) {
			m.LoraAdaptersRunning, m.LoraAdaptersWaiting, m.MaxLora = nil, nil, nil
			m.LoraRunningAdapters, m.LoraWaitingAdapters = nil, nil
		}), cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, status: crit},
		{name: "a saturated queue is overload whatever it waits for", in: func() diagnose.Input {
			in := loraInput(func(m *llmdiagv1.NodeMetrics) { m.Queue, m.QueueRunningRatio = f64(40), f64(40.0/3) })
			in.History = flatHistory(10, 40, 3)
			return in
		}(), cause: llmdiagv1.Cause_CAUSE_OVERLOADED, status: crit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := diagnose.Diagnose(tc.in, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
			if d.GetRootCause() != tc.cause || d.GetStatus() != tc.status {
				t.Fatalf("%v %v, want %v %v: %s\nevidence %q", d.GetStatus(), d.GetRootCause(), tc.status, tc.cause, d.GetSummary(), d.GetEvidence())
			}
			if d.GetRoutable() != (tc.cause != llmdiagv1.Cause_CAUSE_OVERLOADED) {
				t.Errorf("routable %v: routing follows saturation, not adapter contention", d.GetRoutable())
			}
			if tc.cause == lora {
				return
			}
			i := slices.IndexFunc(d.GetRuledOut(), func(s string) bool { return strings.Contains(s, "LoRA") })
			switch {
			case tc.ruledOut == "" && i >= 0:
				t.Errorf("ruled out says %q, want nothing of LoRA adapters", d.GetRuledOut()[i])
			case tc.ruledOut != "" && (i < 0 || !strings.HasPrefix(d.GetRuledOut()[i], tc.ruledOut)):
				t.Errorf("ruled out %q, want a line starting %q", d.GetRuledOut(), tc.ruledOut)
			}
		})
	}
}

// TestLoRAContentionVerdict: the verdict names the adapters waited for,
// those holding the slots, max_lora and the queue, explains the queue
// findings, and recommends more slots or adapter-aware routing; in
// Chinese too, with the same structure.
func TestLoRAContentionVerdict(t *testing.T) {
	in := loraInput(func(m *llmdiagv1.NodeMetrics) {
		m.Ttft = dist(2, 25)
		m.QueueTime = dist(1.5, 20)
		m.QueueTime.Mean, m.Ttft.Mean = f64(3), f64(4)
	})
	en := diagnose.Diagnose(in, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
	zh := diagnose.Diagnose(in, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_ZH)
	if en.GetRootCause() != llmdiagv1.Cause_CAUSE_LORA_CONTENTION {
		t.Fatalf("cause %v, want LORA_CONTENTION: %s", en.GetRootCause(), en.GetSummary())
	}
	for _, want := range []string{"LoRA adapter(s) b", "all 1 adapter slot(s) (max_lora) are held by a", "3 waiting, 3 running"} {
		if !strings.Contains(en.GetSummary(), want) {
			t.Errorf("summary %q lacks %q", en.GetSummary(), want)
		}
	}
	ev := strings.Join(en.GetEvidence(), "\n")
	for _, want := range []string{"b waited for and not loaded; a hold the slots (max_lora 1)", "queue 3, running 3 (queue/running 1.00)", "TTFT P99"} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev)
		}
	}
	if strings.Contains(ev, "No cause") || strings.Contains(ev, "also off") {
		t.Errorf("evidence leaves something unexplained:\n%s", ev)
	}
	recs := strings.Join(en.GetRecommendations(), "\n")
	for _, want := range []string{"Raise max_loras", "now 1", "the 2 adapters in use", "Route each adapter's requests", "adapter(s) b"} {
		if !strings.Contains(recs, want) {
			t.Errorf("recommendations lack %q:\n%s", want, recs)
		}
	}
	if en.GetStatus() != zh.GetStatus() || en.GetRootCause() != zh.GetRootCause() ||
		len(en.GetEvidence()) != len(zh.GetEvidence()) || len(en.GetRecommendations()) != len(zh.GetRecommendations()) ||
		len(en.GetRuledOut()) != len(zh.GetRuledOut()) {
		t.Errorf("English and Chinese differ in structure")
	}
	if !strings.Contains(zh.GetSummary(), "LoRA 适配器 b") || !strings.Contains(zh.GetSummary(), "max_lora") {
		t.Errorf("Chinese summary %q", zh.GetSummary())
	}
	for lang, d := range map[string]*llmdiagv1.Diagnosis{"en": en, "zh": zh} {
		testkit.Golden(t, filepath.Join("testdata", "lora-contention."+lang+".json"), stableJSON(t, d))
	}
}
