package fanout

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// A sentLog answers like a map whatever its size: across the move from list
// to map, after deletes, and for nodes it never held.
func TestSentLogIsAMap(t *testing.T) {
	for _, n := range []int{1, fewSent, fewSent + 1, 3 * fewSent} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var l sentLog
			want := map[string]sent{}
			node := func(i int) string { return fmt.Sprintf("n-%d", i) }
			for i := range n {
				p := sent{score: float64(i), status: llmdiagv1.Status(i % 4)}
				l.put(node(i), p)
				want[node(i)] = p
			}
			l.put(node(0), sent{score: 42}) // overwrite
			want[node(0)] = sent{score: 42}
			for i := 0; i < n; i += 2 {
				l.delete(node(i))
				delete(want, node(i))
			}
			l.delete("never-held")
			if l.len() != len(want) {
				t.Fatalf("len %d, want %d", l.len(), len(want))
			}
			for i := range n + 1 {
				got, ok := l.get(node(i))
				w, wok := want[node(i)]
				if ok != wok || got != w {
					t.Fatalf("get(%s) = %+v %v, want %+v %v", node(i), got, ok, w, wok)
				}
			}
		})
	}
}

// observedAfter orders observation times as time.Time does, to the
// nanosecond, on either side of the Unix epoch.
func TestSentObservedAfter(t *testing.T) {
	base := time.Date(2026, 11, 30, 12, 0, 0, 500, time.UTC)
	tests := []struct {
		name    string
		at, cmp time.Time
	}{
		{"same", base, base},
		{"a nanosecond later", base, base.Add(time.Nanosecond)},
		{"a nanosecond earlier", base, base.Add(-time.Nanosecond)},
		{"a second later, fewer nanoseconds", base, base.Add(time.Second - 400*time.Nanosecond)},
		{"before the epoch", time.Unix(-5, 7), time.Unix(-5, 8)},
		{"across the epoch", time.Unix(-1, 999_999_999), time.Unix(0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := sentOf(&llmdiagv1.NodeHealth{ObservedAt: timestamppb.New(tt.at)})
			if !p.hasTime {
				t.Fatal("no observation time recorded")
			}
			if got, want := p.observedAfter(tt.cmp), tt.cmp.After(tt.at); got != want {
				t.Fatalf("observedAfter(%v) = %v, want %v (recorded %v)", tt.cmp, got, want, tt.at)
			}
		})
	}
	if sentOf(&llmdiagv1.NodeHealth{}).hasTime {
		t.Fatal("a state without an observation time recorded one")
	}
}
