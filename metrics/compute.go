package metrics

import (
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
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
// deltas (histogram.Sub), a reset histogram counting whole. A latency the
// engine exposes only as a sum and a count (sample.Totals) gives a
// distribution with the window's count, sum and mean and no percentile, each
// counter differenced as above.
//
// A series that appears later: engines create series on their first
// request or event, so a counter, histogram or total newest has may be
// missing from base. When base is complete (Complete: up, without errors or
// warnings) and older than newest, such a series counts as 0 at base.At,
// born inside the window: a counter's whole newest value is the window's
// increase, and the whole newest histogram or total is the window's. When
// base is not complete the missing series may have been lost by the read,
// and the concept is absent. Where both ends have the series the result is
// the same either way.
//
// Gauges are read from newest. A concept newest does not have is absent,
// never 0. quantiles default to DefaultQuantiles. Staleness is now −
// newest.At (0 when newest is from the future) and Stale reports staleness
// > staleAfter. DecodeTokensPerSecondPerRequest is SetPerRequestDecode's,
// from the indicators computed.
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
	if newest.GPU != nil {
		// Gauges: the latest reading, as queue and KV.
		nm.Gpu = proto.CloneOf(newest.GPU)
	}
	if base != nil && !base.At.Before(newest.At) {
		nm.Errors = append(nm.Errors, "window base is not older than the newest sample: no rates")
	}

	// A series base lacks counts as 0 there when base shows every series
	// and is older.
	fromZero := Complete(base) && base.At.Before(newest.At)
	r := newRater(newest, base, fromZero)
	nm.PromptTokensPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.PromptTokens })
	nm.GenerationTokensPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.GenerationTokens })
	nm.PreemptionsPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.Preemptions })
	nm.RequestsPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.RequestsFinished })
	nm.AbortedRequestsPerSecond = r.rate(func(s *sample.Sample) *float64 { return s.RequestsAborted })
	setEffects(nm, r)
	setDisagg(nm, newest, r)

	dist := func(h sample.Hist) *llmdiagv1.Distribution {
		if base == nil {
			if hist := newest.Hists[h]; hist != nil {
				return Distribution(hist, quantiles)
			}
			return totalDistribution(newest.Totals[h], nil, false, false)
		}
		if hist := newest.Hists[h]; hist != nil {
			// Absent from a complete base: the whole histogram is the window's.
			if old := base.Hists[h]; old != nil || !fromZero {
				hist, _ = histogram.Sub(hist, old)
			}
			return Distribution(hist, quantiles)
		}
		return totalDistribution(newest.Totals[h], base.Totals[h], true, fromZero)
	}
	nm.Ttft = dist(sample.TTFT)
	nm.E2E = dist(sample.E2E)
	nm.InterToken = dist(sample.ITL)
	nm.TimePerOutputToken = dist(sample.TPOT)
	nm.QueueTime = dist(sample.QueueTime)
	nm.Progress = Progress(newest)
	SetPerRequestDecode(nm)
	return nm
}

// Progress is s's odometer of work done: the sum of the cumulative
// counters that move as the engine works (prompt and generation tokens,
// finished requests, the counts of the TTFT and inter-token histograms);
// nil when s has none of them. Only whether it changed between two reads
// means anything: flat while requests are pending is an engine that makes
// no progress (diagnose's STALLED).
func Progress(s *sample.Sample) *float64 {
	var sum float64
	any := false
	add := func(v *float64) {
		if v != nil {
			sum += *v
			any = true
		}
	}
	add(s.PromptTokens)
	add(s.GenerationTokens)
	add(s.RequestsFinished)
	for _, h := range []sample.Hist{sample.TTFT, sample.ITL} {
		if hist := s.Hists[h]; hist != nil {
			add(&hist.Count)
		}
	}
	if !any {
		return nil
	}
	return &sum
}

// Complete reports whether s is a read that shows every series the engine
// had at s.At: the target was up, and nothing was lost to errors (a concept
// touched by one is nil) or exposition warnings (a family left out, see
// engine.Parse, is nil too). A series missing from a complete read did not
// exist yet; one missing from any other read may just not have been read.
func Complete(s *sample.Sample) bool {
	return s != nil && s.Up && len(s.Errors) == 0 && len(s.Warnings) == 0
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
	// fromZero: a counter base lacks counts as 0 there.
	fromZero bool
}

