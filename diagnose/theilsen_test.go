package diagnose

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// theilSenSorted is theilSen as it was written first: every median by a
// sorted copy. theilSen must give exactly what it gives.
func theilSenSorted(x, v []float64) (from, to, change float64, ok bool) {
	n := len(x)
	if n < 2 {
		return 0, 0, 0, false
	}
	var slopes []float64
	for i := range n {
		for j := i + 1; j < n; j++ {
			if dx := x[j] - x[i]; dx > 0 {
				slopes = append(slopes, (v[j]-v[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0, 0, 0, false
	}
	slope := median(slopes)
	res := make([]float64, n)
	for i := range n {
		res[i] = v[i] - slope*x[i]
	}
	from = median(res) + slope*x[0]
	to = from + slope*(x[n-1]-x[0])
	base := from
	if base <= 0 {
		base = median(v)
	}
	if base <= 0 {
		return 0, 0, 0, false
	}
	return from, to, (to - from) / base, true
}

// TestTheilSenExact: theilSen (selection, reused scratch) gives bit for bit
// what sorted copies give, on flat, noisy, repeated, zero (−0 too),
// huge, infinite and NaN values, at even and odd lengths, with repeated
// times.
func TestTheilSenExact(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 3))
	values := []func() float64{
		func() float64 { return 1.5 },
		func() float64 { return r.Float64() * 10 },
		func() float64 { return float64(r.IntN(4)) / 2 },
		func() float64 { return []float64{0, math.Copysign(0, -1), 1}[r.IntN(3)] },
		func() float64 { return []float64{math.MaxFloat64, -math.MaxFloat64, 1}[r.IntN(3)] },
		func() float64 { return []float64{math.Inf(1), math.NaN(), 2}[r.IntN(3)] },
	}
	same := func(a, b float64) bool {
		return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
	}
	for i := range 3000 {
		n := r.IntN(130)
		val := values[i%len(values)]
		x, v := make([]float64, n), make([]float64, n)
		at := 0.0
		for j := range n {
			if r.IntN(10) != 0 {
				at += 5 + float64(r.IntN(3))*0.001
			}
			x[j], v[j] = at, val()
		}
		vIn := slices.Clone(v)
		var buf []float64
		f1, t1, c1, ok1 := theilSen(x, v, 0, &buf, nil)
		f2, t2, c2, ok2 := theilSenSorted(x, v)
		if !same(f1, f2) || !same(t1, t2) || !same(c1, c2) || ok1 != ok2 {
			t.Fatalf("case %d (n %d): got %v %v %v %v, want %v %v %v %v", i, n, f1, t1, c1, ok1, f2, t2, c2, ok2)
		}
		if !slices.EqualFunc(v, vIn, same) {
			t.Fatalf("case %d: theilSen changed its input", i)
		}
	}
}

// TestTrendHint: fits carried from window to window of a series by their
// hint (as a node's refreshes are) give bit for bit what sorted copies give,
// and find their median within the hint nearly every time, most of them by
// updating the last fit's counts (trendFit) where the times allow; a hint
// from elsewhere (another series, nonsense bounds) changes nothing either.
// As in a refresh, a window's last value is a float64 that the next
// window has as a float32, and now and then a point is missing.
func TestTrendHint(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 7))
	same := func(a, b float64) bool {
		return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
	}
	series := []struct {
		name  string
		value func(i int) float64
		hits  float64 // the least share of fits after the first to hit
	}{
		{"noisy", func(int) float64 { return 1.5 + r.Float64()*0.1 }, 0.98},
		{"levels", func(i int) float64 { return 1.0 / 6 * (1 + float64((i*7)%23)/100) }, 0.98},
		{"rising", func(i int) float64 { return 1 + float64(i)*0.01 + r.NormFloat64()*0.05 }, 0.98},
		{"step", func(i int) float64 { return 1 + float64(i/150)*5 + r.Float64()*0.01 }, 0.95},
		{"odd", func(int) float64 { return []float64{1, 2, math.Copysign(0, -1), math.NaN()}[r.IntN(4)] }, 0},
	}
	const window, length = 120, 400
	for _, sc := range series {
		// From 0 the first windows' x are not exactly times less the
		// first (so no fit is kept: exactFrom); from a Unix time they are.
		for _, epoch := range []float64{0, 1767225600} {
			at := make([]float64, length)
			now := make([]float64, length) // the value in the window that ends with it
			for i := range length {
				at[i] = epoch + float64(i)*5 + float64(r.IntN(3))*0.001
				now[i] = sc.value(i)
			}
			var hint TrendHint
			var buf []float64
			hits, updates := 0, 0
			for start := 0; start+window <= length; start++ {
				var x, vs []float64 // from the window's first time, as readHistory has it
				for i := start; i < start+window; i++ {
					if i%31 == 7 && i != start {
						continue // a refresh without a mean
					}
					v := float64(float32(now[i]))
					if i == start+window-1 {
						v = now[i]
					}
					x, vs = append(x, at[i]-at[start]), append(vs, v)
				}
				got := [4]any{}
				got[0], got[1], got[2], got[3] = theilSen(x, vs, at[start], &buf, &hint)
				want := [4]any{}
				want[0], want[1], want[2], want[3] = theilSenSorted(x, vs)
				for k := range 3 {
					if !same(got[k].(float64), want[k].(float64)) || got[3] != want[3] {
						t.Fatalf("%s from %v, window at %d: got %v, want %v", sc.name, epoch, start, got, want)
					}
				}
				if start > 0 && hint.hit {
					hits++
					if hint.updated {
						updates++
					}
				}
				// Any other hint: another series', nonsense bounds, a fit
				// of other points.
				for _, other := range []TrendHint{
					{lo: -1, hi: 1, ok: true}, {lo: 5, hi: 6, ok: true}, {lo: 1, hi: -1, ok: true},
					{lo: math.NaN(), hi: 1, ok: true}, {lo: math.Inf(-1), hi: math.Inf(1), ok: true},
					{lo: hint.lo, hi: hint.lo, ok: true},
					otherFit(x, vs, at[start], len(vs)-3), otherFit(x, vs, at[start], 0), otherFit(x, vs, at[start], len(vs)/2),
				} {
					f, to, c, ok := theilSen(x, vs, at[start], &buf, &other)
					if !same(f, want[0].(float64)) || !same(to, want[1].(float64)) || !same(c, want[2].(float64)) || ok != want[3] {
						t.Fatalf("%s from %v, window at %d, hint %+v: got %v %v %v %v, want %v", sc.name, epoch, start, other, f, to, c, ok, want)
					}
				}
			}
			t.Logf("%s from %v: %d of %d fits hit, %d by updating the last", sc.name, epoch, hits, length-window, updates)
			if share := float64(hits) / float64(length-window); share < sc.hits {
				t.Errorf("%s from %v: %d of %d fits found the median within their hint, want at least %.0f%%", sc.name, epoch, hits, length-window, 100*sc.hits)
			}
			// From a Unix time most fits update the last; not those after
			// a jump or whose first point the last did not have (here every
			// 31st), nor odd ones.
			if share := float64(updates) / float64(length-window); epoch > 0 && share < sc.hits*0.75 {
				t.Errorf("%s from %v: %d of %d fits updated the last, want at least %.0f%%", sc.name, epoch, updates, length-window, 75*sc.hits)
			}
		}
	}
}

// otherFit is the hint a fit of (x, v) with the value at i changed
// leaves: a fit of other points, which the next fit can update (when i is
// among the last few) or not.
func otherFit(x, v []float64, at0 float64, i int) TrendHint {
	if i < 0 || i >= len(v) {
		return TrendHint{}
	}
	v = slices.Clone(v)
	v[i] = v[i]*1.01 + 0.01
	var hint TrendHint
	var buf []float64
	theilSen(x, v, at0, &buf, &hint)
	return hint
}

// TestMedianOf: medianOf is median, whatever the values.
func TestMedianOf(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 4))
	for i := range 5000 {
		vs := make([]float64, r.IntN(200))
		for j := range vs {
			switch i % 4 {
			case 0:
				vs[j] = r.NormFloat64()
			case 1:
				vs[j] = float64(r.IntN(3))
			case 2:
				vs[j] = []float64{0, math.Copysign(0, -1), math.NaN(), 1}[r.IntN(4)]
			default:
				vs[j] = float64(j) // sorted already
			}
		}
		want := median(vs)
		got := medianOf(slices.Clone(vs))
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("case %d: medianOf %v = %v, median %v", i, vs, got, want)
		}
	}
}

