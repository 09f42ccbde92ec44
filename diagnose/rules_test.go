package diagnose_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

var (
	ok      = llmdiagv1.Status_STATUS_OK
	warn    = llmdiagv1.Status_STATUS_WARN
	crit    = llmdiagv1.Status_STATUS_CRIT
	unknown = llmdiagv1.Status_STATUS_UNKNOWN
	down    = llmdiagv1.Status_STATUS_DOWN
)

func f64(v float64) *float64 { return &v }

var observed = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

// dist is a latency distribution with the given P50 and P99 (seconds); the
// bucket bounds are nominal.
func dist(p50, p99 float64) *llmdiagv1.Distribution {
	return &llmdiagv1.Distribution{
		Percentiles: []*llmdiagv1.Percentile{
			{Quantile: 0.5, Value: p50, LowerBound: p50 / 2, UpperBound: p50 * 2},
			{Quantile: 0.95, Value: (p50 + p99) / 2, LowerBound: p50, UpperBound: p99},
			{Quantile: 0.99, Value: p99, LowerBound: p99 / 2, UpperBound: p99 * 2},
		},
		Count: 1000,
	}
}

// healthyMetrics is a fresh, unremarkable node: every rule's counter-evidence.
func healthyMetrics() *llmdiagv1.NodeMetrics {
	return &llmdiagv1.NodeMetrics{
		Node: "node-a", Model: "m", Engine: llmdiagv1.Engine_ENGINE_VLLM, Window: "5m",
		ObservedAt: timestamppb.New(observed), Staleness: durationpb.New(10 * time.Second), Up: true,
		Ttft:                      dist(0.3, 0.8),
		E2E:                       dist(8, 20),
		Queue:                     f64(0),
		Running:                   f64(10),
		KvPressure:                f64(0.3),
		PromptTokensPerSecond:     f64(2000),
		GenerationTokensPerSecond: f64(400),
		PreemptionsPerSecond:      f64(0),
		RequestsPerSecond:         f64(1),
	}
}

// flatHistory is n one-minute refreshes with the given queue and running.
func flatHistory(n int, queue, running float64) []diagnose.Point {
	h := make([]diagnose.Point, n)
	for i := range h {
		h[i] = diagnose.Point{At: observed.Add(-time.Duration(n-i) * time.Minute), Up: true, Queue: f64(queue), Running: f64(running)}
	}
	return h
}