func newRater(newest, base *sample.Sample, fromZero bool) rater {
	r := rater{newest: newest, base: base, fromZero: fromZero}
	switch {
	case base != nil:
		r.seconds = newest.At.Sub(base.At).Seconds()
	case !newest.CountersCreated.IsZero():
		r.seconds = newest.At.Sub(newest.CountersCreated).Seconds()
	}
	return r
}

// rate is the per-second increase of the counter get reads; nil when newest
// lacks it, when base lacks it and is not complete, or when the window has
// no length.
func (r rater) rate(get func(*sample.Sample) *float64) *float64 {
	now := get(r.newest)
	if now == nil || r.seconds <= 0 {
		return nil
	}
	if r.base == nil {
		return sample.F(*now / r.seconds)
	}
	then := get(r.base)
	if then == nil && !r.fromZero {
		return nil
	}
	return sample.F(increase(*now, then) / r.seconds)
}

// increase is how much a counter read now grew since it read then: the
// difference, or now itself when the counter fell (it restarted from 0, as
// Prometheus's rate reads a reset) or then is nil (it started from 0 since).
func increase(now float64, then *float64) float64 {
	if then == nil || now < *then {
		return now
	}
	return now - *then
}

// totalDistribution is the distribution of a latency exposed only as a sum
// and a count: the window's count and sum (each differenced as a counter
// from old, or cumulative when windowed is false) and their mean, without
// buckets or percentiles; nil when newest has none, or when old is nil in a
// window not counted from zero.
func totalDistribution(newest, old *sample.Total, windowed, fromZero bool) *llmdiagv1.Distribution {
	if newest == nil || windowed && old == nil && !fromZero {
		return nil
	}
	d := &llmdiagv1.Distribution{Count: newest.Count, Sum: newest.Sum}
	if old != nil {
		d.Count = increase(newest.Count, &old.Count)
		d.Sum = increase(newest.Sum, &old.Sum)
	}
	if d.Count > 0 {
		d.Mean = sample.F(d.Sum / d.Count)
	}
	return d
}

// Distribution summarises h at quantiles: count, sum, mean, the buckets,
// and each quantile with histogram.Quantile (histogram_quantile semantics)
// and the bucket it lies in; nil when h is nil. It does not modify h.
func Distribution(h *sample.Histogram, quantiles []float64) *llmdiagv1.Distribution {
	if h == nil {
		return nil
	}
	var scratch []histogram.Bucket
	return DistributionOf(&sample.Histogram{Count: h.Count, Sum: h.Sum, Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts)}, quantiles, &scratch)
}

// DistributionOf is Distribution keeping h's Bounds and Counts as the
// distribution's (the caller gives them up) and preparing the buckets for
// the quantiles in *scratch (histogram.PrepareHistogramInto): for a source
// that summarises some 50,000 histograms a refresh, two copies and a
// slice fewer each.
func DistributionOf(h *sample.Histogram, quantiles []float64, scratch *[]histogram.Bucket) *llmdiagv1.Distribution {
	if h == nil {
		return nil
	}
	buckets := histogram.PrepareHistogramInto(h, scratch)
	d := &llmdiagv1.Distribution{
		Count:        h.Count,
		Sum:          h.Sum,
		BucketBounds: h.Bounds,
		BucketCounts: h.Counts,
		Percentiles:  make([]*llmdiagv1.Percentile, len(quantiles)),
	}
	// The percentiles share one allocation (a refresh of 10,000 nodes
	// writes some 150,000 of them).
	ps := make([]llmdiagv1.Percentile, len(quantiles))
	for i, q := range quantiles {
		e := buckets.Quantile(q)
		p := &ps[i]
		p.Quantile, p.Value, p.LowerBound, p.UpperBound = q, e.Value, e.Lower, e.Upper
		d.Percentiles[i] = p
	}
	if h.Count > 0 {
		d.Mean = sample.F(h.Sum / h.Count)
	}
	return d
}
