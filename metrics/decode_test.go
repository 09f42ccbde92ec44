package metrics

import (
	"math"
	"testing"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

func TestPerRequestDecode(t *testing.T) {
	p50 := func(v float64) *llmdiagv1.Distribution {
		return &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.5, Value: v}, {Quantile: 0.99, Value: 10 * v}}}
	}
	onlyP99 := &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.99, Value: 0.1}}}
	for _, c := range []struct {
		name  string
		m     *llmdiagv1.NodeMetrics
		want  float64
		from  DecodeSource
		field *float64 // after SetPerRequestDecode
	}{
		{"seed: generation ÷ running", &llmdiagv1.NodeMetrics{GenerationTokensPerSecond: f(121), Running: f(40)}, 3.025, DecodeDerived, f(3.025)},
		{"derived before the latencies", &llmdiagv1.NodeMetrics{GenerationTokensPerSecond: f(100), Running: f(4), TimePerOutputToken: p50(0.02)}, 25, DecodeDerived, f(25)},
		{"nothing running: time per output token", &llmdiagv1.NodeMetrics{GenerationTokensPerSecond: f(121), Running: f(0), TimePerOutputToken: p50(0.04), InterToken: p50(0.02)}, 25, DecodeTPOT, f(25)},
		{"no generation counter: time per output token", &llmdiagv1.NodeMetrics{Running: f(40), TimePerOutputToken: p50(0.04)}, 25, DecodeTPOT, f(25)},
		{"no running gauge, no TPOT median: inter-token latency", &llmdiagv1.NodeMetrics{GenerationTokensPerSecond: f(121), TimePerOutputToken: onlyP99, InterToken: p50(0.05)}, 20, DecodeITL, f(20)},
		{"window without observations", &llmdiagv1.NodeMetrics{TimePerOutputToken: p50(math.NaN()), InterToken: p50(0)}, 0, DecodeUnknown, nil},
		{"negative or NaN inputs are unknown", &llmdiagv1.NodeMetrics{GenerationTokensPerSecond: f(-1), Running: f(math.NaN()), InterToken: p50(-0.1)}, 0, DecodeUnknown, nil},
		// A NodeMetrics carrying the speed without what it came from.
		{"reported", &llmdiagv1.NodeMetrics{DecodeTokensPerSecondPerRequest: f(42)}, 42, DecodeReported, nil},
		{"reported NaN", &llmdiagv1.NodeMetrics{DecodeTokensPerSecondPerRequest: f(math.NaN())}, 0, DecodeUnknown, nil},
		// What it came from wins over the value carried: they cannot disagree.
		{"reported and derivable", &llmdiagv1.NodeMetrics{GenerationTokensPerSecond: f(100), Running: f(4), DecodeTokensPerSecondPerRequest: f(42)}, 25, DecodeDerived, f(25)},
		{"nothing", &llmdiagv1.NodeMetrics{}, 0, DecodeUnknown, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, from := PerRequestDecode(c.m)
			if v != c.want || from != c.from {
				t.Errorf("PerRequestDecode = %v from %v, want %v from %v", v, from, c.want, c.from)
			}
			SetPerRequestDecode(c.m)
			if g := c.m.DecodeTokensPerSecondPerRequest; (g == nil) != (c.field == nil) || g != nil && *g != *c.field {
				t.Errorf("after SetPerRequestDecode the field is %s, want %s", testkit.Show(g), testkit.Show(c.field))
			}
			// Filled by SetPerRequestDecode, the field reads back the same
			// value from the same source.
			if c.field != nil {
				if v2, from2 := PerRequestDecode(c.m); v2 != v || from2 != from {
					t.Errorf("read back %v from %v, want %v from %v", v2, from2, v, from)
				}
			}
		})
	}
}
