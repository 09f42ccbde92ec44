package diagnose

import (
	"math"
	"slices"
	"sync"
)

// medianOf is median(vs), reordering vs: the order statistics are found by
// selection in linear time rather than by sorting. When vs holds a NaN or a
// −0, whose places in a sort the values alone do not fix, it sorts vs as
// median does, so the result is always median's.
func medianOf(vs []float64) float64 {
	n := len(vs)
	if n == 0 {
		return 0
	}
	for _, v := range vs {
		if math.IsNaN(v) || (v == 0 && math.Signbit(v)) {
			slices.Sort(vs)
			if n%2 == 1 {
				return vs[n/2]
			}
			return (vs[n/2-1] + vs[n/2]) / 2
		}
	}
	hi := selectNth(vs, n/2)
	if n%2 == 1 {
		return hi
	}
	// The largest of the lower half: the element before hi in a sort.
	lo := vs[0]
	for _, v := range vs[1 : n/2] {
		if v > lo {
			lo = v
		}
	}
	return (lo + hi) / 2
}

// selectNth reorders vs so that vs[k] is the element a sort would put
// there, with none greater before it and none smaller after it, and
// returns it. vs must hold no NaN.
func selectNth(vs []float64, k int) float64 {
	lo, hi := 0, len(vs) // the window holding position k
	for hi-lo > 16 {
		// Median of three as pivot; three-way partition, so that runs of
		// equal values (a flat history) end the search at once.
		a, b, c := vs[lo], vs[lo+(hi-lo)/2], vs[hi-1]
		if a > b {
			a, b = b, a
		}
		if b > c {
			b = c
			if a > b {
				b = a
			}
		}
		pivot := b
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch v := vs[i]; {
			case v < pivot:
				vs[lt], vs[i] = vs[i], vs[lt]
				lt++
				i++
			case v > pivot:
				gt--
				vs[gt], vs[i] = vs[i], vs[gt]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return pivot
		}
	}
	// Insertion sort of the few left.
	for i := lo + 1; i < hi; i++ {
		for j := i; j > lo && vs[j] < vs[j-1]; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
	return vs[k]
}

// medianSlope is medianOf(slopes), for theilSen's many slopes (7,140 for a
// full history): it first brackets the median between two order
// statistics of a sample of the slopes, then selects among the few slopes
// within the bracket only, counting those outside; when the bracket misses
// (or the slopes hold a NaN or a −0) it selects among all. slopes must
// have room (capacity) for as many again; it is reordered.
func medianSlope(slopes []float64) float64 {
	n := len(slopes)
	const sample = 255
	if n < 4*sample || cap(slopes) < 2*n {
		return medianOf(slopes)
	}
	var picks [sample]float64
	stride := n / sample
	for i := range picks {
		picks[i] = slopes[i*stride]
	}
	// ±3 standard deviations of the sample median's rank.
	const spread = 24
	lo := selectNth(picks[:], sample/2-spread)
	hi := selectNth(picks[sample/2-spread+1:], spread*2-1)
	mid := slopes[n : 2*n]
	below, c := 0, 0
	odd := false // a NaN or −0: their order is not their value's
	for _, s := range slopes {
		mid[c] = s
		c += b2i(lo <= s && s <= hi)
		below += b2i(s < lo)
		odd = odd || s != s || (s == 0 && math.Signbit(s))
	}
	k := n / 2 // the upper middle; n/2-1 is the lower one when n is even
	if odd || below > k-1+n%2 || below+c <= k {
		return medianOf(slopes)
	}
	mid = mid[:c]
	upper := selectNth(mid, k-below)
	if n%2 == 1 {
		return upper
	}
	lower := mid[0]
	for _, v := range mid[1 : k-below] {
		if v > lower {
			lower = v
		}
	}
	return (lower + upper) / 2
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// slopeBufs holds theilSen's scratch for its pairwise slopes (7,140 for a
// full history of 120 points): a cache of memory, not of results.
var slopeBufs = sync.Pool{New: func() any { return new([]float64) }}
