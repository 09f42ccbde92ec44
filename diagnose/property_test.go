package diagnose_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// randomInput builds an input with every optional value independently
// present or absent and spread across every threshold's range.
func randomInput(r *rand.Rand) diagnose.Input {
	maybe := func(max float64) *float64 {
		if r.IntN(5) == 0 {
			return nil
		}
		switch r.IntN(6) {
		case 0:
			return f64(0)
		case 1:
			return f64(max)
		}
		u := r.Float64()
		return f64(u * u * u * max) // skewed low, so every rule gets its turn
	}
	latency := func(max float64) *llmdiagv1.Distribution {
		switch r.IntN(6) {
		case 0:
			return nil
		case 1:
			return &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.99, Value: math.NaN()}}}
		case 2:
			return &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.99, Value: max, LowerBound: max, UpperBound: math.Inf(1)}}}
		}
		p50 := r.Float64() * max / 4
		return dist(p50, p50+r.Float64()*max)
	}
	node := func(id string) *llmdiagv1.NodeMetrics {
		m := &llmdiagv1.NodeMetrics{
			Node: id, Model: "m", Engine: llmdiagv1.Engine(r.IntN(7)), Window: "5m",
			ObservedAt:                      timestamppb.New(observed),
			Stale:                           r.IntN(8) == 0,
			Up:                              r.IntN(8) != 0,
			Ttft:                            latency(60),
			E2E:                             latency(3600),
			TimePerOutputToken:              latency(1),
			InterToken:                      latency(2),
			QueueTime:                       latency(30),
			Queue:                           maybe(100),
			Running:                         maybe(200),
			QueueRunningRatio:               maybe(3),
			KvPressure:                      maybe(1),
			KvCapacityTokens:                maybe(1e6),
			PromptTokensPerSecond:           maybe(1e5),
			GenerationTokensPerSecond:       maybe(2000),
			DecodeTokensPerSecondPerRequest: maybe(60),
			PreemptionsPerSecond:            maybe(0.05),
			RequestsPerSecond:               maybe(20),
			AbortedRequestsPerSecond:        maybe(5),
		}
		for _, d := range []*llmdiagv1.Distribution{m.Ttft, m.QueueTime} {
			if d != nil && r.IntN(2) == 0 {
				d.Mean = f64(r.Float64() * 20)
			}
		}
		if r.IntN(4) != 0 {
			m.Staleness = durationpb.New(time.Duration(r.Int64N(int64(6 * time.Minute))))
		}
		if r.IntN(4) == 0 {
			m.Errors = []string{"read /metrics: unexpected EOF", "family  vllm:e2e_request_latency_seconds:\nbucket counts not cumulative"}
		}
		return m
	}

	in := diagnose.Input{Metrics: node("node-a")}
	if r.IntN(10) == 0 {
		in.Metrics = nil
	}
	for i := range r.IntN(20) {
		in.History = append(in.History, diagnose.Point{
			At:         observed.Add(-time.Duration(20-i) * time.Minute),
			Up:         r.IntN(10) != 0,
			Queue:      maybe(100),
			Running:    maybe(200),
			KVPressure: maybe(1),
			E2EMean:    maybe(600),
		})
	}
	if r.IntN(2) == 0 {
		in.Profile = &llmdiagv1.Profile{
			DataParallel:         uint32(r.IntN(9)),
			TensorParallel:       uint32(r.IntN(9)),
			ExpertParallel:       uint32(r.IntN(9)),
			ActiveParamsBillions: float64(r.IntN(80)),
		}
	}
	for i := range r.IntN(5) {
		p := node(string(rune('b' + i)))
		if in.Metrics != nil && r.IntN(2) == 0 {
			// A healthy twin: same load, a fifth of the latency.
			p = proto.Clone(in.Metrics).(*llmdiagv1.NodeMetrics)
			p.Node, p.Stale, p.Up = string(rune('b'+i)), false, true
			for _, q := range p.GetE2E().GetPercentiles() {
				q.Value /= 5
			}
		}
		in.Peers = append(in.Peers, p)
	}
	return in
}