func peer(node string, e2eP99 float64) *llmdiagv1.NodeMetrics {
	m := healthyMetrics()
	m.Node = node
	m.E2E = dist(8, e2eP99)
	return m
}

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       func() diagnose.Input
		status   llmdiagv1.Status
		cause    llmdiagv1.Cause
		routable bool
	}{
		{
			name: "healthy",
			in: func() diagnose.Input {
				return diagnose.Input{Metrics: healthyMetrics(), History: flatHistory(10, 0, 10)}
			},
			status: ok, cause: llmdiagv1.Cause_CAUSE_HEALTHY, routable: true,
		},
		{
			name: "no data: stale flag",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.Stale = true
				return diagnose.Input{Metrics: m}
			},
			status: unknown, cause: llmdiagv1.Cause_CAUSE_NO_DATA,
		},
		{
			name: "no data: older than stale_after",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.Staleness = durationpb.New(10 * time.Minute)
				return diagnose.Input{Metrics: m}
			},
			status: unknown, cause: llmdiagv1.Cause_CAUSE_NO_DATA,
		},
		{
			name:   "no data: no metrics",
			in:     func() diagnose.Input { return diagnose.Input{} },
			status: unknown, cause: llmdiagv1.Cause_CAUSE_NO_DATA,
		},
		{
			name: "no data: nothing readable",
			in: func() diagnose.Input {
				return diagnose.Input{Metrics: &llmdiagv1.NodeMetrics{Node: "node-a", Up: true, Errors: []string{"unknown engine"}}}
			},
			status: unknown, cause: llmdiagv1.Cause_CAUSE_NO_DATA,
		},
		{
			name: "target down",
			in: func() diagnose.Input {
				return diagnose.Input{Metrics: &llmdiagv1.NodeMetrics{Node: "node-a", Up: false, Errors: []string{"dial tcp: connection refused"}}}
			},
			status: down, cause: llmdiagv1.Cause_CAUSE_TARGET_DOWN,
		},
		{
			name: "KV exhausted: KV pressure",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.KvPressure = f64(0.97)
				return diagnose.Input{Metrics: m}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED,
		},
		{
			name: "KV exhausted: preemptions",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.PreemptionsPerSecond = f64(0.5)
				return diagnose.Input{Metrics: m}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED,
		},
		{
			name: "KV exhausted wins over overload",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.KvPressure, m.Queue = f64(0.99), f64(80)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 80, 10)}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED,
		},
		{
			name: "overloaded: sustained queue",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.Queue = f64(60)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 60, 10)}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_OVERLOADED,
		},
		{
			name: "overloaded: no history, current value",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.Queue = f64(20)
				return diagnose.Input{Metrics: m}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_OVERLOADED,
		},
		{
			name: "burst: queueing now, history drains",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.Queue = f64(12)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_BURST, routable: true,
		},
		{
			name: "burst: drained spike, nothing else",
			in: func() diagnose.Input {
				h := flatHistory(10, 0, 10)
				h[4].Queue = f64(9)
				return diagnose.Input{Metrics: healthyMetrics(), History: h}
			},
			status: ok, cause: llmdiagv1.Cause_CAUSE_BURST, routable: true,
		},
		{
			name: "prefill bound",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.Ttft = dist(3, 25)
				m.PromptTokensPerSecond = f64(500000)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_PREFILL_BOUND, routable: true,
		},
		{
			name: "decode bound, no profile",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.GenerationTokensPerSecond = f64(30)
				m.E2E = dist(60, 300)
				return diagnose.Input{Metrics: m}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND, routable: true,
		},
		{
			name: "decode bound, critical tail",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.GenerationTokensPerSecond = f64(30)
				m.E2E = dist(600, 3600)
				return diagnose.Input{Metrics: m, Profile: &llmdiagv1.Profile{TensorParallel: 8, ActiveParamsBillions: 70}}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND, routable: true,
		},
		{
			name: "node outlier",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.E2E = dist(20, 90)
				return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 20), peer("c", 25), peer("d", 18)}}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_NODE_OUTLIER, routable: true,
		},
		{
			name: "node outlier: peers serving the same model contradict decode bound",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.GenerationTokensPerSecond = f64(30)
				m.E2E = dist(60, 300)
				return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 40), peer("c", 50)}}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_NODE_OUTLIER, routable: true,
		},
		{
			name: "not an outlier: peers are stale, down or serve another model",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.E2E = dist(20, 90)
				stale, dn, other := peer("b", 20), peer("c", 20), peer("d", 20)
				stale.Stale, dn.Up, other.Model = true, false, "other"
				return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{stale, dn, other, m}}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_HEALTHY, routable: true,
		},
		{
			name: "healthy cause, unexplained WARN: KV between warn and crit",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.KvPressure = f64(0.92)
				return diagnose.Input{Metrics: m}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_HEALTHY, routable: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			before := proto.Clone(in.Metrics)
			d := diagnose.Diagnose(in, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
			if d.GetStatus() != tc.status || d.GetRootCause() != tc.cause || d.GetRoutable() != tc.routable {
				t.Errorf("verdict = %v / %v / routable %v, want %v / %v / routable %v\nsummary: %s",
					d.GetStatus(), d.GetRootCause(), d.GetRoutable(), tc.status, tc.cause, tc.routable, d.GetSummary())
			}
			if d.GetSummary() == "" || len(d.GetEvidence()) == 0 || len(d.GetRecommendations()) == 0 {
				t.Errorf("summary %q, %d evidence, %d recommendations: want all", d.GetSummary(), len(d.GetEvidence()), len(d.GetRecommendations()))
			}
			if c := d.GetConfidence(); c <= 0 || c > 1 {
				t.Errorf("confidence %v outside (0, 1]", c)
			}
			if in.Metrics != nil && !proto.Equal(before, in.Metrics) {
				t.Error("Diagnose modified its input")
			}
		})
	}
}

