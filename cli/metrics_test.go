package cli

import (
	"strings"
	"testing"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestPrintMetricsDecodeSource: `llmdiag metrics` shows the per-request
// decode speed, and where it comes from when not generation ÷ running.
func TestPrintMetricsDecodeSource(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	p50 := &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.5, Value: 0.04}}}
	for _, c := range []struct {
		name string
		m    *llmdiagv1.NodeMetrics
		want string
	}{
		{"derived", &llmdiagv1.NodeMetrics{GenerationTokensPerSecond: f(100), Running: f(4), DecodeTokensPerSecondPerRequest: f(25)}, "decode per request  25 tok/s\n"},
		{"time per output token", &llmdiagv1.NodeMetrics{Running: f(0), TimePerOutputToken: p50, DecodeTokensPerSecondPerRequest: f(25)}, "decode per request  25 tok/s (1 ÷ P50 time per output token)\n"},
		{"inter-token latency", &llmdiagv1.NodeMetrics{InterToken: p50, DecodeTokensPerSecondPerRequest: f(25)}, "decode per request  25 tok/s (1 ÷ P50 inter-token latency)\n"},
		{"unknown", &llmdiagv1.NodeMetrics{}, "decode per request  unknown\n"},
	} {
		var b strings.Builder
		if err := printMetrics(&b, c.m); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%s: output lacks %q:\n%s", c.name, c.want, b.String())
		}
	}
}
