package compact

import (
	"testing"

	"github.com/llmdiag/llmdiag/store/internal/storetest"
)

func benchFleet(n, points int) []storetest.Node {
	var out []storetest.Node
	storetest.Fleet(n, func(int) int { return points }, func(_ int, node storetest.Node) { out = append(out, node) })
	return out
}

func BenchmarkRecordEncode(b *testing.B) {
	fleet := benchFleet(50, 2)
	var c Codec
	i := 0
	for b.Loop() {
		n := fleet[i%len(fleet)]
		i++
		if _, err := c.Encode(n.Record.Node.GetId(), n.Record); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecordDecode(b *testing.B) {
	fleet := benchFleet(50, 2)
	var c Codec
	var enc [][]byte
	for _, n := range fleet {
		e, err := c.Encode(n.Record.Node.GetId(), n.Record)
		if err != nil {
			b.Fatal(err)
		}
		enc = append(enc, e)
	}
	i := 0
	for b.Loop() {
		k := i % len(fleet)
		i++
		if _, err := c.Decode(fleet[k].Record.Node.GetId(), enc[k]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHistoryAppend(b *testing.B) {
	n := benchFleet(1, 400)[0]
	var h History
	i := 0
	for b.Loop() {
		if err := h.Append(n.Points[i%len(n.Points)], 360); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkHistoryPoints(b *testing.B) {
	n := benchFleet(1, 400)[0]
	var h History
	for _, p := range n.Points {
		if err := h.Append(p, 360); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := h.Points(); err != nil {
			b.Fatal(err)
		}
	}
}
