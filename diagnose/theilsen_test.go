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
		f1, t1, c1, ok1 := theilSen(x, v)
		f2, t2, c2, ok2 := theilSenSorted(x, v)
		if !same(f1, f2) || !same(t1, t2) || !same(c1, c2) || ok1 != ok2 {
			t.Fatalf("case %d (n %d): got %v %v %v %v, want %v %v %v %v", i, n, f1, t1, c1, ok1, f2, t2, c2, ok2)
		}
		if !slices.EqualFunc(v, vIn, same) {
			t.Fatalf("case %d: theilSen changed its input", i)
		}
	}
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

// TestMedianSlope: medianSlope is median, whether its sample brackets the
// median (noise), misses it either way (a pattern with the sample's stride
// as period), meets sorted values or cannot order the values (NaN, −0).
func TestMedianSlope(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 5))
	for i := range 400 {
		n := 1000 + r.IntN(3000)
		vs := make([]float64, n, 2*n)
		stride := n / 255
		for j := range vs {
			switch i % 6 {
			case 0:
				vs[j] = r.NormFloat64()
			case 1:
				vs[j] = float64(j % stride) // the sample sees only the least
			case 5:
				vs[j] = float64(-(j % stride)) // the sample sees only the greatest
			case 2:
				vs[j] = float64(j)
			case 3:
				vs[j] = float64(r.IntN(5))
			default:
				vs[j] = []float64{math.Copysign(0, -1), 0, 1, math.NaN()}[r.IntN(4)]
			}
		}
		want := median(vs)
		got := medianSlope(append(make([]float64, 0, 2*n), vs...))
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("case %d (n %d): medianSlope = %v, median %v", i, n, got, want)
		}
	}
}

// BenchmarkTheilSen fits the trend of a full history (120 points, so 7,140
// slopes) of noisy means.
func BenchmarkTheilSen(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 6))
	x, v := make([]float64, 120), make([]float64, 120)
	for i := range x {
		x[i], v[i] = float64(i*5), 1.5+r.Float64()*0.1
	}
	b.ReportAllocs()
	for b.Loop() {
		theilSen(x, v)
	}
}