// bracketedSlope is medianSlope with the bracket [lo, hi]: bracketSlopes,
// then every slope when that misses.
func bracketedSlope(x, v []float64, buf *[]float64, lo, hi float64) (median float64, any bool) {
	if median, any, hit, _ := bracketSlopes(x, v, buf, lo, hi, false, nil); hit {
		return median, any
	}
	return allSlopes(x, v, buf)
}

// TestBracketedSlope: the median slope is median's of every slope
// whether the bracket holds it, misses it from either side, is empty or
// holds a NaN or −0 slope, with times in order, repeated or not in order.
func TestBracketedSlope(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 5))
	for i := range 600 {
		n := r.IntN(80)
		x, v := make([]float64, n), make([]float64, n)
		at := 0.0
		for j := range n {
			if r.IntN(10) != 0 {
				at += 5
			}
			x[j] = at
			switch i % 4 {
			case 0:
				v[j] = r.NormFloat64()
			case 1:
				v[j] = float64(r.IntN(3))
			case 2:
				v[j] = []float64{0, math.Copysign(0, -1), 1e-320, -1e-320}[r.IntN(4)]
			default:
				v[j] = float64(j)
			}
		}
		if i%3 == 2 && n > 1 {
			// Times out of order (a history is not bound to be in order).
			for range 3 {
				a, b := r.IntN(n), r.IntN(n)
				x[a], x[b] = x[b], x[a]
			}
		}
		var all []float64
		for a := range n {
			for b := a + 1; b < n; b++ {
				if dx := x[b] - x[a]; dx > 0 {
					all = append(all, (v[b]-v[a])/dx)
				}
			}
		}
		want := median(all)
		var lo, hi float64
		switch i % 5 {
		case 0: // around the median
			lo, hi = want-0.1, want+0.1
		case 1: // below it
			lo, hi = want-2, want-1
		case 2: // above it
			lo, hi = want+1, want+2
		case 3: // just the median
			lo, hi = want, want
		default:
			lo, hi = math.Inf(-1), math.Inf(1)
		}
		var buf []float64
		got, any := bracketedSlope(x, v, &buf, lo, hi)
		if any != (len(all) > 0) || (any && math.Float64bits(got) != math.Float64bits(want)) {
			t.Fatalf("case %d (n %d, bracket [%v, %v]): %v %v, want %v of %v", i, n, lo, hi, got, any, want, all)
		}
		got, any = medianSlope(x, v, 0, &buf, nil)
		if any != (len(all) > 0) || (any && math.Float64bits(got) != math.Float64bits(want)) {
			t.Fatalf("case %d (n %d): medianSlope %v %v, want %v", i, n, got, any, want)
		}
	}
}

