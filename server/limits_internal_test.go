package server

import (
	"bytes"
	"compress/gzip"
	"container/list"
	"errors"
	"io"
	"testing"
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
