package server_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
)

// BenchmarkStreamHealth opens LLMDIAG_BENCH_STREAMS (default 10,000) real
// StreamHealth streams (gRPC over cleartext HTTP/2, 100 streams per
// connection, loopback) on one server in this process, each selecting one
// node; every iteration publishes a status change of that node into the
// store and waits until every stream has received it. The server has serve's
// limits with its default flags (servedLimits: at most 10,000 streams, 100
// a principal, the rate limit, the request read deadline, 1,000
// connections); the clients connect from 100 loopback hosts
// (loopbackClients), one principal each, as 100 unauthenticated callers of
// serve would. It reports the time from Publish to delivery across streams
// (p50, p99), heap and goroutine stack per idle stream (after GC, streams
// open and synced; server and client are in this one process, so this is
// both sides together), and process CPU per broadcast (both sides too). It
// stops by itself.
//
//	go test ./server -run '^$' -bench 'StreamHealth$' -benchtime 5x -count 5
//
// Medians of 5 runs of 5 broadcasts, 2-core machine (AMD EPYC) shared with
// other builds (load average 4-5): p50 149 ms, p99 205 ms; 16.4 KB heap +
// 20.6 KB stack per idle stream (client and server together; the hub's own
// share is 1 KiB + 3.4 KiB, see fanout.BenchmarkHub10k); 182 ms CPU per
// broadcast, both sides (185 ms before the cuts described at
// BenchmarkStreamHealthServerMemory, same runs interleaved: HTTP/2
// framing, encoding and goroutine wake-ups on each side).
func BenchmarkStreamHealth(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("LLMDIAG_BENCH_STREAMS")); err == nil && v > 0 {
		n = v
	}
	url, st := streamServerWith(b, servedLimits())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cs, err := loopbackClients(url, n)
	if err != nil {
		b.Skip(err)
	}
	got := make(chan time.Time, n)
	synced := make(chan error, n)
	errs := make(chan error, n)
	open := func(i int) {
		s, err := cs[i%len(cs)].StreamHealth(ctx, connect.NewRequest(&llmdiagv1.StreamHealthRequest{Nodes: []string{"a-0"}, HeartbeatInterval: durationpb.New(5 * time.Minute)}))
		if err != nil {
			synced <- err
			return
		}
		defer s.Close()
		ready := false
		for s.Receive() {
			switch s.Msg().GetKind() {
			case llmdiagv1.EventKind_EVENT_KIND_SYNCED:
				ready = true
				synced <- nil
			case llmdiagv1.EventKind_EVENT_KIND_CHANGE:
				got <- time.Now()
			}
		}
		switch {
		case ctx.Err() != nil:
		case !ready:
			synced <- fmt.Errorf("stream ended: %w", s.Err())
		default:
			errs <- fmt.Errorf("stream ended: %w", s.Err())
		}
	}
	if err := spread(len(cs), n, open, synced, 2*time.Minute); err != nil {
		b.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	stack := float64(after.StackInuse-before.StackInuse) / float64(n)

	var lat []time.Duration
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		at := time.Now()
		if _, err := st.Publish(ctx, change("a-0", "alpha", nil, llmdiagv1.Status(2+i%2), float64(i+1))); err != nil {
			b.Fatal(err)
		}
		for range n {
			select {
			case g := <-got:
				lat = append(lat, g.Sub(at))
			case err := <-errs:
				b.Fatal(err)
			case <-time.After(time.Minute):
				b.Fatal("a change was not delivered")
			}
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	slices.Sort(lat)
	b.ReportMetric(float64(n), "streams")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(heap, "heap-B/stream")
	b.ReportMetric(stack, "stack-B/stream")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/broadcast")
	cancel()
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStreamHealthServerMemory opens LLMDIAG_BENCH_STREAMS (default
// 10,000) idle StreamHealth streams from a child process (this test binary
// in client mode, see TestMain) and reports what they cost the server
// alone: heap and goroutine stack per stream, after GC, the streams synced.
// The server has serve's limits and the streams come from 100 principals,
// as in BenchmarkStreamHealth. LLMDIAG_BENCH_HEAP_PROFILE=file writes the
// heap profile with the streams open (go tool pprof
// -sample_index=inuse_space; add -test.memprofilerate=1 for every
// allocation).
//
//	go test ./server -run '^$' -bench StreamHealthServerMemory -benchtime 1x -count 5
//
// Medians of 5 runs in one process with 10,000 streams (2 cores, load
// average 4-5 from other work): 17.5 KB a stream, 9.2 KB heap and 8.3 KB
// stack; a stream that does nothing on the same server stack costs 16.5 KB
// (BenchmarkStreamFloorServerMemory, same run: 8.2 KB heap, 8.3 KB stack),
// so llmdiag's own share is about 1.0 KB. (The first run of a process reads
// about 0.5 KB more, floor included: 18.1 KB against 17.1.) Most of the
// heap is net/http's HTTP/2 server: a 4 KiB write buffer per open stream
// (bufio.NewWriterSize), the request and its cloned headers, then
// connect's per-stream state (~1 KB). The stack is the handler
// goroutine's, 8 KiB once grown, the floor's too.
//
// Before these cuts, the same runs read 19.4 KB (2.9 KB
// llmdiag's): a context per stream derived from the call's and tied to
// shutdown (~600 B; the hub ending at shutdown ends the stream), the
// subscriber's record of what it sent as a map (~600 B for one node; a
// list up to 8 nodes now), the selected ids as a map (~250 B; a sorted
// list), a heartbeat timer with a channel and a four-way select (~350 B; a
// function timer that wakes the reader, a two-way select), the stream
// cap's release closure (~90 B) and the request body bound's header
// buffer (~40 B). A goroutine per stream that watched for shutdown cost
// 5 KB more before that; context.AfterFunc replaced it, and now nothing.
//
// LLMDIAG_BENCH_STREAM_IDS=n makes each stream also select n made-up ids of
// 128 bytes. Medians of 5 runs with 1,000 streams (noisier than 10,000):
// 15 KB a stream with none, 44 KB with 127 (16 KiB of ids, the most a
// stream may select; 49 KB before the cuts), 211 KB with 999 (measured
// before the cuts, accepted before that bound).
func BenchmarkStreamHealthServerMemory(b *testing.B) {
	url, _ := streamServerWith(b, servedLimits())
	serverMemoryPerStream(b, url)
}

// BenchmarkStreamFloorServerMemory is BenchmarkStreamHealthServerMemory
// against a StreamHealth that sends SYNCED and waits, on the same server
// stack (net/http's HTTP/2, connect): what any idle stream costs before
// llmdiag does anything, so the difference is llmdiag's own.
func BenchmarkStreamFloorServerMemory(b *testing.B) {
	srv := servertest.Start(b, servertest.Options{Handler: idleStreams{}})
	serverMemoryPerStream(b, srv.URL)
}

// idleStreams answers StreamHealth with SYNCED, then nothing.
type idleStreams struct {
	llmdiagv1connect.UnimplementedDiagnosisServiceHandler
}

func (idleStreams) StreamHealth(ctx context.Context, _ *connect.Request[llmdiagv1.StreamHealthRequest], stream *connect.ServerStream[llmdiagv1.StreamHealthResponse]) error {
	if err := stream.Send(&llmdiagv1.StreamHealthResponse{Kind: llmdiagv1.EventKind_EVENT_KIND_SYNCED}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// serverMemoryPerStream opens the streams from a child process and reports
// what they cost this one.
func serverMemoryPerStream(b *testing.B, url string) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("LLMDIAG_BENCH_STREAMS")); err == nil && v > 0 {
		n = v
	}
	var heap, stack float64
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), streamClientEnv+"="+url, "LLMDIAG_BENCH_STREAMS="+strconv.Itoa(n))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			b.Fatalf("stream client: %q, %v", line, err)
		}
		time.Sleep(500 * time.Millisecond)
		runtime.GC() // more collections do not shrink the stacks further
		runtime.ReadMemStats(&after)
		if path := os.Getenv("LLMDIAG_BENCH_HEAP_PROFILE"); path != "" {
			writeHeapProfile(b, path)
		}
		heap += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		stack += float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n)
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatalf("stream client: %v", err)
		}
	}
	b.ReportMetric(float64(n), "streams")
	b.ReportMetric(heap/float64(b.N), "server-heap-B/stream")
	b.ReportMetric(stack/float64(b.N), "server-stack-B/stream")
	b.ReportMetric((heap+stack)/float64(b.N), "server-B/stream")
}

// writeHeapProfile writes the heap profile to path: with the streams open,
// where -memprofile, written after the benchmarks, would find them closed.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}
