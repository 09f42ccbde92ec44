package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// MinTTL is the shortest lease New accepts.
const MinTTL = 50 * time.Millisecond

// acquire: KEYS[1] lease, KEYS[2] epoch; ARGV[1] holder, ARGV[2] ttl in ms.
// A missing epoch counter starts at Redis's clock in milliseconds, so the
// epoch keeps growing even if the counter is lost (a Cluster shard that
// restarts empty while the store's records, elsewhere, keep their epochs).
// Returns {1, value, ttl} when this call acquired the lease, {0, value,
// pttl} when another term holds it.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  return {0, cur, redis.call('PTTL', KEYS[1])}
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[2], string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
end
local epoch = redis.call('INCR', KEYS[2])
local val = string.format('%d', epoch) .. ':' .. ARGV[1]
redis.call('SET', KEYS[1], val, 'NX', 'PX', ARGV[2])
return {1, val, tonumber(ARGV[2])}
`)

// renew: KEYS[1] lease; ARGV[1] the term's value, ARGV[2] ttl in ms.
// Returns {1} when extended, {0, current value or nil} when the term is over.
var renewScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
return {0, cur}
`)

// release: KEYS[1] lease; ARGV[1] the term's value. Returns 1 when deleted.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Lease contends for, holds and gives up one ingest lease.
type Lease struct {
	client     redis.UniversalClient
	leaseKey   string
	epochKey   string
	holder     string
	ttl        time.Duration
	renewEvery time.Duration
	margin     time.Duration
	now        func() time.Time
	log        *slog.Logger
	m          *leaseMetrics

	mu       sync.Mutex
	seen     holderEpoch // the leader as last seen, ok=false when unknown
	redisBad bool        // the last call to Redis failed (logged once)
}

type holderEpoch struct {
	holder string
	epoch  uint64
	ok     bool
}

// New returns a lease named key held as holder (this replica's id) for ttl
// at a time, and registers its metrics on reg (nil: none). client should
// have ContextTimeoutEnabled, so a renewal's deadline reaches the socket.
func New(client redis.UniversalClient, key, holder string, ttl time.Duration, clock func() time.Time, logger *slog.Logger, reg prometheus.Registerer) (*Lease, error) {
	switch {
	case client == nil:
		return nil, errors.New("lease: nil redis client")
	case key == "":
		return nil, errors.New("lease: empty key")
	case holder == "":
		return nil, errors.New("lease: empty holder")
	case ttl < MinTTL:
		return nil, fmt.Errorf("lease: ttl %v below %v", ttl, MinTTL)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	tag := "{" + key + "}"
	return &Lease{
		client:     client,
		leaseKey:   tag + ":lease",
		epochKey:   tag + ":epoch",
		holder:     holder,
		ttl:        ttl,
		renewEvery: ttl / 3,
		margin:     ttl / 10,
		now:        clock,
		log:        logger.With("lease", key, "replica", holder),
		m:          m,
	}, nil
}

// Keys returns the lease's two Redis keys (same slot): the lease and the
// epoch counter.
func (l *Lease) Keys() (lease, epoch string) { return l.leaseKey, l.epochKey }

// TTL returns the lease period.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Leader returns the leader as this replica last saw it: itself while it
// leads, otherwise the holder found on its last attempt to acquire. ok is
// false when nobody held the lease or Redis could not be asked.
func (l *Lease) Leader() (holder string, epoch uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen.holder, l.seen.epoch, l.seen.ok
}

// term is one acquisition of the lease.
type term struct {
	value string // "EPOCH:HOLDER", what renew and release compare against
	epoch uint64
	sent  time.Time // when the acquire was sent
}

// Run contends for the lease until ctx is done. Whenever this replica
// acquires it, Run calls lead with a context that is cancelled when the
// lease is lost, when it could not be renewed in time (before Redis would
// hand it to another replica), or when ctx is done, and with the term's
// fencing epoch. lead must return promptly once its context is done; only
// then does Run release the lease (compare-and-delete) and contend again.
// A lead that returns early gives the lease up.
func (l *Lease) Run(ctx context.Context, lead func(leaderCtx context.Context, epoch uint64)) {
	for ctx.Err() == nil {
		t, wait := l.tryAcquire(ctx)
		if t != nil {
			if l.lead(ctx, t, lead) != "returned" {
				continue
			}
			wait = l.renewEvery // lead gave up: let another replica have a turn
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
	}
	l.setSeen(holderEpoch{})
}

// tryAcquire runs the acquire script once. It returns the new term, or nil
// and how long to wait before the next attempt.
func (l *Lease) tryAcquire(ctx context.Context) (*term, time.Duration) {
	sent := l.now()
	cctx, cancel := context.WithTimeout(ctx, l.renewEvery)
	res, err := acquireScript.Run(cctx, l.client, []string{l.leaseKey, l.epochKey}, l.holder, l.ttl.Milliseconds()).Slice()
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			l.redisFailed("acquire", err)
			l.setSeen(holderEpoch{})
		}
		return nil, l.renewEvery
	}
	l.redisOK()
	acquired, value, pttl, err := parseAcquire(res)
	if err != nil {
		l.log.Error("lease: unexpected reply to acquire", "err", err)
		return nil, l.renewEvery
	}
	epoch, holder, err := parseValue(value)
	if err != nil {
		// Someone else's value under our key: wait for it to expire.
		l.log.Warn("lease: foreign value under lease key", "key", l.leaseKey, "err", err)
		l.setSeen(holderEpoch{})
		return nil, l.followWait(pttl)
	}
	if !acquired {
		prev, prevEpoch, prevOK := l.Leader()
		l.setSeen(holderEpoch{holder: holder, epoch: epoch, ok: true})
		if !prevOK || prev != holder || prevEpoch != epoch {
			l.log.Info("leadership: following", "holder", holder, "epoch", epoch)
		}
		return nil, l.followWait(pttl)
	}
	l.m.acquisitions.Inc()
	l.m.epoch.Set(float64(epoch))
	l.m.isLeader.Set(1)
	l.setSeen(holderEpoch{holder: l.holder, epoch: epoch, ok: true})
	l.log.Info("leadership: acquired; this replica refreshes", "holder", l.holder, "epoch", epoch, "ttl", l.ttl, "took", l.now().Sub(sent).Round(time.Microsecond))
	return &term{value: value, epoch: epoch, sent: sent}, 0
}

