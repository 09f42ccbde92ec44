package histogram

import (
	"math"
	"slices"
	"sort"

	"github.com/llmdiag/llmdiag/sample"
)

// smallDeltaTolerance is the relative difference between successive bucket
// counts that Prometheus treats as floating-point noise and ignores
// (promql.smallDeltaTolerance).
const smallDeltaTolerance = 1e-12

// Bucket is one bucket of a classic histogram: Count observations (cumulative)
// were less than or equal to UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Estimate is a quantile estimate and the bucket it lies in.
//
// Lower and Upper are the bounds of that bucket: the first bucket's lower
// bound is 0 when its upper bound is positive, and -Inf otherwise; a quantile
// in the +Inf bucket has Lower = the largest finite bound (which is also
// Value) and Upper = +Inf. When Value is NaN, -Inf or +Inf because the input
// allows no estimate, Lower and Upper are NaN.
type Estimate struct {
	Value        float64
	Lower, Upper float64
	// ForcedMonotonic reports that decreasing cumulative counts had to be
	// raised to their predecessor (Prometheus annotates this as info).
	ForcedMonotonic bool
	// FixedPrecision reports that differences too small to be anything but
	// floating-point noise were ignored.
	FixedPrecision bool
}

// Quantile estimates the q-quantile of the buckets exactly as Prometheus's
// histogram_quantile does for classic histograms (promql.BucketQuantile):
//
//   - q NaN gives NaN, q < 0 gives -Inf, q > 1 gives +Inf;
//   - buckets are sorted by upper bound and buckets with equal bounds merged;
//   - fewer than 2 buckets, a highest bound other than +Inf, or no
//     observations give NaN;
//   - counts that differ from their predecessor by a relative 1e-12 or less
//     are set equal to it, and counts that still decrease are raised to it;
//   - a quantile in the +Inf bucket is the largest finite bound;
//   - a quantile in the lowest bucket is that bucket's bound when the bound is
//     <= 0, and otherwise interpolated from 0;
//   - anywhere else it is interpolated linearly within its bucket.
//
// The input slice is not modified.
func Quantile(q float64, buckets []Bucket) Estimate {
	if e, ok := outOfRange(q); ok {
		return e
	}
	return Prepare(buckets).Quantile(q)
}

// Prepared is buckets made ready once for the estimates of several
// quantiles (sorted, merged, made monotonic): Prepare(buckets).Quantile(q)
// is Quantile(q, buckets).
type Prepared struct {
	bs            []Bucket // nil when they allow no estimate
	forced, fixed bool
}

// Prepare readies buckets for Prepared.Quantile. The input slice is not
// modified.
func Prepare(buckets []Bucket) Prepared {
	if len(buckets) == 0 {
		return Prepared{}
	}
	return prepare(slices.Clone(buckets))
}

// PrepareHistogram is Prepare(Buckets(h)), making one copy of the buckets
// rather than two.
func PrepareHistogram(h *sample.Histogram) Prepared {
	var bs []Bucket
	return PrepareHistogramInto(h, &bs)
}

// PrepareHistogramInto is PrepareHistogram writing the buckets into *buf
// (grown when too short, and left holding them) rather than into a new
// slice, for callers that prepare many histograms one after another: the
// Prepared uses buf's memory, so it is good until buf is used again.
func PrepareHistogramInto(h *sample.Histogram, buf *[]Bucket) Prepared {
	if h == nil {
		return Prepared{}
	}
	n := min(len(h.Bounds), len(h.Counts))
	bs := slices.Grow((*buf)[:0], n)[:n]
	for i := range n {
		bs[i] = Bucket{UpperBound: h.Bounds[i], Count: h.Counts[i]}
	}
	*buf = bs
	if n == 0 {
		return Prepared{}
	}
	return prepare(bs)
}

// prepare is Prepare of buckets it may reorder and keep, at least one.
func prepare(bs []Bucket) Prepared {
	slices.SortFunc(bs, func(a, b Bucket) int {
		switch {
		case a.UpperBound < b.UpperBound:
			return -1
		case a.UpperBound > b.UpperBound:
			return +1
		}
		return 0
	})
	if !math.IsInf(bs[len(bs)-1].UpperBound, +1) {
		return Prepared{}
	}
	bs = coalesce(bs)
	forced, fixed := ensureMonotonic(bs, smallDeltaTolerance)
	if len(bs) < 2 || bs[len(bs)-1].Count == 0 {
		return Prepared{}
	}
	return Prepared{bs: bs, forced: forced, fixed: fixed}
}

