package diagnose

import (
	"math"
	"slices"
)

// trendFit is what a fit of a node's trend keeps for the next fit of the
// same node (TrendHint.fit): its points, a bracket, how many of its slopes
// lay below and above the bracket, and those within, in order. A refresh
// moves a history on by a point (and the current window's mean, a
// float64, comes back from the store as a float32), so the next fit's
// slopes are this fit's, less those of the points that left or changed,
// plus those of the points that came: update counts only those, some
// hundreds of slopes where a full count has 7,140, and merges the few
// within the bracket into those kept.
//
// A slope must then not depend on the window it is counted in: the x of
// a fit count from its first point's time (base), and (v[j]-v[i])/(x[j]-x[i])
// is the same for two windows only when x[j]-x[i] is. It is when every x
// is exactly its time less base, the times as floats (readHistory's): x[j]-
// x[i] is then the difference of the two times, rounded once. A fit is
// kept only when its x are (exactFrom), and its points are kept as those
// times (at), so that a point is the same point in two windows when its
// time and value are bit for bit the same.
type trendFit struct {
	kept  bool      // the fields below are a fit's; false: memory only
	at, v []float64 // the points, x as times (x + base)
	bracketCount
	in []float64 // the slopes within the bracket, in order; no NaN or −0
}

// Bounds of what an update takes on: points that left, changed or came
// (each costs a row of slopes), and slopes kept within the bracket (a fit
// keeps about two history's lengths either side of its median; a bracket
// the slopes have crowded into is better replaced by a fresh count's).
const (
	maxFitMoves = 8
	maxFitIn    = 6 // times the points
)

// keep makes f (allocated when nil) the fit of (x, v) from base, whose
// slopes counted c against its bracket and left in within it, narrowed to
// [lo, hi] where that lies within the counted bracket. It is not kept when
// x is not exactly the times less base, or holds a time twice, or in holds
// a NaN or a −0 (whose places in an order the values do not fix).
func (f *trendFit) keep(x, v []float64, base float64, in []float64, c bracketCount, lo, hi float64) *trendFit {
	if f == nil {
		f = new(trendFit)
	}
	f.kept = false
	if !exactFrom(x, base) {
		return f
	}
	f.bracketCount = c
	f.lo, f.hi = max(c.lo, lo), min(c.hi, hi)
	// With room for the slopes within to grow by an eighth, so that the
	// updates after seldom reallocate them.
	within := 0
	for _, s := range in {
		within += b2i(s >= f.lo && s <= f.hi)
	}
	f.in = slices.Grow(f.in[:0], within+within/8)
	for _, s := range in {
		var ok bool
		if f.in, ok = f.count(f.in, s); !ok {
			return f
		}
	}
	if len(f.in) > maxFitIn*len(x) {
		return f
	}
	slices.Sort(f.in)
	f.points(x, v, base)
	f.kept = true
	return f
}

// points makes (x, v) from base f's points.
func (f *trendFit) points(x, v []float64, base float64) {
	f.at = slices.Grow(f.at[:0], len(x))[:len(x)]
	for i, xi := range x {
		f.at[i] = xi + base
	}
	f.v = append(f.v[:0], v...)
}

// count counts the slope s against f's bracket: below it, above it, or
// within, appended to within; false for a NaN or a −0 within.
func (f *trendFit) count(within []float64, s float64) ([]float64, bool) {
	switch {
	case s < f.lo:
		f.below++
	case s > f.hi:
		f.above++
	case odd(s):
		return within, false
	default:
		within = append(within, s)
	}
	return within, true
}

// odd reports whether s is a NaN or a −0.
func odd(s float64) bool { return s != s || math.Float64bits(s) == 1<<63 }

