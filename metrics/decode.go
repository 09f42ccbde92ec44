package metrics

import (
	"math"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// DecodeSource says where a per-request decode speed comes from.
type DecodeSource int

// The sources of PerRequestDecode, in the order it tries them.
const (
	// DecodeUnknown: nothing gives a speed.
	DecodeUnknown DecodeSource = iota
	// DecodeDerived: the generation token rate shared by the requests
	// running.
	DecodeDerived
	// DecodeTPOT: 1 / the P50 time per output token.
	DecodeTPOT
	// DecodeITL: 1 / the P50 inter-token latency.
	DecodeITL
	// DecodeReported: decode_tokens_per_second_per_request as the input
	// carries it, with none of the above to compute it from.
	DecodeReported
)

// String names the source.
func (s DecodeSource) String() string {
	switch s {
	case DecodeDerived:
		return "derived"
	case DecodeTPOT:
		return "time per output token"
	case DecodeITL:
		return "inter-token latency"
	case DecodeReported:
		return "reported"
	}
	return "unknown"
}

// PerRequestDecode is the decode speed one request sees, in tokens per
// second, and where it comes from, the first of: the generation token rate ÷
// running (with running above 0); 1 / the P50 time per output token; 1 / the
// P50 inter-token latency (each when its distribution lists the 0.5 quantile
// with a value above 0: a window without observations has none); m's own
// decode_tokens_per_second_per_request. NaN, infinite and negative inputs
// count as unknown.
//
// It is the one definition of the quantity: Compute and the Prometheus source
// fill NodeMetrics.decode_tokens_per_second_per_request with it
// (SetPerRequestDecode), and the verdict rules read it, so that `llmdiag
// metrics` and `llmdiag diagnose` agree. A NodeMetrics filled that way gives
// back the same value from the same source; the reported value is used only
// when the input carries it without what it was computed from.
func PerRequestDecode(m *llmdiagv1.NodeMetrics) (speed float64, from DecodeSource) {
	gen, running := usable(m.GenerationTokensPerSecond), usable(m.Running)
	if gen != nil && running != nil && *running > 0 {
		return *gen / *running, DecodeDerived
	}
	if p := median(m.GetTimePerOutputToken()); p > 0 {
		return 1 / p, DecodeTPOT
	}
	if p := median(m.GetInterToken()); p > 0 {
		return 1 / p, DecodeITL
	}
	if v := usable(m.DecodeTokensPerSecondPerRequest); v != nil {
		return *v, DecodeReported
	}
	return 0, DecodeUnknown
}

// SetPerRequestDecode sets m.DecodeTokensPerSecondPerRequest to
// PerRequestDecode of m's other fields (never of its own former value), or
// clears it when they give none.
func SetPerRequestDecode(m *llmdiagv1.NodeMetrics) {
	m.DecodeTokensPerSecondPerRequest = nil
	if v, from := PerRequestDecode(m); from != DecodeUnknown {
		m.DecodeTokensPerSecondPerRequest = sample.F(v)
	}
}

// usable is p when it holds a finite value of at least 0, else nil.
func usable(p *float64) *float64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) || *p < 0 {
		return nil
	}
	return p
}

// median is the value d lists for the 0.5 quantile; 0 when it lists none or
// an unusable one.
func median(d *llmdiagv1.Distribution) float64 {
	for _, p := range d.GetPercentiles() {
		if math.Abs(p.GetQuantile()-0.5) < 1e-9 {
			if v := usable(&p.Value); v != nil && !math.IsInf(1 / *v, 0) {
				return *v
			}
			return 0
		}
	}
	return 0
}
