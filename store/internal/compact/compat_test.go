package compact

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// pointsText writes points one a line with the figures the first layout
// kept (every gauge but E2EP99), exactly: the form of the v1 goldens.
func pointsText(points []diagnose.Point) string {
	var b strings.Builder
	f := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatFloat(*v, 'g', -1, 64)
	}
	for _, p := range points {
		fmt.Fprintf(&b, "%s up=%v status=%d queue=%s running=%s kv=%s e2e_mean=%s gen=%s\n",
			p.At.Format("2006-01-02T15:04:05.000000000Z07:00"), p.Up, p.Status, f(p.Queue), f(p.Running), f(p.KVPressure), f(p.E2EMean), f(p.GenerationRate))
	}
	return b.String()
}

// The v1 fixtures are histories as the v1 layout, before E2EP99, wrote them
// (its MarshalBinary): storetest.MakeNode(43, 75, nil)'s
// points (an overloaded node) appended with limit 60, so the first chunk
// has 15 points dropped, and MakeNode(3, 40, nil)'s (a node down for its
// last 20 refreshes, its gauges unknown) with limit 120. Each .txt golden
// is what that build's Points decoded from it.
var v1Fixtures = []string{"history-v1-overloaded", "history-v1-down"}

// TestHistoryDecodesV1 reads histories the previous layout wrote, as the
// Redis store holds them and as a memory store's chunks hold them (the
// same bytes): every point decodes as that build decoded it, without
// E2EP99; appending continues the old tail chunk, and a point with E2EP99
// makes the history version 2.
func TestHistoryDecodesV1(t *testing.T) {
	for _, name := range v1Fixtures {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + name + ".bin")
			if err != nil {
				t.Fatal(err)
			}
			golden, err := os.ReadFile("testdata/" + name + ".txt")
			if err != nil {
				t.Fatal(err)
			}
			if raw[0] != historyVersion1 {
				t.Fatalf("fixture version %d, want 1", raw[0])
			}
			var h History
			if err := h.UnmarshalBinary(raw); err != nil {
				t.Fatal(err)
			}
			old, err := h.Points()
			if err != nil {
				t.Fatal(err)
			}
			if got := pointsText(old); got != string(golden) {
				t.Fatalf("decoded v1 history differs from the golden:\n%s\nwant:\n%s", got, golden)
			}
			for i, p := range old {
				if p.E2EP99 != nil {
					t.Fatalf("point %d of a v1 history has E2EP99 %v", i, *p.E2EP99)
				}
			}

			// A point without E2EP99 keeps version 1: older binaries still
			// read the history.
			last := old[len(old)-1]
			plain := last
			plain.At = last.At.Add(5 * time.Second)
			withP99 := plain
			withP99.At = plain.At.Add(5 * time.Second)
			p99, queue := 31.25, 7.0
			withP99.E2EP99, withP99.Queue, withP99.Up, withP99.Status = &p99, &queue, true, llmdiagv1.Status_STATUS_CRIT
			if err := h.Append(plain, 1000); err != nil {
				t.Fatal(err)
			}
			if b, err := h.MarshalBinary(); err != nil || b[0] != historyVersion1 {
				t.Fatalf("v1 history and a point without E2EP99: marshalled as version %d (%v), want 1", b[0], err)
			}
			if err := h.Append(withP99, 1000); err != nil {
				t.Fatal(err)
			}
			want := append(append(old[:len(old):len(old)], plain), withP99)
			checkHistory(t, &h, want)
			b, err := h.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if b[0] != historyVersion2 {
				t.Fatalf("history with E2EP99 marshalled as version %d, want 2", b[0])
			}
			var back History
			if err := back.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			checkHistory(t, &back, want)
		})
	}
}

// TestHistoryV1Layout pins the first layout, whose bits E2EP99 must not
// change: points without E2EP99 encode byte for byte as the previous build
// encoded them (the down fixture dropped no points, so re-encoding its
// points rebuilds it whole).
func TestHistoryV1Layout(t *testing.T) {
	raw, err := os.ReadFile("testdata/history-v1-down.bin")
	if err != nil {
		t.Fatal(err)
	}
	var h History
	if err := h.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	points, err := h.Points()
	if err != nil {
		t.Fatal(err)
	}
	var again History
	for _, p := range points {
		if err := again.Append(p, 120); err != nil {
			t.Fatal(err)
		}
	}
	b, err := again.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(raw) {
		t.Fatalf("re-encoded v1 points: %d bytes differing from the %d the previous build wrote", len(b), len(raw))
	}
}