// structure is everything of a diagnosis that must not depend on language.
func structure(d *llmdiagv1.Diagnosis) []any {
	s := []any{
		d.GetStatus(), d.GetRootCause(), d.GetRoutable(), d.GetLoadScore(), d.GetConfidence(), d.GetStale(),
		len(d.GetEvidence()), len(d.GetRuledOut()), len(d.GetRecommendations()), len(d.GetFindings()),
		d.GetSummary() == "",
	}
	for _, f := range d.GetFindings() {
		s = append(s, f.GetIndicator(), f.GetStatus(), len(f.GetEvidence()), f.GetValue() == "")
	}
	return s
}

func TestProperties(t *testing.T) {
	th := diagnose.DefaultThresholds()
	r := rand.New(rand.NewPCG(1, 2))
	core := []llmdiagv1.Indicator{
		llmdiagv1.Indicator_INDICATOR_KV_PRESSURE,
		llmdiagv1.Indicator_INDICATOR_QUEUE,
		llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO,
		llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE,
		llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE,
		llmdiagv1.Indicator_INDICATOR_E2E_P99,
	}
	causes := map[llmdiagv1.Cause]int{}
	n := 5000
	if testing.Short() {
		n = 500
	}
	for i := range n {
		in := randomInput(r)
		var before proto.Message
		if in.Metrics != nil {
			before = proto.Clone(in.Metrics)
		}
		en := diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_EN)
		zh := diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_ZH)
		causes[en.GetRootCause()]++
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf("input %d: "+format+"\ninput metrics: %v\nverdict: %v", append(append([]any{i}, args...), in.Metrics, en)...)
		}

		// Never healthy from stale or absent data.
		m := in.Metrics
		if m == nil || m.GetStale() || m.GetStaleness().AsDuration() > th.StaleAfter {
			if en.GetStatus() != unknown || en.GetRootCause() != llmdiagv1.Cause_CAUSE_NO_DATA || en.GetRoutable() {
				fail("stale or absent data gave %v / %v / routable %v", en.GetStatus(), en.GetRootCause(), en.GetRoutable())
			}
		}
		if en.GetStatus() == ok && (m == nil || m.GetStale() || !m.GetUp()) {
			fail("STATUS_OK without fresh data from a node that answers")
		}

		// Language changes words, never structure.
		if a, b := structure(en), structure(zh); !equalAny(a, b) {
			fail("structure depends on language:\n en %v\n zh %v", a, b)
		}
		if proto.Equal(en, zh) && len(en.GetFindings()) > 0 {
			fail("zh diagnosis identical to en")
		}

		// The six core rows come first, in order; absent values are UNKNOWN.
		if len(en.GetFindings()) < len(core) {
			fail("%d findings, want at least 6", len(en.GetFindings()))
			continue
		}
		for j, ind := range core {
			if en.GetFindings()[j].GetIndicator() != ind {
				fail("finding %d is %v, want %v", j, en.GetFindings()[j].GetIndicator(), ind)
			}
		}
		// The rows that appear only when they carry information.
		for _, f := range en.GetFindings()[len(core):] {
			switch f.GetIndicator() {
			case llmdiagv1.Indicator_INDICATOR_TTFT_P99, llmdiagv1.Indicator_INDICATOR_PREEMPTIONS, llmdiagv1.Indicator_INDICATOR_SCRAPE:
				if s := f.GetStatus(); s != warn && s != crit {
					fail("extra finding %v is %v: only when WARN or CRIT", f.GetIndicator(), s)
				}
			case llmdiagv1.Indicator_INDICATOR_ABORTS:
				// An unknown abort rate is UNKNOWN, never 0.
				if m.AbortedRequestsPerSecond == nil && f.GetStatus() != unknown {
					fail("aborts %v without an abort rate", f.GetStatus())
				}
			}
		}
		// HEALTHY only when nothing is off; anything off and unexplained
		// is UNEXPLAINED.
		offFindings := 0
		for _, f := range en.GetFindings() {
			if s := f.GetStatus(); s == warn || s == crit {
				offFindings++
			}
		}
		if en.GetRootCause() == llmdiagv1.Cause_CAUSE_HEALTHY && (offFindings > 0 || en.GetStatus() != ok) {
			fail("HEALTHY with %d findings off, status %v", offFindings, en.GetStatus())
		}
		if en.GetRootCause() == llmdiagv1.Cause_CAUSE_UNEXPLAINED && offFindings == 0 {
			fail("UNEXPLAINED with nothing off")
		}
		switch en.GetRootCause() {
		case llmdiagv1.Cause_CAUSE_PREFILL_BOUND:
			if m.GetTtft() == nil {
				fail("PREFILL_BOUND without a TTFT distribution")
			}
		case llmdiagv1.Cause_CAUSE_DECODE_BOUND:
			// A long E2E tail, or output stalling between tokens.
			stalls := false
			for _, f := range en.GetFindings() {
				if f.GetIndicator() == llmdiagv1.Indicator_INDICATOR_INTER_TOKEN && f.GetStatus() == crit {
					stalls = true
				}
			}
			if s := en.GetFindings()[5].GetStatus(); s != warn && s != crit && !stalls {
				fail("DECODE_BOUND with E2E P99 %v and no stalls between tokens", s)
			}
		}
		if m != nil {
			absent := []bool{
				m.KvPressure == nil,
				m.Queue == nil,
				(m.Queue == nil || m.Running == nil) && m.QueueRunningRatio == nil,
				m.PromptTokensPerSecond == nil,
				m.GenerationTokensPerSecond == nil,
				m.E2E == nil,
			}
			for j, a := range absent {
				if a && en.GetFindings()[j].GetStatus() != unknown {
					fail("%v is absent but its finding is %v", core[j], en.GetFindings()[j].GetStatus())
				}
			}
		}

		// Well-formed numbers and text; routable as the rules say; input untouched.
		if c := en.GetConfidence(); !(c >= 0 && c <= 1) {
			fail("confidence %v outside [0, 1]", c)
		}
		if s := en.GetLoadScore(); !(s >= 0) || math.IsInf(s, 0) {
			fail("load score %v", s)
		}
		// Routing follows saturation, and status, routable and score agree:
		// a score above 1 is a saturated node, which is not routable and
		// at least WARN; OK is routable with a score of at most 1.
		fresh := en.GetStatus() != unknown && en.GetStatus() != down
		saturated := en.GetLoadScore() > 1
		if en.GetRoutable() != (fresh && !saturated) {
			fail("routable %v with status %v and load score %v", en.GetRoutable(), en.GetStatus(), en.GetLoadScore())
		}
		if saturated && (!fresh || en.GetStatus() == ok) {
			fail("load score %v (saturated) with status %v", en.GetLoadScore(), en.GetStatus())
		}
		if en.GetRootCause() == llmdiagv1.Cause_CAUSE_OVERLOADED && en.GetStatus() == crit && en.GetRoutable() {
			fail("OVERLOADED and CRIT, yet routable")
		}
		for _, d := range []*llmdiagv1.Diagnosis{en, zh} {
			for _, s := range texts(d) {
				if strings.Contains(s, "%!") || strings.Contains(s, "NaN") || strings.Contains(s, "\n") {
					fail("malformed text %q", s)
				}
			}
		}
		if m != nil && !proto.Equal(before, m) {
			fail("Diagnose modified its input")
		}
		if again := diagnose.Diagnose(in, th, llmdiagv1.Language_LANGUAGE_EN); !proto.Equal(en, again) {
			fail("not deterministic")
		}
		// Unvalidated thresholds may give odd verdicts, never a panic.
		_ = diagnose.Diagnose(in, diagnose.Thresholds{}, llmdiagv1.Language_LANGUAGE_ZH)
	}
	// The generator must reach every cause, or the properties prove little.
	t.Logf("causes reached: %v", causes)
	for c := llmdiagv1.Cause_CAUSE_NO_DATA; c <= llmdiagv1.Cause_CAUSE_UNEXPLAINED; c++ {
		if causes[c] == 0 {
			t.Errorf("random inputs never reached %v (reached: %v)", c, causes)
		}
	}
}

func equalAny(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// texts is every human-readable string of d.
func texts(d *llmdiagv1.Diagnosis) []string {
	s := []string{d.GetSummary()}
	s = append(s, d.GetEvidence()...)
	s = append(s, d.GetRuledOut()...)
	s = append(s, d.GetRecommendations()...)
	for _, f := range d.GetFindings() {
		s = append(s, f.GetName(), f.GetValue(), f.GetConclusion())
		s = append(s, f.GetEvidence()...)
	}
	return s
}
