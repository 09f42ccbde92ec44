package compact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// samePoint reports how a and b differ, bit for bit ("" when they do not).
func samePoint(a, b diagnose.Point) string {
	if !a.At.Equal(b.At) || a.At.Location() != b.At.Location() {
		return fmt.Sprintf("At %v (%p) != %v (%p)", a.At, a.At.Location(), b.At, b.At.Location())
	}
	if a.Up != b.Up || a.Status != b.Status {
		return fmt.Sprintf("Up/Status %v/%v != %v/%v", a.Up, a.Status, b.Up, b.Status)
	}
	ga, gb := gauges(&a), gauges(&b)
	for i := range ga {
		switch x, y := *ga[i], *gb[i]; {
		case (x == nil) != (y == nil):
			return fmt.Sprintf("gauge %d: %v != %v", i, x, y)
		case x != nil && math.Float64bits(*x) != math.Float64bits(*y):
			return fmt.Sprintf("gauge %d: %v (%#x) != %v (%#x)", i, *x, math.Float64bits(*x), *y, math.Float64bits(*y))
		}
	}
	return ""
}

func checkHistory(t *testing.T, h *History, want []diagnose.Point) {
	t.Helper()
	if h.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", h.Len(), len(want))
	}
	got, err := h.Points()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d points, want %d", len(got), len(want))
	}
	for i := range got {
		if d := samePoint(got[i], want[i]); d != "" {
			t.Fatalf("point %d of %d: %s", i, len(got), d)
		}
	}
}

// randomPoints makes n points as odd as the type allows.
func randomPoints(r *rand.Rand, n int) []diagnose.Point {
	zone := time.FixedZone("UTC+8", 8*3600)
	nan := math.Float64frombits(0x7ff8_0000_dead_beef)
	pool := []float64{0, math.Copysign(0, -1), 1, 2, 40, 0.3, 1.0 / 3, math.Inf(1), math.Inf(-1), nan, math.NaN(), -5, math.MaxFloat64, math.SmallestNonzeroFloat64}
	at := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	var vals [numGauges]float64
	var out []diagnose.Point
	unit := []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second}[r.IntN(4)]
	for range n {
		switch r.IntN(20) {
		case 0:
			at = at.Add(time.Duration(r.Int64N(1 << 40)))
		case 1:
			at = at.Add(-time.Duration(r.Int64N(1 << 40)))
		default:
			at = at.Add(5*time.Second + time.Duration(r.IntN(41)-20)*unit)
		}
		p := diagnose.Point{At: at, Up: r.IntN(10) > 0, Status: llmdiagv1.Status(r.IntN(6))}
		switch r.IntN(30) {
		case 0:
			p.At = time.Time{}
		case 1:
			p.At = time.Date(1, 2, 3, 4, 5, 6, 7, zone)
		case 2:
			p.At = time.Date(3000, 1, 1, 0, 0, 0, 1, time.UTC)
		case 3:
			p.At = at.Local()
		case 4:
			p.At = at.In(zone)
		case 5:
			p.Status = llmdiagv1.Status(-3 + r.IntN(200))
		}
		for i, g := range gauges(&p) {
			switch r.IntN(8) {
			case 0: // unknown
			case 1:
				vals[i] = pool[r.IntN(len(pool))]
				*g = &vals[i]
			case 2:
				vals[i] = r.NormFloat64() * 1e3
				*g = &vals[i]
			case 3:
				vals[i] = math.Round(vals[i] + float64(r.IntN(7)-3))
				*g = &vals[i]
			default: // the same, or a small drift
				if r.IntN(2) == 0 {
					vals[i] *= 1 + 0.01*r.NormFloat64()
				}
				*g = &vals[i]
			}
			if *g != nil {
				v := **g
				*g = &v
			}
		}
		out = append(out, p)
	}
	return out
}

func TestHistoryRoundTrip(t *testing.T) {
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		limit := 1 + r.IntN(100)
		if seed%3 == 0 {
			limit = 360
		}
		points := randomPoints(r, r.IntN(3*limit+40))
		var h History
		for i, p := range points {
			if err := h.Append(p, limit); err != nil {
				t.Fatal(err)
			}
			if i%17 == 0 || i == len(points)-1 {
				snap := h.Snapshot()
				checkHistory(t, &snap, points[max(0, i+1-limit):i+1])
			}
		}
		checkHistory(t, &h, points[max(0, len(points)-limit):])
	}
}

func TestHistorySnapshotIsolated(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	points := randomPoints(r, 100)
	var h History
	for _, p := range points[:50] {
		if err := h.Append(p, 40); err != nil {
			t.Fatal(err)
		}
	}
	snap := h.Snapshot()
	for _, p := range points[50:] {
		if err := h.Append(p, 40); err != nil {
			t.Fatal(err)
		}
	}
	checkHistory(t, &snap, points[10:50])
	checkHistory(t, &h, points[60:])
}

func TestHistoryEmptyAndCorrupt(t *testing.T) {
	var h History
	if got, err := h.Points(); err != nil || len(got) != 0 || h.Len() != 0 {
		t.Fatalf("empty history: %v %v", got, err)
	}
	for _, p := range randomPoints(rand.New(rand.NewPCG(1, 2)), 10) {
		if err := h.Append(p, 10); err != nil {
			t.Fatal(err)
		}
	}
	h.tail = h.tail[:len(h.tail)/2]
	if _, err := h.Points(); err == nil {
		t.Fatal("truncated history decoded without error")
	}
}

func FuzzHistory(f *testing.F) {
	f.Add(uint64(1), uint16(30), uint16(100))
	f.Fuzz(func(t *testing.T, seed uint64, limit, n uint16) {
		r := rand.New(rand.NewPCG(seed, 3))
		points := randomPoints(r, int(n%2000))
		lim := int(limit%1000) + 1
		var h History
		for _, p := range points {
			if err := h.Append(p, lim); err != nil {
				t.Fatal(err)
			}
		}
		checkHistory(t, &h, points[max(0, len(points)-lim):])
	})
}

// FuzzHistoryCorrupt decodes arbitrary bytes: an error, never a panic.
func FuzzHistoryCorrupt(f *testing.F) {
	var h History
	for _, p := range randomPoints(rand.New(rand.NewPCG(3, 3)), 20) {
		if err := h.Append(p, 100); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(h.tail, uint8(h.st.n))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		c := History{per: maxChunk, tail: b, locs: []*time.Location{time.UTC}}
		c.st.n = int(n % (maxChunk + 1))
		c.Points()
	})
}