// followWait is how long a follower waits before trying again: until the
// holder's key expires (pttl), at most renewEvery, plus a little jitter.
func (l *Lease) followWait(pttl time.Duration) time.Duration {
	w := l.renewEvery
	if pttl > 0 && pttl < w {
		w = pttl
	}
	return w + time.Millisecond + rand.N(l.ttl/50+1)
}

// lead runs one term: lead in a goroutine, renewals here, and a watchdog
// that cancels the leader context when the term runs out on the local
// clock. It returns why the term ended: stopped (ctx done), returned (lead
// returned by itself), taken or expired.
func (l *Lease) lead(ctx context.Context, t *term, lead func(context.Context, uint64)) (reason string) {
	leaderCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := newWatchdog(l.now, cancel)
	defer w.stop()
	// Redis set the key's TTL after sent, so it cannot expire before
	// sent+ttl: the term ends on this side margin earlier.
	w.extend(t.sent.Add(l.ttl - l.margin))

	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leaderCtx, t.epoch)
	}()

	reason = "stopped"
	next := l.now().Add(l.renewEvery)
	taken := false
loop:
	for {
		timer := time.NewTimer(max(next.Sub(l.now()), 0))
		select {
		case <-leaderCtx.Done():
			timer.Stop()
			if ctx.Err() == nil {
				reason = "expired"
			}
			break loop
		case <-done:
			timer.Stop()
			if ctx.Err() == nil && leaderCtx.Err() == nil {
				reason = "returned"
			} else if ctx.Err() == nil {
				reason = "expired"
			}
			break loop
		case <-timer.C:
		}
		sent := l.now()
		rctx, rcancel := context.WithTimeout(leaderCtx, max(w.remaining(), time.Millisecond))
		res, err := renewScript.Run(rctx, l.client, []string{l.leaseKey}, t.value, l.ttl.Milliseconds()).Slice()
		rcancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				l.redisFailed("renew", err)
			}
			if leaderCtx.Err() != nil {
				continue // the select above says why
			}
			// Retry soon; the watchdog steps down if this goes on.
			next = l.now().Add(max(l.ttl/10, time.Millisecond))
		case len(res) > 0 && toInt(res[0]) == 1:
			l.redisOK()
			if !w.extend(sent.Add(l.ttl - l.margin)) {
				continue // ran out while the renewal was on its way
			}
			next = sent.Add(l.renewEvery)
		default:
			l.redisOK()
			cur := ""
			if len(res) > 1 {
				cur, _ = res[1].(string)
			}
			reason, taken = "taken", true
			if cur == "" {
				reason = "expired" // in Redis already: nobody holds it
			}
			cancel(fmt.Errorf("lease lost: now %q", cur))
			if e, h, err := parseValue(cur); err == nil {
				l.setSeen(holderEpoch{holder: h, epoch: e, ok: true})
			} else {
				l.setSeen(holderEpoch{})
			}
			break loop
		}
	}
	cancel(errors.New("term over"))
	<-done // no write of this term may follow the release
	w.stop()
	l.m.isLeader.Set(0)
	switch reason {
	case "taken", "expired":
		l.m.losses.WithLabelValues(reason).Inc()
		l.log.Warn("leadership: lost; refreshing stopped", "holder", l.holder, "epoch", t.epoch, "reason", reason, "cause", context.Cause(leaderCtx))
	default:
		l.log.Info("leadership: stepping down", "holder", l.holder, "epoch", t.epoch, "reason", reason)
	}
	if h, _, _ := l.Leader(); h == l.holder {
		l.setSeen(holderEpoch{})
	}
	if !taken {
		l.release(context.WithoutCancel(ctx), t)
	}
	return reason
}

