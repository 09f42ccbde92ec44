package diagnose_test

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// inconsistentWeight mirrors diagnose's: what each contradiction takes off
// the confidence.
const inconsistentWeight = 0.1

// Contradictory inputs become one evidence line naming what llmdiag read
// instead, a note on the findings they affect, and a lower confidence: the
// confidence of the twin input that reads what llmdiag read instead, less
// inconsistentWeight. Inputs that only look contradictory change nothing.
func TestContradictions(t *testing.T) {
	th := diagnose.DefaultThresholds()
	kv := llmdiagv1.Indicator_INDICATOR_KV_PRESSURE
	for _, tc := range []struct {
		name string
		in   func() diagnose.Input
		// twin reads what llmdiag read instead; nil when the check must not
		// fire (the input is its own twin) or has no twin.
		twin       func() diagnose.Input
		evidence   string // in the verdict's evidence (English); "" for none
		zh         string // the same line in Chinese
		ind        llmdiagv1.Indicator
		note       string // in ind's finding's evidence
		conclusion string // ind's conclusion, when set
		value      string // ind's value, when set
		status     llmdiagv1.Status
		cause      llmdiagv1.Cause
	}{
		{
			name:     "negative generation rate: unknown",
			in:       withMetrics(func(m *llmdiagv1.NodeMetrics) { m.GenerationTokensPerSecond = f64(-12) }),
			twin:     withMetrics(func(m *llmdiagv1.NodeMetrics) { m.GenerationTokensPerSecond = nil }),
			evidence: "negative readings, read as unknown: Generation token rate -12 (a rate taken across a counter reset, or a broken gauge)",
			zh:       "读数为负，按未知处理：Generation Token Rate -12",
			ind:      llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, note: "Generation token rate read -12, below 0: read as unknown",
			conclusion: "Unknown: Generation token rate read -12, below 0: read as unknown",
			status:     unknown, cause: llmdiagv1.Cause_CAUSE_HEALTHY,
		},
		{
			name: "negative preemptions and aborts: one line",
			in: withMetrics(func(m *llmdiagv1.NodeMetrics) {
				m.PreemptionsPerSecond, m.AbortedRequestsPerSecond = f64(-0.02), f64(-0.5)
			}),
			twin:     withMetrics(func(m *llmdiagv1.NodeMetrics) { m.PreemptionsPerSecond, m.AbortedRequestsPerSecond = nil, nil }),
			evidence: "negative readings, read as unknown: Preemptions -0.02, Aborted requests -0.5",
			zh:       "读数为负，按未知处理：抢占 -0.02、中止请求 -0.5",
			ind:      llmdiagv1.Indicator_INDICATOR_ABORTS, note: "Aborted requests read -0.5, below 0",
			status: unknown, cause: llmdiagv1.Cause_CAUSE_HEALTHY,
		},
		{
			name:     "negative KV pressure: unknown, never a free cache",
			in:       withMetrics(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = f64(-0.3) }),
			twin:     withMetrics(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = nil }),
			evidence: "negative readings, read as unknown: KV cache pressure -0.3",
			zh:       "读数为负，按未知处理：KV Cache 压力 -0.3",
			ind:      kv, note: "KV cache pressure read -0.3, below 0: read as unknown",
			conclusion: "Unknown: KV cache pressure read -0.3, below 0: read as unknown",
			status:     unknown, cause: llmdiagv1.Cause_CAUSE_HEALTHY,
		},
		{
			name:     "KV pressure a little above 1: read as 1",
			in:       withMetrics(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = f64(1.03) }),
			twin:     withMetrics(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = f64(1) }),
			evidence: "KV pressure read ~103%, above 100%: read as 100%",
			zh:       "KV 压力读数为 ~103%，超过 100%：按 100% 处理",
			ind:      kv, note: "KV pressure read ~103%, above 100%: read as 100%",
			value:  "~100%",
			status: crit, cause: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED,
		},
		{
			name:     "KV pressure far above 1: unknown",
			in:       withMetrics(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = f64(2.4) }),
			twin:     withMetrics(func(m *llmdiagv1.NodeMetrics) { m.KvPressure = nil }),
			evidence: "KV pressure read ~240%, far above 100%: not a share of the cache (a sum over ranks, or a percentage?), so read as unknown",
			zh:       "KV 压力读数为 ~240%，远超 100%",
			ind:      kv, note: "far above 100%",
			conclusion: "Unknown: KV pressure read ~240%, far above 100%: not a share of the cache (a sum over ranks, or a percentage?), so read as unknown",
			status:     unknown, cause: llmdiagv1.Cause_CAUSE_HEALTHY,
		},
		{
			name: "running stuck at 0 while tokens come out: unknown",
			in:   func() diagnose.Input { return stuckRunningInput(true) },
			twin: func() diagnose.Input {
				in := stuckRunningInput(true)
				in.Metrics.Running = nil
				return in
			},
			evidence: "running reads 0 now and at the 3 refreshes before, yet the generation rate (400 tok/s now) rose between them",
			zh:       "运行中请求数在当前及之前 3 次刷新中均为 0",
			ind:      llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, note: "so running is read as unknown",
			conclusion: "Unknown: running reads 0 now",
			status:     unknown, cause: llmdiagv1.Cause_CAUSE_HEALTHY,
		},
		{
			name: "running 0 with the generation rate falling: just gone idle, no contradiction",
			in:   func() diagnose.Input { return stuckRunningInput(false) },
			ind:  llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, value: "0.00",
			status: ok, cause: llmdiagv1.Cause_CAUSE_HEALTHY,
		},
		{
			name: "running 0 for fewer refreshes than the check needs: no contradiction",
			in: func() diagnose.Input {
				in := stuckRunningInput(true)
				for i := range in.History[:len(in.History)-2] {
					in.History[i].Running = f64(10)
				}
				return in
			},
			ind: llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, value: "∞",
			status: warn,
		},
		{
			// The field case: "~100% queued … but TTFT is short".
			name: "mean TTFT far below the mean queue time: TTFT leaves the queue out",
			in: withMetrics(func(m *llmdiagv1.NodeMetrics) {
				m.Ttft = dist(0.15, 0.6)
				m.Ttft.Mean = f64(0.2)
				m.QueueTime = dist(6, 25)
				m.QueueTime.Mean = f64(7.6)
			}),
			evidence: "mean TTFT 200 ms is below the mean queue time 7.6 s: this engine's TTFT leaves the queue out, so the wait for the first token is read as queue time + TTFT",
			zh:       "平均 TTFT 200 毫秒 低于平均排队时间 7.6 秒：该引擎的 TTFT 不含排队",
			ind:      llmdiagv1.Indicator_INDICATOR_QUEUE_TIME,
			note:     "the first token came 7.8 s after arrival, ~97% of it queued",
			value:    "~97% of the wait", conclusion: "The first token is late because requests wait in the queue",
			status: warn, cause: llmdiagv1.Cause_CAUSE_BURST,
		},
		{
			name: "mean TTFT a little below the mean queue time: queue time is all of TTFT",
			in: withMetrics(func(m *llmdiagv1.NodeMetrics) {
				m.Ttft = dist(3, 25)
				m.Ttft.Mean = f64(4)
				m.QueueTime = dist(3, 22)
				m.QueueTime.Mean = f64(5)
			}),
			twin: withMetrics(func(m *llmdiagv1.NodeMetrics) {
				m.Ttft = dist(3, 25)
				m.Ttft.Mean = f64(4)
				m.QueueTime = dist(3, 22)
				m.QueueTime.Mean = f64(4)
			}),
			evidence: "mean TTFT 4 s is below the mean queue time 5 s, which TTFT includes: the two histograms count different requests",
			zh:       "平均 TTFT 4 秒 低于其所包含的平均排队时间 5 秒",
			ind:      llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, note: "so queue time is read as all of TTFT",
			value:  "~100% of TTFT",
			status: warn, cause: llmdiagv1.Cause_CAUSE_BURST,
		},
		{
			name: "mean TTFT above the mean queue time: no contradiction",
			in: withMetrics(func(m *llmdiagv1.NodeMetrics) {
				m.Ttft.Mean = f64(0.4)
				m.QueueTime = dist(0.2, 0.6)
				m.QueueTime.Mean = f64(0.3)
			}),
			ind: llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, value: "~75% of TTFT", conclusion: "Mostly queue time, but TTFT is short",
			status: ok, cause: llmdiagv1.Cause_CAUSE_HEALTHY,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			before := proto.Clone(in.Metrics)
			d := diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_EN)
			if !proto.Equal(before, in.Metrics) {
				t.Error("Diagnose modified its input")
			}
			ev := strings.Join(d.GetEvidence(), "\n")
			switch {
			case tc.evidence == "":
				for _, w := range []string{"read as unknown", "read as 100%", "below the mean queue time"} {
					if strings.Contains(ev, w) {
						t.Errorf("a contradiction where there is none: %q", d.GetEvidence())
					}
				}
			case strings.Count(ev, tc.evidence) != 1:
				t.Errorf("evidence lacks one line with %q: %q", tc.evidence, d.GetEvidence())
			}
			if tc.zh != "" {
				zh := diagnose.Diagnose(tc.in(), th, llmdiagv1.Language_LANGUAGE_ZH)
				if !strings.Contains(strings.Join(zh.GetEvidence(), "\n"), tc.zh) {
					t.Errorf("Chinese evidence lacks %q: %q", tc.zh, zh.GetEvidence())
				}
				if len(zh.GetEvidence()) != len(d.GetEvidence()) {
					t.Errorf("%d Chinese evidence lines, %d English", len(zh.GetEvidence()), len(d.GetEvidence()))
				}
			}
			f := findingOf(d, tc.ind)
			if f == nil {
				t.Fatalf("no %v finding", tc.ind)
			}
			if tc.note != "" && !strings.Contains(strings.Join(f.GetEvidence(), "\n"), tc.note) {
				t.Errorf("%v evidence lacks %q: %q", tc.ind, tc.note, f.GetEvidence())
			}
			if tc.conclusion != "" && !strings.HasPrefix(f.GetConclusion(), tc.conclusion) {
				t.Errorf("%v conclusion %q, want %q", tc.ind, f.GetConclusion(), tc.conclusion)
			}
			if tc.value != "" && f.GetValue() != tc.value {
				t.Errorf("%v value %q, want %q", tc.ind, f.GetValue(), tc.value)
			}
			if f.GetStatus() != tc.status {
				t.Errorf("%v status %v, want %v", tc.ind, f.GetStatus(), tc.status)
			}
			if tc.cause != llmdiagv1.Cause_CAUSE_UNSPECIFIED && d.GetRootCause() != tc.cause {
				t.Errorf("cause %v, want %v: %s", d.GetRootCause(), tc.cause, d.GetSummary())
			}
			if tc.twin == nil {
				return
			}
			tw := diagnose.Diagnose(tc.twin(), th, llmdiagv1.Language_LANGUAGE_EN)
			if tw.GetRootCause() != d.GetRootCause() || tw.GetStatus() != d.GetStatus() {
				t.Errorf("verdict %v / %v, its twin's %v / %v", d.GetRootCause(), d.GetStatus(), tw.GetRootCause(), tw.GetStatus())
			}
			if want := tw.GetConfidence() - inconsistentWeight; math.Abs(d.GetConfidence()-want) > 1e-9 {
				t.Errorf("confidence %v, want its twin's %v less %v", d.GetConfidence(), tw.GetConfidence(), inconsistentWeight)
			}
			if len(d.GetEvidence()) != len(tw.GetEvidence())+1 {
				t.Errorf("%d evidence lines, want its twin's %d and one more: %q", len(d.GetEvidence()), len(tw.GetEvidence()), d.GetEvidence())
			}
		})
	}
}

