package server

import (
	"bytes"
	"compress/gzip"
	"container/list"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/internal/refusal"
)

// TestBoundedGzipInflatesNoFurtherThanTheLimit reads a gzip bomb the way
// connect-go does (compression.go, Decompress: up to limit+1 bytes, then,
// the message being too large, the rest to measure it) and counts what
// came out of the decompressor.
func TestBoundedGzipInflatesNoFurtherThanTheLimit(t *testing.T) {
	const limit = 1 << 20
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 64 { // 64 MiB
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()

	var out int64
	g := &limitedGzip{limit: limit, out: &out}
	if err := g.Reset(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	var dst bytes.Buffer
	n, err := dst.ReadFrom(io.LimitReader(g, limit+1))
	if err != nil || n != limit+1 {
		t.Fatalf("first read: %d bytes, %v; want %d", n, err, limit+1)
	}
	_, err = io.Copy(io.Discard, g)
	if !errors.Is(err, errInflated) {
		t.Fatalf("reading past the limit: want errInflated, got %v", err)
	}
	if out != limit+1 {
		t.Fatalf("inflated %d bytes of 64 MiB; want %d", out, limit+1)
	}
	// Reused from connect's pool, it reads the next request afresh.
	var small bytes.Buffer
	zw = gzip.NewWriter(&small)
	_, _ = zw.Write([]byte("hello"))
	_ = zw.Close()
	if err := g.Reset(&small); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(g); err != nil || string(b) != "hello" {
		t.Fatalf("after Reset: %q, %v", b, err)
	}
}

func TestRateLimitersStayBounded(t *testing.T) {
	r := &rateLimiters{limit: 1, burst: 1, max: 3, byKey: map[string]*list.Element{}, lru: list.New()}
	a := r.get("a")
	for _, k := range []string{"b", "c", "a", "d", "e"} {
		r.get(k)
	}
	if r.len() != 3 {
		t.Fatalf("%d limiters kept, want 3", r.len())
	}
	// a was used more recently than b and c: d and e pushed those out.
	if r.get("a") != a {
		t.Fatal("the most recently used limiter was forgotten")
	}
	if _, ok := r.byKey["b"]; ok {
		t.Fatal("the least recently used limiter is still there")
	}
}

// TestStreamRefusalCounted: a stream beyond a cap is a refusal of reason
// streams, counted once and logged naming the flag.
func TestStreamRefusalCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	refusals, err := refusal.New(refusal.Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(Limits{MaxStreams: 1, Refusals: refusals})
	if err := l.openStream("a"); err != nil {
		t.Fatal(err)
	}
	if err := l.openStream("b"); err == nil {
		t.Fatal("second stream beyond --max-streams 1: opened")
	}
	l.closeStream("a")
	if err := l.openStream("b"); err != nil {
		t.Fatalf("after a stream closed: %v", err)
	}
	if n := refusedCount(t, reg, refusal.Streams); n != 1 {
		t.Errorf("streams refused %g, want 1", n)
	}
	if s := logs.String(); !strings.Contains(s, "stream refused") || !strings.Contains(s, "--max-streams") || !strings.Contains(s, "refused=streams") {
		t.Errorf("log %q: want the refusal naming --max-streams", s)
	}
}

// refusedCount is llmdiag_refused_total{reason} in reg.
func refusedCount(t *testing.T, reg *prometheus.Registry, reason refusal.Reason) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != refusal.MetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == string(reason) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{reason=%q}", refusal.MetricName, reason)
	return 0
}
