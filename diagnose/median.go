package diagnose

import (
	"math"
	"slices"
	"sync"
	"time"
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
		// Median of three as pivot, then a three-way partition in two
		// passes without branches on the values (noise makes them
		// unpredictable): those below the pivot to the front, then, of the
		// rest, those equal to it, so that runs of equal values (a flat
		// history) end the search at once.
		a, b, c := vs[lo], vs[lo+(hi-lo)/2], vs[hi-1]
		pivot := max(min(a, b), min(max(a, b), c))
		lt := lo
		for i := lo; i < hi; i++ {
			v := vs[i]
			vs[i] = vs[lt]
			vs[lt] = v
			lt += b2i(v < pivot)
		}
		if k < lt {
			hi = lt
			continue
		}
		eq := lt
		for i := lt; i < hi; i++ {
			v := vs[i]
			vs[i] = vs[eq]
			vs[eq] = v
			eq += b2i(v == pivot)
		}
		if k < eq {
			return pivot
		}
		lo = eq
	}
	// Insertion sort of the few left.
	for i := lo + 1; i < hi; i++ {
		for j := i; j > lo && vs[j] < vs[j-1]; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
	return vs[k]
}

// TrendHint carries what one fit of a node's trend learnt to the next fit
// of the same node: a bracket around the median slope, two histories'
// lengths of slopes wide on either side. A refresh moves a history on by a
// point, which moves the median by fewer slopes than that, so the next fit
// finds the median within without sampling, and keeps only the few slopes
// inside. A hint never changes a result: one that misses (or comes from
// another node) costs a pass over the slopes, and the fit goes on as
// without it. The zero value is no hint.
//
// A hint also keeps its fit's counts and the slopes within its bracket
// (trendFit, some 7 KB for a full history), so that the next fit of a
// window moved on by a point or two counts only the slopes of the points
// that left and came: a few hundred slopes rather than 7,140.
type TrendHint struct {
	lo, hi float64
	ok     bool
	// hit: the last fit found its median within the hint it was given;
	// updated: by updating the fit before's counts (trendFit.update).
	hit, updated bool
	// fit is the last fit's, for the next to update; its memory is kept
	// from one fit to the next.
	fit *trendFit
}

// medianSlope is the median of the slopes between every two points of
// (x, v) whose x grow, (v[j]-v[i])/(x[j]-x[i]) for i < j, as median gives
// it; any is false when there is no such pair. A full history has 7,140
// slopes: rather than keep and order them all, it brackets their median
// between two order statistics of a sample of them (or within hint's
// bracket, when that holds it), then computes every slope once, counting
// those below and above the bracket and keeping only those within, among
// which it selects. When the bracket misses the median (or a slope is a
// NaN or a −0, whose places in a sort their values do not fix) it keeps
// every slope and selects among all. buf is scratch; hint, when not nil,
// is read and then left holding the hint for the next fit. base is the
// time x counts from (see trendFit: the fit is kept only when x + base is
// exact).
func medianSlope(x, v []float64, base float64, buf *[]float64, hint *TrendHint) (median float64, any bool) {
	n := len(x)
	if hint != nil {
		given := *hint
		*hint = TrendHint{fit: given.fit}
		if given.ok && n >= 48 {
			if median, u, any, hit := given.fit.update(x, v, base, buf); hit {
				*hint = given
				hint.hit, hint.updated = true, true
				if any {
					// For a count, should the next update miss: the fit's
					// bracket centred on the median now.
					d := max(u-hint.fit.lo, hint.fit.hi-u)
					hint.lo, hint.hi = u-d, u+d
				}
				return median, any
			}
		}
		if given.ok && given.lo <= given.hi && n >= 48 {
			if median, any, hit, c := bracketSlopes(x, v, buf, given.lo, given.hi, true, hint); hit {
				hint.hit = true
				hint.fit = hint.fit.keep(x, v, base, *buf, c, hint.lo, hint.hi)
				return median, any
			}
		}
	}
	if n < 48 { // few slopes: keep them all
		return allSlopes(x, v, buf)
	}
	// The sample: pairs spread over the history by two strides.
	const sample = 255
	var picks [sample]float64
	k := 0
	for s := range sample {
		i, j := (s*7919)%n, (s*104729+s/3+1)%n
		if i > j {
			i, j = j, i
		}
		if dx := x[j] - x[i]; dx > 0 {
			picks[k] = (v[j] - v[i]) / dx
			k++
		}
	}
	if k < sample/2 {
		return allSlopes(x, v, buf)
	}
	// About ±3 standard deviations of the sample median's rank.
	spread := 3 * int(math.Sqrt(float64(k))) / 2
	for _, p := range picks[:k] {
		if p != p {
			return allSlopes(x, v, buf)
		}
	}
	lo := selectNth(picks[:k], k/2-spread)
	hi := selectNth(picks[k/2-spread+1:k], 2*spread-1)
	if median, any, hit, c := bracketSlopes(x, v, buf, lo, hi, false, hint); hit {
		if hint != nil {
			hint.fit = hint.fit.keep(x, v, base, *buf, c, hint.lo, hint.hi)
		}
		return median, any
	}
	return allSlopes(x, v, buf)
}

