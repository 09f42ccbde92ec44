package diagnose

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
)

// TestPerRequestDecodeAgreesWithMetrics: for the same samples, the
// decode_tokens_per_second_per_request metrics.Compute answers (what
// `llmdiag metrics` shows) is the speed the rules read, before and after the
// wire, with the source the evidence names.
func TestPerRequestDecodeAgreesWithMetrics(t *testing.T) {
	t0 := time.Date(2026, 1, 13, 12, 0, 0, 0, time.UTC)
	inf := math.Inf(1)
	bounds := []float64{0.01, 0.05, inf}
	// n requests, each with a time per output token between 10 and 50 ms.
	hist := func(n float64) *sample.Histogram {
		return &sample.Histogram{Bounds: bounds, Counts: []float64{0, n, n}, Sum: n * 0.03, Count: n}
	}
	base := &sample.Sample{At: t0, Up: true, GenerationTokens: sample.F(1000), Running: sample.F(2)}
	for _, c := range []struct {
		name    string
		newest  *sample.Sample
		want    float64
		from    perRequestSource
		unknown bool
	}{
		{
			name:   "generation ÷ running",
			newest: &sample.Sample{At: t0.Add(time.Minute), Up: true, GenerationTokens: sample.F(7000), Running: sample.F(4)},
			// 6000 tokens over 60 s, 4 running.
			want: 25, from: perRequestDerived,
		},
		{
			// Nothing running at the read, so no
			// generation ÷ running, yet the TPOT histogram tells.
			name: "nothing running: time per output token",
			newest: &sample.Sample{
				At: t0.Add(time.Minute), Up: true, GenerationTokens: sample.F(7000), Running: sample.F(0),
				Hists: [sample.NumHists]*sample.Histogram{sample.TPOT: hist(8)},
			},
			// Rank 4 of 8 in le=0.05: 0.01 + 0.04·4/8 = 0.03 s.
			want: 1 / 0.03, from: perRequestTPOT,
		},
		{
			name: "inter-token latency",
			newest: &sample.Sample{
				At: t0.Add(time.Minute), Up: true,
				Hists: [sample.NumHists]*sample.Histogram{sample.ITL: hist(8)},
			},
			want: 1 / 0.03, from: perRequestITL,
		},
		{
			name:    "nothing to tell",
			newest:  &sample.Sample{At: t0.Add(time.Minute), Up: true, Running: sample.F(0)},
			unknown: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			nm := metrics.Compute(c.newest, base, "1m", nil, c.newest.At, time.Minute)
			b, err := protojson.Marshal(nm)
			if err != nil {
				t.Fatal(err)
			}
			wire := &llmdiagv1.NodeMetrics{}
			if err := protojson.Unmarshal(b, wire); err != nil {
				t.Fatal(err)
			}
			for _, m := range []*llmdiagv1.NodeMetrics{nm, wire} {
				f := observe(Input{Metrics: m}, DefaultThresholds())
				field := m.DecodeTokensPerSecondPerRequest
				if c.unknown {
					if field != nil || f.perRequest.ok {
						t.Errorf("metrics %v, rules %v; want both unknown", field, f.perRequest)
					}
					continue
				}
				if field == nil || !f.perRequest.ok || *field != f.perRequest.v {
					t.Fatalf("metrics says %v, the rules read %v: they must agree", field, f.perRequest)
				}
				if math.Abs(f.perRequest.v-c.want) > 1e-9 || f.perRequestFrom != c.from {
					t.Errorf("%v tok/s from %v, want %v from %v", f.perRequest.v, f.perRequestFrom, c.want, c.from)
				}
			}
		})
	}
}