// release deletes the lease if this term still holds it, so a successor
// need not wait for it to expire.
func (l *Lease) release(ctx context.Context, t *term) {
	ctx, cancel := context.WithTimeout(ctx, min(l.ttl, 2*time.Second))
	defer cancel()
	n, err := releaseScript.Run(ctx, l.client, []string{l.leaseKey}, t.value).Int()
	if err != nil {
		l.log.Warn("lease: release failed; it expires by itself", "epoch", t.epoch, "err", err)
		return
	}
	if n == 1 {
		l.log.Info("leadership: released", "holder", l.holder, "epoch", t.epoch)
	}
}

func (l *Lease) setSeen(s holderEpoch) {
	l.mu.Lock()
	l.seen = s
	l.mu.Unlock()
	if s.ok {
		l.m.epoch.Set(float64(s.epoch))
	}
}

// redisFailed counts a failed call and logs the first of a run of them.
func (l *Lease) redisFailed(op string, err error) {
	l.m.errors.Inc()
	l.mu.Lock()
	first := !l.redisBad
	l.redisBad = true
	l.mu.Unlock()
	if first {
		l.log.Warn("lease: redis unreachable", "op", op, "err", err)
	} else {
		l.log.Debug("lease: redis unreachable", "op", op, "err", err)
	}
}

func (l *Lease) redisOK() {
	l.mu.Lock()
	was := l.redisBad
	l.redisBad = false
	l.mu.Unlock()
	if was {
		l.log.Info("lease: redis reachable again")
	}
}

// watchdog cancels a context when a deadline on the injected clock passes.
// Timers measure the wait; the clock decides whether it is over.
type watchdog struct {
	now    func() time.Time
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	until   time.Time
	timer   *time.Timer
	expired bool
	stopped bool
}

var errExpired = errors.New("lease not renewed in time")

func newWatchdog(now func() time.Time, cancel context.CancelCauseFunc) *watchdog {
	return &watchdog{now: now, cancel: cancel}
}

// extend moves the deadline to until (never earlier than it is) and reports
// whether the term is still running.
func (w *watchdog) extend(until time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.expired || w.stopped {
		return false
	}
	if until.After(w.until) {
		w.until = until
	}
	d := max(w.until.Sub(w.now()), 0)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
	} else {
		w.timer.Reset(d)
	}
	return true
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.expired || w.stopped {
		return
	}
	if d := w.until.Sub(w.now()); d > 0 {
		w.timer.Reset(d)
		return
	}
	w.expired = true
	w.cancel(errExpired)
}

// remaining is the time left before the deadline.
func (w *watchdog) remaining() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.until.Sub(w.now())
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

func parseAcquire(res []any) (acquired bool, value string, pttl time.Duration, err error) {
	if len(res) != 3 {
		return false, "", 0, fmt.Errorf("want 3 values, got %d", len(res))
	}
	value, ok := res[1].(string)
	if !ok {
		return false, "", 0, fmt.Errorf("value is %T", res[1])
	}
	return toInt(res[0]) == 1, value, time.Duration(toInt(res[2])) * time.Millisecond, nil
}

// parseValue splits "EPOCH:HOLDER".
func parseValue(v string) (epoch uint64, holder string, err error) {
	e, h, ok := strings.Cut(v, ":")
	if !ok || h == "" {
		return 0, "", fmt.Errorf("lease value %q is not EPOCH:HOLDER", v)
	}
	epoch, err = strconv.ParseUint(e, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("lease value %q: epoch: %w", v, err)
	}
	return epoch, h, nil
}

func toInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
