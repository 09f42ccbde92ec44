package diagnose

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendFixed: appendFixed is strconv's 'f' format, bit for bit, for
// values of every size, ties (exact and a unit in the last place either
// side) and those it leaves to strconv.
func TestAppendFixed(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 17))
	check := func(v float64, prec int) {
		t.Helper()
		want := strconv.FormatFloat(v, 'f', prec, 64)
		if got := string(appendFixed([]byte("x"), v, prec)); got != "x"+want {
			t.Fatalf("appendFixed(%v (%#x), %d) = %q, want %q", v, math.Float64bits(v), prec, got[1:], want)
		}
	}
	special := []float64{0, math.Copysign(0, -1), -1, -0.5, math.NaN(), math.Inf(1), math.Inf(-1),
		math.SmallestNonzeroFloat64, math.MaxFloat64, 1 << 52, 1<<52 - 0.5, 1 << 53, 4503599627370495.5 / 1000}
	for prec := -1; prec <= 5; prec++ {
		for _, v := range special {
			check(v, prec)
		}
		for range 200000 {
			var v float64
			switch r.IntN(5) {
			case 0: // any size
				v = math.Float64frombits(r.Uint64() &^ (1 << 63))
			case 1: // what a diagnosis formats
				v = r.Float64() * math.Pow(10, float64(r.IntN(12)-4))
			case 2: // ties at prec, exact in binary or not
				v = (float64(r.IntN(1e6)) + 0.5) / math.Pow(10, float64(max(prec, 0)))
			case 3: // dyadic: ties exact in binary
				v = float64(r.IntN(1<<20)) / float64(uint64(1)<<r.IntN(12))
			default: // a unit in the last place around a tie
				v = (float64(r.IntN(1e6)) + 0.5) / math.Pow(10, float64(max(prec, 0)))
				v = math.Nextafter(v, math.Inf(2*r.IntN(2)-1))
			}
			check(v, prec)
		}
	}
}

// BenchmarkAppendFixed: appendFixed against strconv on what a diagnosis
// formats.
func BenchmarkAppendFixed(b *testing.B) {
	vs := make([]float64, 1024)
	r := rand.New(rand.NewPCG(13, 18))
	for i := range vs {
		vs[i] = r.Float64() * math.Pow(10, float64(r.IntN(6)-2))
	}
	var buf []byte
	b.Run("appendFixed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			buf = appendFixed(buf[:0], vs[i%len(vs)], 1+i%2)
			i++
		}
	})
	b.Run("strconv", func(b *testing.B) {
		i := 0
		for b.Loop() {
			buf = strconv.AppendFloat(buf[:0], vs[i%len(vs)], 'f', 1+i%2, 64)
			i++
		}
	})
}
