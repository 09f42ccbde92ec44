package histogram

import (
	"math"
	"sort"
)

// Attainment is the share of a histogram's observations at or under a
// target, as far as the buckets tell.
//
// The buckets only say how many observations fell at or under each bound.
// When the target is a bound, the share is known: Lower = Upper. Otherwise
// the observations of the bucket the target falls inside (between
// BucketLower and BucketUpper) may lie on either side of it: Lower counts
// them all as above the target (misses), Upper all as at or under it
// (hits), and the truth lies in between. No interpolation is made: the
// bounds are what the buckets allow, nothing narrower.
type Attainment struct {
	// Lower and Upper bound the share of observations at or under the
	// target, in [0, 1]; NaN when the buckets allow no estimate (no +Inf
	// bucket, fewer than two buckets, no observations).
	Lower, Upper float64
	// GoodLower and GoodUpper are the same bounds as counts of
	// observations, and Total the observations in all.
	GoodLower, GoodUpper, Total float64
	// BucketLower and BucketUpper are the bounds whose counts give
	// GoodLower and GoodUpper: the largest bound at or under the target
	// (-Inf when there is none: no observation is known to be under it) and
	// the smallest bound at or above it (+Inf in the +Inf bucket). Both are
	// the target when it is a bound.
	BucketLower, BucketUpper float64
}

// Exact reports whether the target was a bucket bound, so that Lower and
// Upper are the same known share.
func (a Attainment) Exact() bool { return a.BucketLower == a.BucketUpper }

// AttainmentAt returns the share of the buckets' observations at or under
// target, as bounds (see Attainment). The buckets are read as Quantile reads
// them: sorted, equal bounds merged, counts made monotonic. The input slice
// is not modified.
func AttainmentAt(target float64, buckets []Bucket) Attainment {
	return Prepare(buckets).AttainmentAt(target)
}

// AttainmentAt is AttainmentAt(target, the buckets p was prepared from).
func (p Prepared) AttainmentAt(target float64) Attainment {
	bs := p.bs
	if bs == nil || math.IsNaN(target) {
		nan := math.NaN()
		return Attainment{Lower: nan, Upper: nan, GoodLower: nan, GoodUpper: nan, Total: nan, BucketLower: nan, BucketUpper: nan}
	}
	total := bs[len(bs)-1].Count
	// hi is the first bucket whose bound is at or above target; the +Inf
	// bucket at worst.
	hi := sort.Search(len(bs), func(i int) bool { return bs[i].UpperBound >= target })
	a := Attainment{Total: total, BucketUpper: bs[hi].UpperBound, GoodUpper: bs[hi].Count}
	switch {
	case bs[hi].UpperBound == target:
		a.BucketLower, a.GoodLower = target, bs[hi].Count
	case hi == 0:
		a.BucketLower, a.GoodLower = math.Inf(-1), 0
	default:
		a.BucketLower, a.GoodLower = bs[hi-1].UpperBound, bs[hi-1].Count
	}
	a.Lower, a.Upper = a.GoodLower/total, a.GoodUpper/total
	return a
}
