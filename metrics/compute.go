package metrics

import (
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/sample"
)

// DefaultQuantiles are reported when Compute is given none: P50, P95, P99.
var DefaultQuantiles = []float64{0.5, 0.95, 0.99}

// Compute returns the indicators of the window from base to newest, as of
// now. The caller sets Node.
//
// With base nil the window is the lifetime (Window "lifetime", whatever
// window says): percentiles come from the cumulative counts, and rates are
// counter / (newest.At − CountersCreated) when the engine exposes when its
// counters started, else absent. Otherwise rates are counter deltas divided
// by newest.At − base.At, a counter that fell (engine restart) counting from
// 0 as Prometheus's rate does, and percentiles come from the per-bucket
// deltas (histogram.Sub), a reset histogram counting whole.
//
// Gauges are read from newest. A concept newest (or, for deltas, base) does
// not have is absent, never 0. quantiles default to DefaultQuantiles.
// Staleness is now − newest.At (0 when newest is from the future) and Stale
// reports staleness > staleAfter.
func Compute(newest, base *sample.Sample, window string, quantiles []float64, now time.Time, staleAfter time.Duration) *llmdiagv1.NodeMetrics {
	if newest == nil {
		return &llmdiagv1.NodeMetrics{Window: window, Stale: true, Errors: []string{"no sample"}}
	}
	if len(quantiles) == 0 {
		quantiles = DefaultQuantiles
	}
	if base == nil {
		window = Lifetime
	}
	staleness, stale := Staleness(newest.At, now, staleAfter)
	nm := &llmdiagv1.NodeMetrics{
		Model:      newest.Model,
		Engine:     newest.Engine,
		Window:     window,
		ObservedAt: timestamppb.New(newest.At),
		Staleness:  durationpb.New(staleness),
		Stale:      stale,
		Up:         newest.Up,
		Errors:     slices.Clone(newest.Errors),
		Warnings:   slices.Clone(newest.Warnings),

		Queue:             clone(newest.Queue),
		Running:           clone(newest.Running),
		QueueRunningRatio: QueueRunningRatio(newest.Queue, newest.Running),
		KvPressure:        clone(newest.KVUsage),
		KvCapacityTokens:  clone(newest.KVCapacityTokens),
	}
	if base != nil && !base.At.Before(newest.At) {
		nm.Errors = append(nm.Errors, "window base is not older than the newest sample: no rates")
	}

	r := newRater(newest, base)
	nm.PromptTokensPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.PromptTokens })
	nm.GenerationTokensPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.GenerationTokens })
	nm.PreemptionsPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.Preemptions })
	nm.RequestsPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.RequestsFinished })
	nm.AbortedRequestsPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.RequestsAborted })
	nm.DecodeTokensPerSecondPerRequest = DecodePerRequest(nm.GenerationTokensPerSecond, newest.Running)

	dist := func(h sample.Hist) *llmdiagv1.Distribution {
		hist := newest.Hists[h]
		if base != nil {
			hist, _ = histogram.Sub(hist, base.Hists[h])
		}
		return Distribution(hist, quantiles)
	}
	nm.Ttft = dist(sample.TTFT)
	nm.E2E = dist(sample.E2E)
	nm.InterToken = dist(sample.ITL)
	nm.TimePerOutputToken = dist(sample.TPOT)
	nm.QueueTime = dist(sample.QueueTime)
	return nm
}

// clone copies an optional value, so the message does not alias the sample.
func clone(p *float64) *float64 {
	if p == nil {
		return nil
	}
	return sample.F(*p)
}

// QueueRunningRatio is queue / running, 0 when both are 0. With requests
// queued and none running (a stalled or just-started engine) it is queue
// itself, as if one request were running: finite, and still growing with the
// queue. Absent when either is.
func QueueRunningRatio(queue, running *float64) *float64 {
	switch {
	case queue == nil || running == nil:
		return nil
	case *running > 0:
		return sample.F(*queue / *running)
	}
	return sample.F(*queue)
}

// rater turns counters into per-second rates over a window.
type rater struct {
	newest, base *sample.Sample
	seconds      float64 // window length; 0 when unknown
}

func newRater(newest, base *sample.Sample) rater {
	r := rater{newest: newest, base: base}
	switch {
	case base != nil:
		r.seconds = newest.At.Sub(base.At).Seconds()
	case !newest.CountersCreated.IsZero():
		r.seconds = newest.At.Sub(newest.CountersCreated).Seconds()
	}
	return r
}

// rate is the per-second increase of the counter get reads; nil when a
// sample lacks it or the window has no length.
func (r rater) rate(get func(*sample.Sample) *float64) *float64 {
	now := get(r.newest)
	if now == nil || r.seconds <= 0 {
		return nil
	}
	delta := *now
	if r.base != nil {
		then := get(r.base)
		if then == nil {
			return nil
		}
		if *now >= *then {
			delta = *now - *then
		}
	}
	return sample.F(delta / r.seconds)
}

// Distribution summarises h at quantiles: count, sum, mean, the buckets,
// and each quantile with histogram.Quantile (histogram_quantile semantics)
// and the bucket it lies in; nil when h is nil. It does not modify h.
func Distribution(h *sample.Histogram, quantiles []float64) *llmdiagv1.Distribution {
	if h == nil {
		return nil
	}
	buckets := histogram.Buckets(h)
	d := &llmdiagv1.Distribution{
		Count:        h.Count,
		Sum:          h.Sum,
		BucketBounds: slices.Clone(h.Bounds),
		BucketCounts: slices.Clone(h.Counts),
		Percentiles:  make([]*llmdiagv1.Percentile, len(quantiles)),
	}
	for i, q := range quantiles {
		e := histogram.Quantile(q, buckets)
		d.Percentiles[i] = &llmdiagv1.Percentile{Quantile: q, Value: e.Value, LowerBound: e.Lower, UpperBound: e.Upper}
	}
	if h.Count > 0 {
		d.Mean = sample.F(h.Sum / h.Count)
	}
	return d
}
