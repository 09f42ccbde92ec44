package memory_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/storetest"
	"github.com/llmdiag/llmdiag/store/memory"
)

// BenchmarkStoreMemoryPerNode fills a store with 10,000 vLLM nodes as
// refresh.Loop leaves them after running a while (storetest.Fleet: all five
// latency distributions on vLLM's 22/19/21-bucket layouts, the English
// Diagnosis of them, a full history of DefaultHistoryLen points made by
// refresh.PointOf) and reports, per node:
//
//   - heap-B/node: live heap the store holds (HeapAlloc after GC, minus
//     before);
//   - hist-heap-B/node: the history's share of heap-B/node: heap-B/node
//     minus what a store holding the same records with a one-point history
//     takes;
//   - plain/compact: the baseline, measured in the same run (the same nodes
//     as proto.Clone copies and []diagnose.Point, as the store once kept
//     them), over heap-B/node;
//   - proto-B/node: the node's data serialised plainly: proto.Size of the
//     Node, NodeMetrics and Diagnosis Get returns, plus the history at 8
//     bytes per time and value (10 + 8 per known gauge, per point);
//   - proto-hist-B/node: the history's part of proto-B/node;
//   - enc-B/node, enc-hist-B/node: the bytes the store keeps encoded, and
//     the history's part.
//
// Medians of -benchtime 1x -count 3 (AMD EPYC, 2 cores, Go 1.26), 120
// points: heap 3723 B/node (history 2404), 6.18× less than plain; encoded
// 3228 B (record 893, history 2335: 19.5 B a point). With 360 points the
// history alone is 6536 B encoded: a longer --history costs about 20 B a
// point and refresh.
func BenchmarkStoreMemoryPerNode(b *testing.B) {
	const nodes = 10_000
	const historyLen = memory.DefaultHistoryLen
	ctx := context.Background()
	var heap, histHeap, ser, serHist, enc, encHist float64
	for range b.N {
		var ms runtime.MemStats
		readHeap := func() float64 {
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			return float64(ms.HeapAlloc)
		}
		before := readHeap()
		full := memory.New(memory.Options{HistoryLen: historyLen}, "bench")
		// recs holds the same records with a one-point history.
		recs := memory.New(memory.Options{HistoryLen: 1}, "bench")
		// A few refreshes past a full history, varying by node, as after
		// running a while.
		storetest.Fleet(nodes, func(i int) int { return historyLen + 1 + i%40 }, func(i int, n storetest.Node) {
			placeholder := &store.Record{Node: &llmdiagv1.Node{Id: n.Record.Node.GetId()}}
			for k, p := range n.Points {
				rec := placeholder
				if k == len(n.Points)-1 {
					rec = n.Record
					if err := recs.Put(ctx, rec, p); err != nil {
						b.Fatal(err)
					}
				}
				if err := full.Put(ctx, rec, p); err != nil {
					b.Fatal(err)
				}
			}
		})
		both := readHeap()
		for i := range nodes {
			id := storetest.ID(i)
			rec, err := full.Get(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			h, err := full.History(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			hs := plainHistorySize(h)
			er, eh := full.EncodedSize(id)
			enc += float64(er+eh) / nodes
			encHist += float64(eh) / nodes
			ser += float64(proto.Size(rec.Node)+proto.Size(rec.Metrics)+proto.Size(rec.Diagnosis)+hs) / nodes
			serHist += float64(hs) / nodes
		}
		runtime.KeepAlive(full)
		full = nil
		recsOnly := readHeap()
		runtime.KeepAlive(recs)
		heap += (both - recsOnly) / nodes
		histHeap += (both - recsOnly - (recsOnly - before)) / nodes
	}
	b.ReportMetric(heap/float64(b.N), "heap-B/node")
	b.ReportMetric(plainHeap(b, nodes, historyLen)/heap, "plain/compact")
	b.ReportMetric(histHeap/float64(b.N), "hist-heap-B/node")
	b.ReportMetric(ser/float64(b.N), "proto-B/node")
	b.ReportMetric(serHist/float64(b.N), "proto-hist-B/node")
	b.ReportMetric(enc/float64(b.N), "enc-B/node")
	b.ReportMetric(encHist/float64(b.N), "enc-hist-B/node")
}

// plainHeap is the baseline for heap-B/node, measured in the same run: the
// live heap per node of the same fleet kept as the store once did, as
// proto.Clone copies of the records and []diagnose.Point histories.
func plainHeap(b *testing.B, nodes, historyLen int) float64 {
	type plainNode struct {
		rec  *store.Record
		hist []diagnose.Point
	}
	var ms runtime.MemStats
	readHeap := func() float64 {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc)
	}
	before := readHeap()
	plain := make(map[string]plainNode, nodes)
	storetest.Fleet(nodes, func(i int) int { return historyLen + 1 + i%40 }, func(i int, n storetest.Node) {
		h := make([]diagnose.Point, 0, historyLen)
		for _, p := range n.Points[len(n.Points)-historyLen:] {
			for _, v := range []**float64{&p.Queue, &p.Running, &p.KVPressure, &p.E2EMean, &p.GenerationRate} {
				if *v != nil {
					c := **v
					*v = &c
				}
			}
			h = append(h, p)
		}
		rec := n.Record
		plain[storetest.ID(i)] = plainNode{
			rec:  &store.Record{Node: proto.Clone(rec.Node).(*llmdiagv1.Node), Metrics: proto.Clone(rec.Metrics).(*llmdiagv1.NodeMetrics), Diagnosis: proto.Clone(rec.Diagnosis).(*llmdiagv1.Diagnosis)},
			hist: h,
		}
	})
	after := readHeap()
	runtime.KeepAlive(plain)
	if len(plain) != nodes {
		b.Fatalf("plain baseline holds %d nodes, want %d", len(plain), nodes)
	}
	return (after - before) / float64(nodes)
}

// plainHistorySize is h written plainly: per point the time and flags (10
// bytes) and 8 bytes per known gauge.
func plainHistorySize(h []diagnose.Point) int {
	n := 0
	for _, p := range h {
		n += 10
		for _, v := range []*float64{p.Queue, p.Running, p.KVPressure, p.E2EMean, p.GenerationRate, p.E2EP99} {
			if v != nil {
				n += 8
			}
		}
	}
	return n
}

// opsFleet is a store of n nodes with a full history, and the next refresh's
// records and points.
func opsFleet(b *testing.B, n int) (*memory.Store, []storetest.Node) {
	b.Helper()
	const historyLen = memory.DefaultHistoryLen
	ctx := context.Background()
	s := memory.New(memory.Options{HistoryLen: historyLen}, "bench")
	var fleet []storetest.Node
	storetest.Fleet(n, func(int) int { return historyLen + 1 }, func(_ int, fn storetest.Node) {
		for _, p := range fn.Points {
			if err := s.Put(ctx, fn.Record, p); err != nil {
				b.Fatal(err)
			}
		}
		fleet = append(fleet, fn)
	})
	return s, fleet
}

// BenchmarkStoreRefreshCycle is what refresh.Loop asks of the store per node
// and refresh: Get, History, Put.
func BenchmarkStoreRefreshCycle(b *testing.B) {
	ctx := context.Background()
	s, fleet := opsFleet(b, 500)
	i := 0
	for b.Loop() {
		fn := fleet[i%len(fleet)]
		i++
		id := fn.Record.Node.GetId()
		if _, err := s.Get(ctx, id); err != nil {
			b.Fatal(err)
		}
		if _, err := s.History(ctx, id); err != nil {
			b.Fatal(err)
		}
		p := fn.Points[len(fn.Points)-1]
		p.At = p.At.Add(5 * time.Duration(i) * time.Second)
		if err := s.Put(ctx, fn.Record, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreList lists a store of 500 nodes.
func BenchmarkStoreList(b *testing.B) {
	ctx := context.Background()
	s, _ := opsFleet(b, 500)
	for b.Loop() {
		if _, err := s.List(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreRefreshPass is one refresh of a 10,000-node store: per node,
// what refresh.Loop asks of the store (Get, History, Put). Unlike
// BenchmarkStoreRefreshCycle it pays for the garbage collector marking the
// whole store.
func BenchmarkStoreRefreshPass(b *testing.B) {
	const nodes = 10_000
	const historyLen = memory.DefaultHistoryLen
	ctx := context.Background()
	s := memory.New(memory.Options{HistoryLen: historyLen}, "bench")
	last := make([]diagnose.Point, nodes)
	storetest.Fleet(nodes, func(int) int { return historyLen + 1 }, func(i int, n storetest.Node) {
		placeholder := &store.Record{Node: &llmdiagv1.Node{Id: n.Record.Node.GetId()}}
		for k, p := range n.Points {
			rec := placeholder
			if k == len(n.Points)-1 {
				rec = n.Record
			}
			if err := s.Put(ctx, rec, p); err != nil {
				b.Fatal(err)
			}
		}
		last[i] = n.Points[len(n.Points)-1]
	})
	runtime.GC()
	pass := 0
	for b.Loop() {
		pass++
		for i := range nodes {
			id := storetest.ID(i)
			rec, err := s.Get(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.History(ctx, id); err != nil {
				b.Fatal(err)
			}
			p := last[i]
			p.At = p.At.Add(time.Duration(pass) * 5 * time.Second)
			if err := s.Put(ctx, rec, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/node")
}