// Two contradictions take twice the weight off, one line each.
func TestContradictionsAddUp(t *testing.T) {
	th := diagnose.DefaultThresholds()
	in := withMetrics(func(m *llmdiagv1.NodeMetrics) { m.KvPressure, m.PromptTokensPerSecond = f64(1.02), f64(-5) })()
	twin := withMetrics(func(m *llmdiagv1.NodeMetrics) { m.KvPressure, m.PromptTokensPerSecond = f64(1), nil })()
	d, tw := diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_EN), diagnose.Diagnose(twin, th, llmdiagv1.Language_LANGUAGE_EN)
	if want := tw.GetConfidence() - 2*inconsistentWeight; math.Abs(d.GetConfidence()-want) > 1e-9 {
		t.Errorf("confidence %v, want %v", d.GetConfidence(), want)
	}
	if len(d.GetEvidence()) != len(tw.GetEvidence())+2 {
		t.Errorf("evidence %q, want its twin's %q and two lines", d.GetEvidence(), tw.GetEvidence())
	}
}

// withMetrics is a healthy node with ten flat refreshes behind it, edited.
func withMetrics(edit func(m *llmdiagv1.NodeMetrics)) func() diagnose.Input {
	return func() diagnose.Input {
		m := healthyMetrics()
		edit(m)
		return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
	}
}
