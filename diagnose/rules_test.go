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

// burstMetrics is the simulator's burst scenario between bursts: a node
// with 20 batch slots, queue empty now, TTFT P99 19 s from the last burst's
// wait, E2E P99 49 s, KV 14%.
func burstMetrics() *llmdiagv1.NodeMetrics {
	m := healthyMetrics()
	m.Model = "kimi-k2.6"
	m.Ttft = dist(0.33, 19)
	m.Ttft.Mean = f64(1.5)
	m.E2E = dist(10, 49)
	m.Running = f64(7)
	m.KvPressure = f64(0.14)
	m.PromptTokensPerSecond = f64(5500)
	m.GenerationTokensPerSecond = f64(582)
	return m
}

// burstHistory is n refreshes 5 s apart with a 10 s burst every 2 minutes:
// the queue jumps to 37 and drains over the next 30 s. With stuck set it
// never drains below 10.
func burstHistory(n int, stuck bool) []diagnose.Point {
	h := make([]diagnose.Point, n)
	for i := range h {
		q := 0.0
		switch phase := (i + 10) % 24; {
		case phase < 2:
			q = 37
		case phase < 7:
			q = float64(37 - 7*(phase-1))
		}
		if stuck {
			q = max(q, 10)
		}
		running := 7.0
		if q > 0 {
			running = 20
		}
		h[i] = diagnose.Point{At: observed.Add(-time.Duration(n-i) * 5 * time.Second), Up: true, Queue: f64(q), Running: f64(running), KVPressure: f64(0.14)}
	}
	return h
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
			// Preemptions over the window, KV not saturated now: routing
			// follows saturation now.
			status: crit, cause: llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, routable: true,
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
			status: warn, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, routable: true,
		},
		{
			name: "unexplained WARN: KV between warn and crit",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.KvPressure = f64(0.92)
				return diagnose.Input{Metrics: m}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, routable: true,
		},
		{
			name: "burst: simulator shape, spikes drained, TTFT tail explained",
			in: func() diagnose.Input {
				m := burstMetrics()
				return diagnose.Input{Metrics: m, History: burstHistory(120, false)}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_BURST, routable: true,
		},
		{
			name: "burst: simulator shape, queueing now",
			in: func() diagnose.Input {
				m := burstMetrics()
				m.Queue = f64(30)
				return diagnose.Input{Metrics: m, History: burstHistory(120, false)}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_BURST, routable: true,
		},
		{
			name: "burst: heavy prompts, but the queue spiked: not prefill",
			in: func() diagnose.Input {
				m := burstMetrics()
				m.RequestsPerSecond = f64(0.3) // ~18k prompt tokens per request
				return diagnose.Input{Metrics: m, History: burstHistory(120, false)}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_BURST, routable: true,
		},
		{
			name: "burst: TTFT mostly queue time, waits shorter than a refresh",
			in: func() diagnose.Input {
				m := burstMetrics()
				m.Ttft.Mean, m.QueueTime = f64(4), dist(2, 15)
				m.QueueTime.Mean = f64(3)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 7)}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_BURST, routable: true,
		},
		{
			// A ratio blip (2 waiting behind 1 running) at a light load is
			// not a burst, then or later.
			name: "healthy: a small ratio blip long ago is no burst",
			in: func() diagnose.Input {
				h := flatHistory(60, 0, 1)
				h[10].Queue, h[10].Running = f64(2), f64(1)
				m := healthyMetrics()
				m.Running = f64(1)
				return diagnose.Input{Metrics: m, History: h}
			},
			status: ok, cause: llmdiagv1.Cause_CAUSE_HEALTHY, routable: true,
		},
		{
			// Dynamo's frontend counts requests still in prefill as queued:
			// a few of them with 70k-token prompts and a 35 s TTFT tail is
			// prefill, not a burst.
			name: "prefill bound: a small queue of prompts in prefill is no burst",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.Ttft = dist(6, 35)
				m.Queue, m.Running = f64(4), f64(1)
				m.PromptTokensPerSecond, m.RequestsPerSecond = f64(7000), f64(0.1)
				h := flatHistory(60, 0, 1)
				for i := 0; i < 60; i += 3 {
					h[i].Queue = f64(4)
				}
				return diagnose.Input{Metrics: m, History: h}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_PREFILL_BOUND, routable: true,
		},
		{
			// DeepSeek with DP attention and EP: a prefill on one rank
			// stalls decode on all of them; per-request decode and the E2E
			// tail are fine for now, the gaps between tokens are not.
			name: "decode bound: stalls between tokens",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.InterToken = dist(0.2, 2.3)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10),
					Profile: &llmdiagv1.Profile{DataParallel: 8, ExpertParallel: 8, ActiveParamsBillions: 37}}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND, routable: true,
		},
		{
			name: "unexplained: stalls between tokens, and aborts decode does not explain",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.InterToken = dist(0.2, 2.3)
				m.AbortedRequestsPerSecond = f64(0.5)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, routable: true,
		},
		{
			name: "overloaded: the queue never drains between bursts",
			in: func() diagnose.Input {
				m := burstMetrics()
				m.Queue = f64(30)
				return diagnose.Input{Metrics: m, History: burstHistory(120, true)}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_OVERLOADED,
		},
		{
			name: "prefill bound: queue-time split says prefill",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.Ttft = dist(3, 25)
				m.Ttft.Mean = f64(5)
				m.QueueTime = dist(0.1, 0.5)
				m.QueueTime.Mean = f64(0.2)
				m.PromptTokensPerSecond = f64(500000)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_PREFILL_BOUND, routable: true,
		},
		{
			name: "unexplained CRIT: aborts",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.AbortedRequestsPerSecond = f64(0.4)
				return diagnose.Input{Metrics: m, History: flatHistory(10, 0, 10)}
			},
			status: crit, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, routable: true,
		},
		{
			name: "unexplained: inter-token stalls",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.InterToken = dist(0.05, 0.5)
				return diagnose.Input{Metrics: m}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, routable: true,
		},
		{
			name: "unexplained: mean E2E rising over the history",
			in: func() diagnose.Input {
				h := flatHistory(20, 0, 10)
				for i := range h {
					h[i].E2EMean = f64(5 + float64(i)*0.5)
				}
				return diagnose.Input{Metrics: healthyMetrics(), History: h}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, routable: true,
		},
		{
			name: "healthy: mean E2E falling",
			in: func() diagnose.Input {
				h := flatHistory(20, 0, 10)
				for i := range h {
					h[i].E2EMean = f64(20 - float64(i)*0.7)
				}
				return diagnose.Input{Metrics: healthyMetrics(), History: h}
			},
			status: ok, cause: llmdiagv1.Cause_CAUSE_HEALTHY, routable: true,
		},
		{
			name: "decode bound with a slow peer group: a model characteristic",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.GenerationTokensPerSecond = f64(30)
				m.E2E = dist(60, 300)
				return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 280), peer("c", 320)},
					Profile: &llmdiagv1.Profile{DataParallel: 8, TensorParallel: 1, ActiveParamsBillions: 37, TotalParamsBillions: 671}}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_DECODE_BOUND, routable: true,
		},
		{
			name: "unexplained: slow E2E shared by the whole group",
			in: func() diagnose.Input {
				m := healthyMetrics()
				m.E2E = dist(20, 90)
				return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 80), peer("c", 100)}}
			},
			status: warn, cause: llmdiagv1.Cause_CAUSE_UNEXPLAINED, routable: true,
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
		for _, f := range d.GetFindings() {
			switch f.GetIndicator() {
			case llmdiagv1.Indicator_INDICATOR_TTFT_P99, llmdiagv1.Indicator_INDICATOR_PREEMPTIONS,
				llmdiagv1.Indicator_INDICATOR_SCRAPE, llmdiagv1.Indicator_INDICATOR_PEERS:
				t.Errorf("healthy node: %v row without information", f.GetIndicator())
			}
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
		if f := find(d, llmdiagv1.Indicator_INDICATOR_E2E_TREND); f.GetStatus() != warn || !strings.HasPrefix(f.GetValue(), "+300% over 5 min") {
			t.Errorf("E2E trend = %v, want WARN +300%% over 5 min (rising)", f)
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

func TestNewFindings(t *testing.T) {
	th := diagnose.DefaultThresholds()
	en := llmdiagv1.Language_LANGUAGE_EN
	find := func(d *llmdiagv1.Diagnosis, ind llmdiagv1.Indicator) *llmdiagv1.Finding {
		for _, f := range d.GetFindings() {
			if f.GetIndicator() == ind {
				return f
			}
		}
		t.Fatalf("no %v finding", ind)
		return nil
	}
	for _, tc := range []struct {
		name   string
		in     func() diagnose.Input
		ind    llmdiagv1.Indicator
		status llmdiagv1.Status
		value  string // prefix; "" for none
		evid   string // substring of some evidence line; "" for none
	}{
		{"ratio above warn for one refresh, a handful waiting: OK", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue, m.Running = f64(2), f64(3)
			return diagnose.Input{Metrics: m, History: flatHistory(30, 0, 3)}
		}, llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, ok, "0.67", ""},
		{"ratio above warn for three refreshes: WARN", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue, m.Running = f64(2), f64(3)
			h := flatHistory(30, 0, 3)
			h[28].Queue, h[29].Queue = f64(2), f64(1)
			return diagnose.Input{Metrics: m, History: h}
		}, llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, warn, "0.67", "3 of the last"},
		{"queue above saturated now: WARN", func() diagnose.Input {
			m := healthyMetrics()
			m.Queue = f64(8)
			return diagnose.Input{Metrics: m, History: flatHistory(30, 0, 10)}
		}, llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, warn, "0.80", ""},
		{"aborts unset: UNKNOWN, never 0", func() diagnose.Input { return diagnose.Input{Metrics: healthyMetrics()} },
			llmdiagv1.Indicator_INDICATOR_ABORTS, unknown, "", ""},
		{"aborts 2% of finished", func() diagnose.Input {
			m := healthyMetrics()
			m.AbortedRequestsPerSecond = f64(0.02)
			return diagnose.Input{Metrics: m}
		}, llmdiagv1.Indicator_INDICATOR_ABORTS, ok, "~2%", "aborted of"},
		{"aborts 10%: WARN", func() diagnose.Input {
			m := healthyMetrics()
			m.AbortedRequestsPerSecond = f64(0.1)
			return diagnose.Input{Metrics: m}
		}, llmdiagv1.Indicator_INDICATOR_ABORTS, warn, "~10%", ""},
		{"inter-token P99 1.5 s: CRIT", func() diagnose.Input {
			m := healthyMetrics()
			m.InterToken = dist(0.05, 1.5)
			return diagnose.Input{Metrics: m}
		}, llmdiagv1.Indicator_INDICATOR_INTER_TOKEN, crit, "1.5 s", "P50 50 ms"},
		{"inter-token absent: UNKNOWN", func() diagnose.Input { return diagnose.Input{Metrics: healthyMetrics()} },
			llmdiagv1.Indicator_INDICATOR_INTER_TOKEN, unknown, "", ""},
		{"queue time 75% of a late TTFT: WARN", func() diagnose.Input {
			m := healthyMetrics()
			m.Ttft = dist(2, 20)
			m.Ttft.Mean = f64(4)
			m.QueueTime = dist(2, 15)
			m.QueueTime.Mean = f64(3)
			return diagnose.Input{Metrics: m}
		}, llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, warn, "~75% of TTFT", "mean queue time 3 s of mean TTFT 4 s"},
		{"decode speed per request", func() diagnose.Input { return diagnose.Input{Metrics: healthyMetrics()} },
			llmdiagv1.Indicator_INDICATOR_DECODE_SPEED, ok, "40 tok/s per request", "400 tok/s ÷ 10 running"},
		{"decode slow, MoE profile", func() diagnose.Input {
			m := healthyMetrics()
			m.GenerationTokensPerSecond = f64(30)
			return diagnose.Input{Metrics: m, Profile: &llmdiagv1.Profile{DataParallel: 8, TensorParallel: 1, PipelineParallel: 2, ActiveParamsBillions: 37, TotalParamsBillions: 671, Gpu: "H20"}}
		}, llmdiagv1.Indicator_INDICATOR_DECODE_SPEED, warn, "3 tok/s per request", "37B of 671B parameters active"},
		{"prefill/decode ratio is physics", func() diagnose.Input { return diagnose.Input{Metrics: healthyMetrics()} },
			llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO, ok, "5×", ""},
		{"trend needs history", func() diagnose.Input { return diagnose.Input{Metrics: healthyMetrics()} },
			llmdiagv1.Indicator_INDICATOR_E2E_TREND, unknown, "", ""},
		{"trend robust to one outlying refresh", func() diagnose.Input {
			h := flatHistory(20, 0, 10)
			for i := range h {
				h[i].E2EMean = f64(8)
			}
			h[17].E2EMean = f64(80)
			return diagnose.Input{Metrics: healthyMetrics(), History: h}
		}, llmdiagv1.Indicator_INDICATOR_E2E_TREND, ok, "0% over", "Theil–Sen"},
		{"queue history quoted", func() diagnose.Input {
			return diagnose.Input{Metrics: burstMetrics(), History: burstHistory(120, false)}
		}, llmdiagv1.Indicator_INDICATOR_QUEUE, ok, "0", "in 30 of the last 121 refreshes over 10 min: 5 episode(s), longest 30 s, 5 drained"},
		{"peers: the whole group is slow", func() diagnose.Input {
			m := healthyMetrics()
			m.E2E = dist(20, 90)
			return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 80), peer("c", 100)}}
		}, llmdiagv1.Indicator_INDICATOR_PEERS, ok, "1×", "all 3 nodes serving m are slow: median E2E P99 1.5 min"},
		{"peers: outlier", func() diagnose.Input {
			m := healthyMetrics()
			m.E2E = dist(20, 90)
			return diagnose.Input{Metrics: m, Peers: []*llmdiagv1.NodeMetrics{peer("b", 20), peer("c", 25)}}
		}, llmdiagv1.Indicator_INDICATOR_PEERS, warn, "4×", "this node 1.5 min vs peer median 22.5 s"},
		{"data age", func() diagnose.Input { return diagnose.Input{Metrics: healthyMetrics()} },
			llmdiagv1.Indicator_INDICATOR_STALENESS, ok, "10 s", "stale after 5 min"},
		{"stale data: the age row is CRIT", func() diagnose.Input {
			m := healthyMetrics()
			m.Staleness = durationpb.New(10 * time.Minute)
			return diagnose.Input{Metrics: m}
		}, llmdiagv1.Indicator_INDICATOR_STALENESS, crit, "10 min", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := diagnose.Diagnose(tc.in(), th, en)
			f := find(d, tc.ind)
			if f.GetStatus() != tc.status || !strings.HasPrefix(f.GetValue(), tc.value) || (tc.value == "" && f.GetValue() != "") {
				t.Errorf("%v = %v %q, want %v %q", tc.ind, f.GetStatus(), f.GetValue(), tc.status, tc.value)
			}
			if tc.evid != "" && !strings.Contains(strings.Join(f.GetEvidence(), "\n"), tc.evid) {
				t.Errorf("evidence lacks %q: %q", tc.evid, f.GetEvidence())
			}
			if f.GetConclusion() == "" {
				t.Error("no conclusion")
			}
		})
	}
}

// Every verdict from fresh data says, for each cause weighed before the
// winner, why it does not hold.
func TestRuledOutEveryCauseConsidered(t *testing.T) {
	d := diagnose.Diagnose(diagnose.Input{Metrics: healthyMetrics(), History: flatHistory(10, 0, 10)}, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
	want := []string{"not memory", "not queueing", "not bursts", "not prefill", "not decode", "not compared with peers"}
	if len(d.GetRuledOut()) != len(want) {
		t.Fatalf("ruled out %q, want one line for each of %q", d.GetRuledOut(), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(d.GetRuledOut()[i], w) {
			t.Errorf("ruled out %d = %q, want it to start %q", i, d.GetRuledOut()[i], w)
		}
	}
}
