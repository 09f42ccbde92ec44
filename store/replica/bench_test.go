package replica_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/compact"
	"github.com/llmdiag/llmdiag/store/internal/storetest"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/redisstore"
	"github.com/llmdiag/llmdiag/store/replica"
)

// countingConn counts the bytes read from Redis.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// dumpOnly hides a shared store's write log, so the replica reads it whole
// on every sync, as it did before the log.
type dumpOnly struct {
	store.Store
	replica.Dumper
}

// BenchmarkReplicaSync measures one replica sync against a real
// redis-server holding 10,000 storetest.Fleet nodes, each with a full
// history (DefaultHistoryLen points), of which 1% (100 nodes, written by
// another client between syncs, untimed) change before each sync:
//
//   - full: the replica reads the whole store on every sync (Dump);
//   - incremental: it reads only what the write log says changed.
//
// bytes/sync is what the replica's client read from Redis during the sync
// (its connections' bytes, replies of every command); nodes/sync is how many
// nodes' records and histories it read. incremental also reports ratio-%:
// its bytes/sync over those of its own first sync, a full one, on the same
// data in the same run. Run it with -benchtime 5x: a full sync takes
// about a second of CPU here.
func BenchmarkReplicaSync(b *testing.B) {
	const nodes, changing = 10_000, 100
	srv := redistest.Start(b)
	ctx := context.Background()
	wdb, err := redisstore.NewClient(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer wdb.Close()
	w := redisstore.New(wdb, redisstore.Options{})
	fleet := seed(b, ctx, wdb, w, nodes)
	var read atomic.Int64
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr(),
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, n: &read}, nil
		},
	})
	defer rdb.Close()
	shared := redisstore.New(rdb, redisstore.Options{})
	next := 0 // the next node to change
	step := 0 // refreshes so far: observed times move on
	change := func() {
		step++
		at := storetest.End.Add(time.Duration(step) * 5 * time.Second)
		for range changing {
			n := fleet[next%len(fleet)]
			next++
			m := proto.Clone(n.Metrics).(*llmdiagv1.NodeMetrics)
			m.ObservedAt = timestamppb.New(at)
			if err := w.Put(ctx, &store.Record{Node: n.Node, Metrics: m}, diagnose.Point{At: at, Up: true}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, bc := range []struct {
		name   string
		shared store.Store
	}{
		{"full", dumpOnly{Store: shared, Dumper: shared}},
		{"incremental", shared},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := replica.New(bc.shared, memory.New(memory.Options{}, "copy"), replica.Options{FullEvery: time.Hour})
			before := read.Load()
			if err := r.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			first := read.Load() - before
			var bytes, got int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				change()
				before := read.Load()
				b.StartTimer()
				if err := r.Sync(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				bytes += read.Load() - before
				got += int64(r.Stats().LastRead)
				b.StartTimer()
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/sync")
			b.ReportMetric(float64(got)/float64(b.N), "nodes/sync")
			if bc.name == "incremental" {
				b.ReportMetric(100*float64(bytes)/float64(b.N)/float64(first), "ratio-%")
			}
		})
	}
}

// seed writes n nodes of storetest.Fleet into Redis: each node's newest
// record through Put (so the index and the write log hold it), then its
// full history straight into its history key, in the layout Put keeps
// (package redisstore's documentation): what writing every point through
// Put would leave, a hundred times faster. It returns the records.
func seed(b *testing.B, ctx context.Context, rdb redis.UniversalClient, w *redisstore.Store, n int) []*store.Record {
	b.Helper()
	type node struct {
		rec  *store.Record
		last diagnose.Point
		hist []byte
	}
	work := make(chan node)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for nd := range work {
				if err := w.Put(ctx, nd.rec, nd.last); err != nil {
					b.Error(err)
					continue
				}
				key := redisstore.DefaultPrefix + "{n:" + nd.rec.Node.GetId() + "}:hist"
				if err := rdb.SetArgs(ctx, key, nd.hist, redis.SetArgs{KeepTTL: true}).Err(); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	out := make([]*store.Record, 0, n)
	storetest.Fleet(n, func(int) int { return redisstore.DefaultHistoryLen }, func(_ int, nd storetest.Node) {
		var h compact.History
		for _, p := range nd.Points {
			if err := h.Append(p, redisstore.DefaultHistoryLen); err != nil {
				b.Fatal(err)
			}
		}
		hb, err := h.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		rec := &store.Record{Node: nd.Record.Node, Metrics: nd.Record.Metrics}
		out = append(out, rec)
		work <- node{rec: rec, last: nd.Points[len(nd.Points)-1], hist: hb}
	})
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return out
}
