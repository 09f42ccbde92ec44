package redisstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/storetest"
	"github.com/llmdiag/llmdiag/store/redisstore"
)

// BenchmarkRedisMemoryPerNode fills a redis-server through Put with 1,000
// nodes of storetest.Fleet, each with a full history (DefaultHistoryLen
// points), and reports per node what MEMORY USAGE (SAMPLES 0) says the
// node's keys take, and its share of the index:
//
//   - rec-B/node, hist-B/node: the record key and the history key;
//   - index-B/node: the node index (sorted set) over the nodes;
//   - log-B/node: the write log (its sorted set and count) over the nodes;
//   - total-B/node: the four together, the figure held under 4 KiB;
//   - rec-val-B/node, hist-val-B/node: the values' bytes alone.
func BenchmarkRedisMemoryPerNode(b *testing.B) {
	const nodes = 1000
	const points = redisstore.DefaultHistoryLen
	srv := redistest.Start(b)
	ctx := context.Background()
	rdb, err := redisstore.NewClient(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	s := redisstore.New(rdb, redisstore.Options{})
	var fleet []storetest.Node
	storetest.Fleet(nodes, func(int) int { return points }, func(_ int, n storetest.Node) { fleet = append(fleet, n) })
	b.ResetTimer()
	for range b.N {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		work := make(chan storetest.Node)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range work {
					for k, p := range n.Points {
						rec := n.Record
						if k < len(n.Points)-1 {
							rec = &store.Record{Node: n.Record.Node, Metrics: n.Record.Metrics}
						}
						if err := s.Put(ctx, rec, p); err != nil {
							b.Error(err)
							return
						}
					}
				}
			}()
		}
		for _, n := range fleet {
			work <- n
		}
		close(work)
		wg.Wait()
	}
	b.StopTimer()
	var rec, hist, recVal, histVal float64
	for _, n := range fleet {
		id := n.Record.Node.GetId()
		for _, k := range []struct {
			key      string
			mem, val *float64
		}{
			{redisstore.DefaultPrefix + "{n:" + id + "}:rec", &rec, &recVal},
			{redisstore.DefaultPrefix + "{n:" + id + "}:hist", &hist, &histVal},
		} {
			m, err := rdb.MemoryUsage(ctx, k.key, 0).Result()
			if err != nil {
				b.Fatalf("%s: %v", k.key, err)
			}
			l, _ := rdb.StrLen(ctx, k.key).Result()
			*k.mem += float64(m)
			*k.val += float64(l)
		}
	}
	idx, err := rdb.MemoryUsage(ctx, redisstore.DefaultPrefix+"nodes", 0).Result()
	if err != nil {
		b.Fatal(err)
	}
	var logMem float64
	for _, key := range []string{"{changes}:log", "{changes}:seq"} {
		m, err := rdb.MemoryUsage(ctx, redisstore.DefaultPrefix+key, 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		logMem += float64(m)
	}
	b.ReportMetric(rec/nodes, "rec-B/node")
	b.ReportMetric(hist/nodes, "hist-B/node")
	b.ReportMetric(float64(idx)/nodes, "index-B/node")
	b.ReportMetric(logMem/nodes, "log-B/node")
	b.ReportMetric((rec+hist+float64(idx)+logMem)/nodes, "total-B/node")
	b.ReportMetric(recVal/nodes, "rec-val-B/node")
	b.ReportMetric(histVal/nodes, "hist-val-B/node")
}