// BenchmarkTheilSen fits the trends of full histories (120 points, so
// 7,140 slopes), a different one each time as for a fleet's nodes: noisy
// means, and means on a few levels (many equal slopes). Without a hint,
// each fit stands alone; hinted, each series moves on by a point from one
// fit to the next, as a node's history does from one refresh to the next,
// and carries its fit's TrendHint.
func BenchmarkTheilSen(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 6))
	for _, tc := range []struct {
		name string
		mean func(i, j int) float64
	}{
		{"noisy", func(int, int) float64 { return 1.5 + r.Float64()*0.1 }},
		{"levels", func(i, j int) float64 { return float64(float32(1.0 / 6 * (1 + float64((i*7+j*3)%23)/100))) }},
	} {
		const series, points, moves = 64, 120, 512
		x := make([]float64, points)
		for i := range x {
			x[i] = float64(i * 5)
		}
		vs := make([][]float64, series)
		for j := range series {
			vs[j] = make([]float64, points+moves)
			for i := range vs[j] {
				vs[j][i] = tc.mean(i, j)
			}
		}
		for _, hinted := range []bool{false, true} {
			name := tc.name
			if hinted {
				name += "/hinted"
			}
			b.Run(name, func(b *testing.B) {
				hints := make([]TrendHint, series)
				hits := 0
				var buf []float64
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					j, at := i%series, i/series%moves
					var hint *TrendHint
					if hinted {
						hint = &hints[j]
					}
					theilSen(x, vs[j][at:at+points], 1767225600, &buf, hint)
					if hint != nil && hint.hit {
						hits++
					}
					i++
				}
				if hinted {
					b.ReportMetric(float64(hits)/float64(i), "hit-share")
				}
			})
		}
	}
}