// bracketSlopes is the median slope, as medianSlope's, keeping only the
// slopes within [lo, hi]: hit is false when the bracket misses the median
// or holds a NaN or a −0, and the caller then finds the median otherwise.
// narrow says few slopes are expected within (a hint's bracket): it then
// branches on each slope, which only the rarity of those within makes
// predictable. When hit and next is not nil, next is left holding the
// bracket for the next fit (and its fit as it was). The slopes within are
// left in *buf, and c says how many were below and above.
func bracketSlopes(x, v []float64, buf *[]float64, lo, hi float64, narrow bool, next *TrendHint) (median float64, any, hit bool, c bracketCount) {
	n := len(x)
	// Every slope is written at in[w] and w moves on past those within
	// the bracket: no branch on the values, which noise makes
	// unpredictable (unless narrow).
	in := slices.Grow((*buf)[:0], n*(n-1)/2)[:n*(n-1)/2]
	w, below, above := 0, 0, 0
	if slices.IsSorted(x) && (n == 0 || !math.IsNaN(x[0])) {
		// Times in order (as histories are): the pairs i < j whose x grow
		// are those past the points at x[i].
		row := rowWide
		if narrow {
			row = rowNarrow
		}
		for i, xi := range x {
			vi := v[i]
			j := i + 1
			for j < n && x[j] == xi {
				j++
			}
			w, below, above = row(xi, vi, x[j:], v[j:], lo, hi, in, w, below, above)
		}
	} else {
		for i, xi := range x {
			vi := v[i]
			vj := v[i+1:]
			for j, xj := range x[i+1:] {
				dx := xj - xi
				s := (vj[j] - vi) / dx
				ok := b2i(dx > 0)
				lt, gt := b2i(s < lo)&ok, b2i(s > hi)&ok
				in[w] = s
				w += ok &^ (lt | gt)
				below += lt
				above += gt
			}
		}
	}
	in = in[:w]
	*buf = in
	c = bracketCount{lo: lo, hi: hi, below: below, above: above}
	median, k, any, hit := middle(in, below, above)
	if !hit || !any || next == nil {
		return median, any, hit, c
	}
	// Two histories' lengths of slopes either side: room for the median
	// to move over the updates of a kept fit (trendFit).
	*next = TrendHint{ok: true, fit: next.fit}
	next.lo, next.hi = recenter(in, k, 2*n, lo, hi)
	return median, true, true, c
}

// recenter is the bracket for the next fit after a fit whose slopes
// within [lo, hi] are in, in[k] the upper middle (middle's): reach slopes
// either side of the median. Where the slopes kept do not reach that far
// (the median moved towards that bound), as far from the median as the
// other side's, so that a bracket follows a median that keeps moving one
// way. It reorders in.
func recenter(in []float64, k, reach int, lo, hi float64) (float64, float64) {
	u := in[k]
	dlo, dhi := -1.0, -1.0 // the distances, where the slopes reach
	if i := k - reach; i >= 0 {
		dlo = u - selectNth(in[:k], i)
	}
	if i := k + reach; i < len(in) {
		dhi = selectNth(in[k+1:], i-k-1) - u
	}
	switch {
	case dlo >= 0 && dhi >= 0:
		return u - dlo, u + dhi
	case dlo >= 0:
		return u - dlo, max(hi, u+dlo)
	case dhi >= 0:
		return min(lo, u-dhi), u + dhi
	}
	return lo, hi
}

