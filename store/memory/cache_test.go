package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/store/memory"
)

func TestCachedExpiryErrorsAndBound(t *testing.T) {
	now := time.Unix(0, 0)
	s := memory.New(memory.Options{CacheEntries: 2, Now: func() time.Time { return now }}, "c")
	ctx := context.Background()
	var loads int
	load := func(v string) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) { loads++; return []byte(v), nil }
	}
	s.Cached(ctx, "a", 10*time.Second, load("a1"))
	now = now.Add(5 * time.Second)
	if v, _ := s.Cached(ctx, "a", 10*time.Second, load("a2")); string(v) != "a1" {
		t.Fatalf("within ttl: %q", v)
	}
	now = now.Add(6 * time.Second)
	if v, _ := s.Cached(ctx, "a", 10*time.Second, load("a3")); string(v) != "a3" {
		t.Fatalf("after ttl: %q, want a reload", v)
	}
	boom := errors.New("boom")
	failing := func(context.Context) ([]byte, error) { loads++; return nil, boom }
	if _, err := s.Cached(ctx, "e", time.Minute, failing); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	before := loads
	if _, err := s.Cached(ctx, "e", time.Minute, failing); !errors.Is(err, boom) || loads != before+1 {
		t.Fatalf("errors must not be cached (loads %d → %d)", before, loads)
	}
	// Bound of 2 entries: a third key evicts one; the store never grows past it.
	s.Cached(ctx, "b", time.Minute, load("b"))
	s.Cached(ctx, "c", time.Minute, load("c"))
	hits := 0
	for _, k := range []string{"a", "b", "c"} {
		before := loads
		s.Cached(ctx, k, time.Minute, load(k))
		if loads == before {
			hits++
		}
	}
	if hits > 2 {
		t.Fatalf("%d of 3 keys cached with a bound of 2", hits)
	}
	// A caller that gives up returns at once with its context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Cached(cctx, "slow", time.Minute, func(context.Context) ([]byte, error) { time.Sleep(time.Second); return nil, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
}