// outOfRange is the estimate of a q outside [0, 1] (or NaN), which no
// buckets change.
func outOfRange(q float64) (Estimate, bool) {
	switch {
	case math.IsNaN(q):
		return none(math.NaN()), true
	case q < 0:
		return none(math.Inf(-1)), true
	case q > 1:
		return none(math.Inf(+1)), true
	}
	return Estimate{}, false
}

// none is an estimate the input does not allow: v without a bucket.
func none(v float64) Estimate { return Estimate{Value: v, Lower: math.NaN(), Upper: math.NaN()} }

// Quantile is Quantile(q, the buckets p was prepared from).
func (p Prepared) Quantile(q float64) Estimate {
	if e, ok := outOfRange(q); ok {
		return e
	}
	bs := p.bs
	if bs == nil {
		return none(math.NaN())
	}
	observations := bs[len(bs)-1].Count
	est := Estimate{ForcedMonotonic: p.forced, FixedPrecision: p.fixed}
	rank := q * observations
	b := sort.Search(len(bs)-1, func(i int) bool { return bs[i].Count >= rank })
	switch {
	case b == len(bs)-1:
		est.Value = bs[b-1].UpperBound
		est.Lower, est.Upper = bs[b-1].UpperBound, math.Inf(+1)
		return est
	case b == 0 && bs[0].UpperBound <= 0:
		est.Value = bs[0].UpperBound
		est.Lower, est.Upper = math.Inf(-1), bs[0].UpperBound
		return est
	}
	var (
		start float64
		end   = bs[b].UpperBound
		count = bs[b].Count
	)
	if b > 0 {
		start = bs[b-1].UpperBound
		count -= bs[b-1].Count
		rank -= bs[b-1].Count
	}
	est.Value = start + (end-start)*(rank/count)
	est.Lower, est.Upper = start, end
	return est
}

// Buckets returns h's buckets for Quantile; nil when h is nil.
func Buckets(h *sample.Histogram) []Bucket {
	if h == nil {
		return nil
	}
	n := min(len(h.Bounds), len(h.Counts))
	bs := make([]Bucket, n)
	for i := range n {
		bs[i] = Bucket{UpperBound: h.Bounds[i], Count: h.Counts[i]}
	}
	return bs
}

// coalesce merges buckets with the same upper bound, summing their counts,
// as Prometheus's coalesceBuckets does. bs must be sorted.
func coalesce(bs []Bucket) []Bucket {
	last := bs[0]
	i := 0
	for _, b := range bs[1:] {
		if b.UpperBound == last.UpperBound {
			last.Count += b.Count
			continue
		}
		bs[i] = last
		last = b
		i++
	}
	bs[i] = last
	return bs[:i+1]
}

// ensureMonotonic is Prometheus's ensureMonotonicAndIgnoreSmallDeltas: it
// first sets counts that differ from the last accepted count by no more than
// the relative tolerance (in either direction) to that count, then raises any
// count still below it. It reports whether it forced monotonicity and whether
// it ignored small deltas.
func ensureMonotonic(bs []Bucket, tolerance float64) (forced, fixed bool) {
	prev := bs[0].Count
	for i := 1; i < len(bs); i++ {
		curr := bs[i].Count
		switch {
		case curr == prev:
		case almostEqual(prev, curr, tolerance):
			bs[i].Count = prev
			fixed = true
		case curr < prev:
			bs[i].Count = prev
			forced = true
		default:
			prev = curr
		}
	}
	return forced, fixed
}

// minNormal is the smallest positive normal float64.
const minNormal = 0x1p-1022

// almostEqual reports whether a and b differ by less than their sum times
// epsilon, as Prometheus's util/almost.Equal does.
func almostEqual(a, b, epsilon float64) bool {
	if math.IsNaN(a) && math.IsNaN(b) {
		return true
	}
	if a == b {
		return true
	}
	absSum := math.Abs(a) + math.Abs(b)
	diff := math.Abs(a - b)
	if a == 0 || b == 0 || absSum < minNormal {
		return diff < epsilon*minNormal
	}
	return diff/math.Min(absSum, math.MaxFloat64) < epsilon
}