// bracketCount is what a count of slopes against a bracket found besides
// the slopes within: the bracket, and how many were below and above it.
type bracketCount struct {
	lo, hi       float64
	below, above int
}

// middle is the median of below + len(in) + above slopes, of which below
// are below and above above the slopes in; any is false when there are
// none. hit is false when in does not hold the middle (or holds a NaN or a
// −0, whose places in a sort the values do not fix). It reorders in, and
// leaves the upper middle at in[k].
func middle(in []float64, below, above int) (median float64, k int, any, hit bool) {
	odd := 0 // a NaN or −0 within
	for _, s := range in {
		odd |= b2i(s != s) | b2i(math.Float64bits(s) == 1<<63)
	}
	k, even, any, hit := middleAt(below, len(in), above)
	if !any || !hit || odd != 0 {
		return 0, 0, false, hit && odd == 0
	}
	u := selectNth(in, k)
	median = u
	if even {
		l := in[0]
		for _, s := range in[1:k] {
			if s > l { // no NaN or −0 within: max without their cases
				l = s
			}
		}
		median = (l + u) / 2
	}
	return median, k, true, true
}

// middleAt is where the median of below + within + above slopes lies
// among the within ones, of which below lie below and above above: the
// upper middle at k, the lower one at k-1 when even. any is false when
// there are none; hit is false when the middle is not within.
func middleAt(below, within, above int) (k int, even, any, hit bool) {
	total := below + within + above
	if total == 0 {
		return 0, false, false, true
	}
	upper := total / 2 // the upper middle; total/2-1 is the lower one when total is even
	if below > upper-1+total%2 || below+within <= upper {
		return 0, false, true, false
	}
	return upper - below, total%2 == 0, true, true
}

// rowWide adds the slopes from (xi, vi) to the points (xs, vs) to the
// counts below lo and above hi, and writes those within to in from c on,
// without a branch on their values; it returns the counts and c moved on.
// (A function of its own, the loop keeps its counts in registers.)
func rowWide(xi, vi float64, xs, vs []float64, lo, hi float64, in []float64, c, below, above int) (int, int, int) {
	vs = vs[:len(xs)]
	for j, xj := range xs {
		s := (vs[j] - vi) / (xj - xi)
		lt, gt := b2i(s < lo), b2i(s > hi)
		in[c] = s
		c += 1 &^ (lt | gt)
		below += lt
		above += gt
	}
	return c, below, above
}

// rowNarrow is rowWide branching on the slopes within, which a narrow
// bracket makes rare enough to be predicted.
func rowNarrow(xi, vi float64, xs, vs []float64, lo, hi float64, in []float64, c, below, above int) (int, int, int) {
	vs = vs[:len(xs)]
	for j, xj := range xs {
		s := (vs[j] - vi) / (xj - xi)
		lt, gt := b2i(s < lo), b2i(s > hi)
		below += lt
		above += gt
		if lt|gt == 0 {
			in[c] = s
			c++
		}
	}
	return c, below, above
}

// b2i is 1 for true, 0 for false (compiled without a branch).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// allSlopes is medianSlope keeping every slope.
func allSlopes(x, v []float64, buf *[]float64) (float64, bool) {
	n := len(x)
	slopes := slices.Grow((*buf)[:0], n*(n-1)/2)
	for i, xi := range x {
		vi := v[i]
		vj := v[i+1:]
		for j, xj := range x[i+1:] {
			if dx := xj - xi; dx > 0 {
				slopes = append(slopes, (vj[j]-vi)/dx)
			}
		}
	}
	*buf = slopes
	if len(slopes) == 0 {
		return 0, false
	}
	return medianOf(slopes), true
}

// histStep is one refresh as readHistory reads it.
type histStep struct {
	at                        time.Time
	queue, running, ratio, kv opt
	mean                      opt
}

// historyScratch is the memory readHistory works in: for a full history,
// some 30 KB, 7,140 slopes of the trend included.
type historyScratch struct {
	steps               []histStep
	queueSteps, kvSteps []holdStep
	xs, means, gaps     []float64
	slopes              []float64
}

// historyScratches keeps readHistory's scratch from one diagnosis to the
// next: a cache of memory, not of results.
var historyScratches = sync.Pool{New: func() any { return new(historyScratch) }}