// update is the median slope of (x, v) from base, as medianSlope's, found
// by updating f's counts when (x, v) is f's window with at most
// maxFitMoves points gone, changed or come; hit is false when it cannot
// (then f is no longer kept), or when the median is no longer within f's
// bracket. u is the upper middle (the median of an odd count; 0 when not
// any). buf is scratch. A nil f is never hit.
func (f *trendFit) update(x, v []float64, base float64, buf *[]float64) (median, u float64, any, hit bool) {
	if f == nil || !f.kept || !exactFrom(x, base) {
		return 0, 0, false, false
	}
	f.kept = false // kept again only when the update completes
	// The old points from the new window's first on are the same as the
	// new ones up to c; the old ones before from and from from+c on are
	// gone, the new ones from c on have come.
	from, _ := slices.BinarySearch(f.at, x[0]+base)
	c := 0
	for c < len(x) && from+c < len(f.at) && x[c]+base == f.at[from+c] && math.Float64bits(v[c]) == math.Float64bits(f.v[from+c]) {
		c++
	}
	if len(f.at)-c+len(x)-c > maxFitMoves {
		return 0, 0, false, false
	}
	// The slopes within of the pairs that left and came: a few dozen.
	var goneAt, comeAt [128]float64
	goneIn, comeIn := goneAt[:0], comeAt[:0]
	gone := func(i int) bool { return i < from || i >= from+c }
	for d := range f.at {
		if !gone(d) {
			continue
		}
		for p := range f.at {
			if p == d || (p < d && gone(p)) {
				continue // the pair's own, or counted with p
			}
			i, j := min(p, d), max(p, d)
			s := (f.v[j] - f.v[i]) / (f.at[j] - f.at[i])
			switch {
			case s < f.lo:
				f.below--
			case s > f.hi:
				f.above--
			default:
				goneIn = append(goneIn, s)
			}
		}
	}
	for a := c; a < len(x); a++ {
		for p := range a {
			var ok bool
			if comeIn, ok = f.count(comeIn, (v[a]-v[p])/(x[a]-x[p])); !ok {
				return 0, 0, false, false
			}
		}
	}
	if f.below < 0 || f.above < 0 || len(f.in)-len(goneIn)+len(comeIn) > maxFitIn*len(x) || !f.merge(goneIn, comeIn, buf) {
		return 0, 0, false, false
	}
	k, even, any, hit := middleAt(f.below, len(f.in), f.above)
	if !hit {
		return 0, 0, false, false
	}
	if !any {
		f.points(x, v, base)
		f.kept = true
		return 0, 0, false, true
	}
	u = f.in[k]
	median = u
	if even {
		median = (f.in[k-1] + u) / 2
	}
	f.points(x, v, base)
	f.kept = true
	return median, u, true, true
}

// merge makes f.in f.in less gone plus come, in order (sorting gone and
// come), in buf first; false when a slope of gone is not in f.in (f is then
// not the fit of its points). One pass along f.in (some hundreds, cold in
// the cache: a search would miss it at every step), copying the runs
// between the few that go and come.
func (f *trendFit) merge(gone, come []float64, buf *[]float64) bool {
	slices.Sort(gone)
	slices.Sort(come)
	out := slices.Grow((*buf)[:0], len(f.in)+len(come))
	defer func() { *buf = out[:0] }()
	in, i, from := f.in, 0, 0 // in[from:i] is the run not yet copied
	for len(gone) > 0 || len(come) > 0 {
		del := len(come) == 0 || len(gone) > 0 && gone[0] <= come[0]
		s := 0.0
		if del {
			s, gone = gone[0], gone[1:]
		} else {
			s, come = come[0], come[1:]
		}
		for i < len(in) && in[i] < s {
			i++
		}
		if !del {
			out = append(append(out, in[from:i]...), s)
			from = i
			continue
		}
		if i == len(in) || in[i] != s {
			return false
		}
		out = append(out, in[from:i]...)
		i++
		from = i
	}
	out = append(out, in[from:]...)
	f.in = append(f.in[:0], out...)
	return true
}

// exactFrom reports whether every x is exactly a time less base, as a
// trendFit needs: x grows strictly from 0 or more, and base > 0 and
// x + base (at most 2·base, where the subtraction back is exact) give x
// back.
func exactFrom(x []float64, base float64) bool {
	if !(base > 0) {
		return false
	}
	for i, xi := range x {
		t := xi + base
		if !(xi >= 0) || i > 0 && !(xi > x[i-1]) || t > 2*base || t-base != xi {
			return false
		}
	}
	return len(x) > 0
}
