package lease_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/lease"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func client(t *testing.T, addrs ...string) redis.UniversalClient {
	t.Helper()
	c := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs: addrs, ContextTimeoutEnabled: true,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		MaxRetries: -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// replica is one contender: its lease, and what its lead function saw.
type replica struct {
	id     string
	l      *lease.Lease
	reg    *prometheus.Registry
	cancel context.CancelFunc
	client redis.UniversalClient
	done   chan struct{}

	mu     sync.Mutex
	epochs []uint64
	ended  []time.Time
}

// board counts replicas in their lead function at once.
type board struct {
	active atomic.Int32
	max    atomic.Int32
	mu     sync.Mutex
	lead   string
	since  time.Time
}

func (b *board) enter(id string) {
	n := b.active.Add(1)
	for {
		m := b.max.Load()
		if n <= m || b.max.CompareAndSwap(m, n) {
			break
		}
	}
	b.mu.Lock()
	b.lead, b.since = id, time.Now()
	b.mu.Unlock()
}

func (b *board) exit() {
	b.mu.Lock()
	b.lead = ""
	b.mu.Unlock()
	b.active.Add(-1)
}

func (b *board) leader() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lead
}

func startReplica(t *testing.T, b *board, c redis.UniversalClient, id string, ttl time.Duration) *replica {
	t.Helper()
	reg := prometheus.NewRegistry()
	l, err := lease.New(c, "llmdiag:test", id, ttl, time.Now, testLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{id: id, l: l, reg: reg, cancel: cancel, client: c, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		l.Run(ctx, func(lctx context.Context, epoch uint64) {
			b.enter(id)
			r.mu.Lock()
			r.epochs = append(r.epochs, epoch)
			r.mu.Unlock()
			<-lctx.Done()
			b.exit()
			r.mu.Lock()
			r.ended = append(r.ended, time.Now())
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// The lease periods below are seconds, not milliseconds: every bound a test
// asserts is a fraction or multiple of its ttl (steps down within a ttl,
// takes over within two), and on two busy cores the scheduler alone can
// delay a timer by a hundred milliseconds, which must stay a small part of
// the bound.

func TestAcquireRenewRelease(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = time.Second
	var b board
	r := startReplica(t, &b, client(t, srv.Addr()), "a", ttl)
	testkit.Wait{For: 5 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leads", func() bool { return b.leader() == "a" })

	key, epochKey := r.l.Keys()
	_, epoch, _ := r.l.Leader()
	if v, _ := srv.Do("GET", key); v != fmt.Sprintf("%d:a", epoch) {
		t.Fatalf("GET %s = %q, want %d:a", key, v, epoch)
	}
	if v, _ := srv.Do("GET", epochKey); v != strconv.FormatUint(epoch, 10) {
		t.Fatalf("GET %s = %q, want %d", epochKey, v, epoch)
	}
	// The counter starts from Redis's clock (ms), so a lost counter cannot
	// hand out an epoch below one already used.
	if ms := uint64(time.Now().UnixMilli()); epoch < ms-60_000 || epoch > ms+60_000 {
		t.Fatalf("first epoch %d, want about %d", epoch, ms)
	}
	// Renewals keep it: five lease periods without a loss.
	time.Sleep(5 * ttl)
	if h, e, ok := r.l.Leader(); b.leader() != "a" || h != "a" || e != epoch || !ok {
		t.Fatalf("after 5 ttl: leader %q, Leader() = %q %d %v", b.leader(), h, e, ok)
	}
	pttl, _ := srv.Do("PTTL", key)
	if ms, _ := strconv.Atoi(pttl); ms <= int(ttl.Milliseconds())/2 {
		t.Fatalf("PTTL %s ms: not renewed every ttl/3", pttl)
	}
	if got := metric(t, r.reg, "llmdiag_lease_is_leader"); got != 1 {
		t.Fatalf("is_leader = %v", got)
	}

	r.cancel()
	<-r.done
	if v, _ := srv.Do("EXISTS", key); v != "0" {
		t.Fatalf("lease key still there after shutdown: EXISTS = %s", v)
	}
	if len(r.ended) != 1 {
		t.Fatalf("lead ended %d times", len(r.ended))
	}
	if got := metric(t, r.reg, "llmdiag_lease_is_leader"); got != 0 {
		t.Fatalf("is_leader after shutdown = %v", got)
	}
}

// metric sums every series of the metric family name in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := 0.0
			for _, m := range mf.GetMetric() {
				v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// crash ends a replica as a crash would: its connections die first, so it
// can neither renew nor release, then it stops.
func crash(r *replica) {
	r.client.Close()
	r.cancel()
	<-r.done
}

func TestOneLeaderAndTakeover(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 2 * time.Second
	var b board
	rs := map[string]*replica{}
	for _, id := range []string{"a", "b", "c"} {
		rs[id] = startReplica(t, &b, client(t, srv.Addr()), id, ttl)
	}
	epoch := uint64(0)
	for round := range 2 {
		testkit.Wait{For: 5 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leader", func() bool { return b.leader() != "" })
		time.Sleep(ttl) // a lease period of renewals, with two contenders
		lead := rs[b.leader()]
		_, e, _ := lead.l.Leader()
		if e <= epoch {
			t.Fatalf("round %d: epoch %d after %d", round, e, epoch)
		}
		epoch = e
		for _, r := range rs {
			if h, he, ok := r.l.Leader(); !ok || h != lead.id || he != e {
				t.Errorf("%s sees leader %q epoch %d ok %v, want %s %d", r.id, h, he, ok, lead.id, e)
			}
		}
		crash(lead)
		delete(rs, lead.id)
		took := testkit.Wait{For: 2 * ttl, Every: 5 * time.Millisecond}.Until(t, "takeover within 2 ttl", func() bool { return b.leader() != "" })
		t.Logf("round %d: %s (epoch %d) crashed; %s took over after %v (ttl %v)", round, lead.id, e, b.leader(), took.Round(time.Millisecond), ttl)
	}
	if m := b.max.Load(); m != 1 {
		t.Fatalf("%d replicas led at once", m)
	}
}

func TestStepsDownBeforeExpiryWhenRedisIsGone(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{Persist: true})
	const ttl = 2 * time.Second
	var b board
	r := startReplica(t, &b, client(t, srv.Addr()), "a", ttl)
	testkit.Wait{For: 5 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leads", func() bool { return b.leader() == "a" })
	time.Sleep(ttl / 2)

	srv.Kill()
	killed := time.Now()
	testkit.Wait{For: ttl, Every: 5 * time.Millisecond}.Until(t, "a steps down within a ttl of losing Redis", func() bool { return b.leader() == "" })
	stepped := time.Since(killed)
	t.Logf("stepped down %v after Redis died (ttl %v)", stepped.Round(time.Millisecond), ttl)
	testkit.Wait{For: ttl / 2, Every: 5 * time.Millisecond}.Until(t, "Leader() not ok while Redis is down", func() bool { _, _, ok := r.l.Leader(); return !ok })

	srv.Restart() // persisted: the epoch goes on
	testkit.Wait{For: 5 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leads again", func() bool { return b.leader() == "a" })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.epochs) != 2 || r.epochs[1] <= r.epochs[0] {
		t.Fatalf("epochs %v, want two, growing", r.epochs)
	}
	if got := metric(t, r.reg, "llmdiag_lease_losses_total"); got < 1 {
		t.Fatalf("losses %v", got)
	}
}

func TestLostWhenTaken(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 2 * time.Second
	var b board
	r := startReplica(t, &b, client(t, srv.Addr()), "a", ttl)
	testkit.Wait{For: 5 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leads", func() bool { return b.leader() == "a" })
	key, _ := r.l.Keys()
	// An operator (or a split brain) hands the lease to "z" by hand.
	if _, err := srv.Do("SET", key, "99:z", "PX", "10000"); err != nil {
		t.Fatal(err)
	}
	testkit.Wait{For: ttl / 2, Every: 5 * time.Millisecond}.Until(t, "a steps down at its next renewal", func() bool { return b.leader() == "" })
	testkit.Wait{For: ttl, Every: 5 * time.Millisecond}.Until(t, "a follows z", func() bool { h, e, ok := r.l.Leader(); return ok && h == "z" && e == 99 })
	if v, _ := srv.Do("GET", key); v != "99:z" {
		t.Fatalf("a touched z's lease: %q", v)
	}
}

func TestNewRejects(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for name, f := range map[string]func() error{
		"ttl":    func() error { _, err := lease.New(c, "k", "h", time.Millisecond, time.Now, quiet(), nil); return err },
		"key":    func() error { _, err := lease.New(c, "", "h", time.Second, time.Now, quiet(), nil); return err },
		"holder": func() error { _, err := lease.New(c, "k", "", time.Second, time.Now, quiet(), nil); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	const ttl = 2 * time.Second
	var b board
	rs := map[string]*replica{}
	for _, id := range []string{"a", "b", "c"} {
		rs[id] = startReplica(t, &b, client(t, cl.Addrs()...), id, ttl)
	}
	testkit.Wait{For: 10 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leader", func() bool { return b.leader() != "" })
	lead := rs[b.leader()]
	key, epochKey := lead.l.Keys()
	s1, _ := cl.Nodes[0].Do("CLUSTER", "KEYSLOT", key)
	s2, _ := cl.Nodes[0].Do("CLUSTER", "KEYSLOT", epochKey)
	if s1 == "" || s1 != s2 {
		t.Fatalf("slots %q and %q: keys not hash-tagged together", s1, s2)
	}
	_, e1, _ := lead.l.Leader()
	crash(lead)
	delete(rs, lead.id)
	took := testkit.Wait{For: 2 * ttl, Every: 5 * time.Millisecond}.Until(t, "takeover within 2 ttl on a cluster", func() bool { return b.leader() != "" })
	_, e2, _ := rs[b.leader()].l.Leader()
	t.Logf("cluster: %s (epoch %d) crashed; %s (epoch %d) took over after %v", lead.id, e1, b.leader(), e2, took.Round(time.Millisecond))
	if e2 <= e1 {
		t.Fatalf("epoch %d after %d", e2, e1)
	}
	if m := b.max.Load(); m != 1 {
		t.Fatalf("%d replicas led at once", m)
	}
}

func TestEpochGrowsAfterCounterLoss(t *testing.T) {
	srv := redistest.Start(t)
	var b board
	c := client(t, srv.Addr())
	r := startReplica(t, &b, c, "a", 300*time.Millisecond)
	testkit.Wait{For: 5 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leads", func() bool { return b.leader() == "a" })
	_, e1, _ := r.l.Leader()
	r.cancel()
	<-r.done
	_, epochKey := r.l.Keys()
	if _, err := srv.Do("DEL", epochKey); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	r2 := startReplica(t, &b, c, "a", 300*time.Millisecond)
	testkit.Wait{For: 5 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leads again", func() bool { return b.leader() == "a" })
	if _, e2, _ := r2.l.Leader(); e2 <= e1 {
		t.Fatalf("epoch %d after the counter was lost, below the earlier %d", e2, e1)
	}
}

func TestReleaseHandsOverQuickly(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 3 * time.Second
	var b board
	rs := map[string]*replica{}
	for _, id := range []string{"a", "b"} {
		rs[id] = startReplica(t, &b, client(t, srv.Addr()), id, ttl)
	}
	testkit.Wait{For: 5 * time.Second, Every: 5 * time.Millisecond}.Until(t, "a leader", func() bool { return b.leader() != "" })
	lead := rs[b.leader()]
	lead.cancel() // SIGTERM: release on the way out
	<-lead.done
	took := testkit.Wait{For: ttl/3 + ttl/10, Every: 5 * time.Millisecond}.Until(t, "the follower takes a released lease within ttl/3", func() bool { return b.leader() != "" })
	t.Logf("%s released; %s took over after %v (ttl %v)", lead.id, b.leader(), took.Round(time.Millisecond), ttl)
}