func TestFindingDetails(t *testing.T) {
	th := diagnose.DefaultThresholds()
	find := func(d *llmdiagv1.Diagnosis, ind llmdiagv1.Indicator) *llmdiagv1.Finding {
		for _, f := range d.GetFindings() {
			if f.GetIndicator() == ind {
				return f
			}
		}
		return nil
	}

	t.Run("absent values are UNKNOWN and quote the errors", func(t *testing.T) {
		m := healthyMetrics()
		m.KvPressure, m.E2E = nil, nil
		m.Errors = []string{"family vllm:kv_cache_usage_perc: missing"}
		d := diagnose.Diagnose(diagnose.Input{Metrics: m}, th, llmdiagv1.Language_LANGUAGE_EN)
		for _, ind := range []llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_KV_PRESSURE, llmdiagv1.Indicator_INDICATOR_E2E_P99} {
			f := find(d, ind)
			if f.GetStatus() != unknown || !strings.Contains(f.GetConclusion(), "vllm:kv_cache_usage_perc") {
				t.Errorf("%v: %v %q, want UNKNOWN quoting the error", ind, f.GetStatus(), f.GetConclusion())
			}
		}
		s := find(d, llmdiagv1.Indicator_INDICATOR_SCRAPE)
		if s == nil || s.GetStatus() != warn || len(s.GetEvidence()) != 1 || !strings.Contains(s.GetEvidence()[0], "missing") {
			t.Errorf("scrape finding = %v, want WARN quoting the error", s)
		}
	})

	t.Run("extra findings only when they carry information", func(t *testing.T) {
		d := diagnose.Diagnose(diagnose.Input{Metrics: healthyMetrics()}, th, llmdiagv1.Language_LANGUAGE_EN)
		if n := len(d.GetFindings()); n != 6 {
			t.Errorf("healthy node: %d findings, want the six core ones", n)
		}
		m := healthyMetrics()
		m.Ttft = dist(5, 40)
		m.PreemptionsPerSecond = f64(0.002)
		h := flatHistory(6, 0, 10)
		for i := range h {
			h[i].E2EMean = f64(5 + float64(i)*3)
		}
		d = diagnose.Diagnose(diagnose.Input{Metrics: m, History: h}, th, llmdiagv1.Language_LANGUAGE_EN)
		for ind, want := range map[llmdiagv1.Indicator]llmdiagv1.Status{
			llmdiagv1.Indicator_INDICATOR_TTFT_P99:    crit,
			llmdiagv1.Indicator_INDICATOR_PREEMPTIONS: warn,
		} {
			if f := find(d, ind); f.GetStatus() != want {
				t.Errorf("%v = %v, want %v", ind, f, want)
			}
		}
		// The window's own mean (absent here) does not count; the history's
		// does: 5 s → 20 s.
		if f := find(d, llmdiagv1.Indicator_INDICATOR_E2E_MEAN); f.GetStatus() != warn {
			t.Errorf("E2E mean = %v, want WARN (rising)", f)
		}
	})

	t.Run("queue critical only when held", func(t *testing.T) {
		m := healthyMetrics()
		m.Queue = f64(80)
		h := flatHistory(10, 0, 10)
		h[9].Queue = f64(70) // one minute above 50: not yet 5
		d := diagnose.Diagnose(diagnose.Input{Metrics: m, History: h}, th, llmdiagv1.Language_LANGUAGE_EN)
		if f := find(d, llmdiagv1.Indicator_INDICATOR_QUEUE); f.GetStatus() != warn {
			t.Errorf("queue held 1 min: %v, want WARN", f.GetStatus())
		}
		d = diagnose.Diagnose(diagnose.Input{Metrics: m, History: flatHistory(10, 70, 10)}, th, llmdiagv1.Language_LANGUAGE_EN)
		if f := find(d, llmdiagv1.Indicator_INDICATOR_QUEUE); f.GetStatus() != crit {
			t.Errorf("queue held 10 min: %v, want CRIT", f.GetStatus())
		}
	})

	t.Run("E2E P99 in the +Inf bucket reads as a floor", func(t *testing.T) {
		m := healthyMetrics()
		m.E2E.Percentiles[2] = &llmdiagv1.Percentile{Quantile: 0.99, Value: 7680, LowerBound: 7680, UpperBound: math.Inf(1)}
		d := diagnose.Diagnose(diagnose.Input{Metrics: m}, th, llmdiagv1.Language_LANGUAGE_EN)
		if v := find(d, llmdiagv1.Indicator_INDICATOR_E2E_P99).GetValue(); v != "≥ 2.1 h (bucket 7680 s–+Inf)" {
			t.Errorf("value %q", v)
		}
	})

	t.Run("no observations in the window", func(t *testing.T) {
		m := healthyMetrics()
		m.E2E = &llmdiagv1.Distribution{Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.99, Value: math.NaN()}}}
		d := diagnose.Diagnose(diagnose.Input{Metrics: m}, th, llmdiagv1.Language_LANGUAGE_EN)
		if f := find(d, llmdiagv1.Indicator_INDICATOR_E2E_P99); f.GetStatus() != unknown || f.GetConclusion() != "No requests finished in the window" {
			t.Errorf("E2E = %v", f)
		}
	})
}

func TestLoadScore(t *testing.T) {
	th := diagnose.DefaultThresholds()
	for _, tc := range []struct {
		name string
		m    *llmdiagv1.NodeMetrics
		want float64
	}{
		{"nil", nil, 0},
		{"nothing known", &llmdiagv1.NodeMetrics{}, 0},
		{"idle", &llmdiagv1.NodeMetrics{Queue: f64(0), KvPressure: f64(0)}, 0},
		{"KV at router saturation", &llmdiagv1.NodeMetrics{Queue: f64(0), KvPressure: f64(0.8)}, 1},
		{"queue at router saturation", &llmdiagv1.NodeMetrics{Queue: f64(5), KvPressure: f64(0.1)}, 1},
		{"overloaded", &llmdiagv1.NodeMetrics{Queue: f64(50), KvPressure: f64(0.5)}, 10},
		{"seed", &llmdiagv1.NodeMetrics{Queue: f64(0), KvPressure: f64(0.3), Running: f64(40)}, 0.375},
	} {
		if got := diagnose.LoadScore(tc.m, th); got != tc.want {
			t.Errorf("%s: LoadScore = %v, want %v", tc.name, got, tc.want)
		}
	}
	th.MaxRunning = 50
	if got := diagnose.LoadScore(&llmdiagv1.NodeMetrics{Running: f64(40), KvPressure: f64(0.3)}, th); got != 0.8 {
		t.Errorf("with max_running 50, 40 running: %v, want 0.8", got)
	}
}
