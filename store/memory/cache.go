package memory

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// cache is a bounded TTL cache with de-duplication of concurrent loads.
type cache struct {
	mu      sync.Mutex
	entries map[string]cacheEntry
	max     int
	group   singleflight.Group
	now     func() time.Time
}

type cacheEntry struct {
	val     []byte
	expires time.Time
}

func (c *cache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		return nil, false
	}
	return e.val, true
}

func (c *cache) put(key string, val []byte, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		// Drop what has expired; if that frees nothing, drop the entry
		// closest to expiry.
		now := c.now()
		var soonest string
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			} else if soonest == "" || e.expires.Before(c.entries[soonest].expires) {
				soonest = k
			}
		}
		if len(c.entries) >= c.max {
			delete(c.entries, soonest)
		}
	}
	c.entries[key] = cacheEntry{val: val, expires: c.now().Add(ttl)}
}

// Cached implements store.Store.
func (s *Store) Cached(ctx context.Context, key string, ttl time.Duration, load func(context.Context) ([]byte, error)) ([]byte, error) {
	if v, ok := s.cache.get(key); ok {
		return v, nil
	}
	ch := s.cache.group.DoChan(key, func() (any, error) {
		// A load that ended between the lookup above and this flight has
		// filled the cache: a caller that missed it then reads it now
		// rather than loading again.
		if v, ok := s.cache.get(key); ok {
			return v, nil
		}
		// The load outlives any one caller's cancellation, so a caller that
		// gives up does not fail the others waiting on the same key.
		v, err := load(context.WithoutCancel(ctx))
		if err == nil {
			s.cache.put(key, v, ttl)
		}
		return v, err
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]byte), nil
	}
}
