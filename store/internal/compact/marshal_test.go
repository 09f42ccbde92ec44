package compact

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
)

// portablePoints are randomPoints with every time in UTC or Local.
func portablePoints(r *rand.Rand, n int) []diagnose.Point {
	ps := randomPoints(r, n)
	for i := range ps {
		if l := ps[i].At.Location(); l != time.UTC && l != time.Local {
			ps[i].At = ps[i].At.UTC()
		}
	}
	return ps
}

// TestHistoryMarshalContinues: a history that goes through bytes after
// every append encodes exactly as one that never did, and decodes the same.
func TestHistoryMarshalContinues(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		limit := []int{1, 3, 31, 32, 33, 120, 500}[seed%7]
		points := portablePoints(r, 1+r.IntN(300))
		var direct, viaBytes History
		for i, p := range points {
			if err := direct.Append(p, limit); err != nil {
				t.Fatal(err)
			}
			b, err := viaBytes.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var back History
			if err := back.UnmarshalBinary(b); err != nil {
				t.Fatalf("seed %d point %d: %v", seed, i, err)
			}
			if err := back.Append(p, limit); err != nil {
				t.Fatal(err)
			}
			viaBytes = back
			d1, _ := direct.MarshalBinary()
			d2, _ := viaBytes.MarshalBinary()
			if !bytes.Equal(d1, d2) {
				t.Fatalf("seed %d point %d (limit %d): bytes differ after a round trip", seed, i, limit)
			}
		}
		want := points[max(0, len(points)-limit):]
		checkHistory(t, &viaBytes, want)
		if direct.Size() != viaBytes.Size() {
			t.Fatalf("Size %d != %d", direct.Size(), viaBytes.Size())
		}
	}
}

func TestHistoryMarshalRejects(t *testing.T) {
	var h History
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var empty History
	if err := empty.UnmarshalBinary(b); err != nil || empty.Len() != 0 {
		t.Fatalf("empty: %v, Len %d", err, empty.Len())
	}
	zone := time.FixedZone("UTC+8", 8*3600)
	h.Append(diagnose.Point{At: time.Now().In(zone)}, 10)
	if _, err := h.MarshalBinary(); !errors.Is(err, ErrLocation) {
		t.Fatalf("other location: %v, want ErrLocation", err)
	}
	// Truncated or altered bytes give an error or some history, never a
	// panic.
	r := rand.New(rand.NewPCG(1, 2))
	var full History
	for _, p := range portablePoints(r, 100) {
		full.Append(p, 70)
	}
	good, _ := full.MarshalBinary()
	for i := range len(good) {
		var x History
		if x.UnmarshalBinary(good[:i]) == nil {
			x.Points()
		}
		bad := bytes.Clone(good)
		bad[i] ^= byte(1 + r.IntN(255))
		if x.UnmarshalBinary(bad) == nil {
			x.Points()
		}
	}
}
