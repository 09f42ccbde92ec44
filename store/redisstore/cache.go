package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// cacheKeys returns the value and lock keys of a cache key: the key's
// SHA-256 (cache keys are arbitrary bytes), as a hash tag so both share a
// slot.
func (s *Store) cacheKeys(key string) (val, lock string) {
	sum := sha256.Sum256([]byte(key))
	base := s.opts.Prefix + "c:{" + hex.EncodeToString(sum[:16]) + "}"
	return base, base + ":lock"
}

// Cached implements store.Store across every Store sharing the Redis: one
// caller (per key, in all processes) takes the lock key (SET NX PX) and
// loads; the others wait for the value, polling with backoff, and load
// themselves only if the lock goes without a value appearing (its holder
// failed or died). Within a process, identical calls share one of these.
// When Redis fails, the value is loaded and returned uncached.
func (s *Store) Cached(ctx context.Context, key string, ttl time.Duration, load func(context.Context) ([]byte, error)) ([]byte, error) {
	ch := s.group.DoChan(key, func() (any, error) {
		// The shared work outlives any one caller's cancellation.
		return s.cached(context.WithoutCancel(ctx), key, ttl, load)
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

// Poll pacing for callers waiting on another's load.
const (
	pollMin = 2 * time.Millisecond
	pollMax = 100 * time.Millisecond
)

func (s *Store) cached(ctx context.Context, key string, ttl time.Duration, load func(context.Context) ([]byte, error)) ([]byte, error) {
	valKey, lockKey := s.cacheKeys(key)
	owner := newFeedID()
	wait := pollMin
	for {
		v, err := s.rdb.Get(ctx, valKey).Bytes()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, redis.Nil) {
			return load(ctx) // Redis is failing: answer uncached
		}
		ok, err := s.rdb.SetNX(ctx, lockKey, owner, s.opts.LockTTL).Result()
		if err != nil {
			return load(ctx)
		}
		if ok {
			return s.loadLocked(ctx, valKey, lockKey, owner, ttl, load)
		}
		time.Sleep(wait)
		wait = min(2*wait, pollMax)
	}
}

// loadLocked loads while holding the lock, renewing it, and stores the value.
func (s *Store) loadLocked(ctx context.Context, valKey, lockKey, owner string, ttl time.Duration, load func(context.Context) ([]byte, error)) ([]byte, error) {
	defer unlockScript.Run(ctx, s.rdb, []string{lockKey}, owner)
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(s.opts.LockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				extendScript.Run(ctx, s.rdb, []string{lockKey}, owner, s.opts.LockTTL.Milliseconds())
			}
		}
	}()
	v, err := load(ctx)
	close(stop)
	<-renewed
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = []byte{}
	}
	if err := s.rdb.Set(ctx, valKey, v, max(ttl, time.Millisecond)).Err(); err != nil {
		return v, nil // loaded; caching failed, which only costs a reload
	}
	return v, nil
}
