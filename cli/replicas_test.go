package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/lease"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/redisstore"
)

// ticking is a source whose every refresh, by whichever replica, observes
// the fleet later than the one before: observed_at is base plus a counter
// shared by all replicas, so a record that goes back in time in the store
// can only come from a stale writer.
type ticking struct {
	base  time.Time
	clock *atomic.Int64
	nodes []string
}

func (s ticking) Window(context.Context, string, string, time.Duration) (*llmdiagv1.NodeMetrics, error) {
	return nil, source.ErrUnknownNode
}

func (s ticking) Refresh(context.Context, string) ([]source.Observation, error) {
	return s.at(s.base.Add(time.Duration(s.clock.Add(1)) * time.Millisecond)), nil
}

func (s ticking) at(at time.Time) []source.Observation {
	var out []source.Observation
	for _, id := range s.nodes {
		m := &llmdiagv1.NodeMetrics{
			Node: id, Model: "m", Window: "5m", Up: true, ObservedAt: timestamppb.New(at),
			Queue: sample.F(0), Running: sample.F(10), QueueRunningRatio: sample.F(0), KvPressure: sample.F(0.3),
			PromptTokensPerSecond: sample.F(1000), GenerationTokensPerSecond: sample.F(500), DecodeTokensPerSecondPerRequest: sample.F(50),
			PreemptionsPerSecond: sample.F(0),
		}
		out = append(out, source.Observation{Node: fleet.Node{ID: id, URL: "http://" + id + "/metrics"}, Metrics: m})
	}
	return out
}

type nopRecorder struct{}

func (nopRecorder) ObserveRefresh(time.Duration, error)      {}
func (nopRecorder) SetNodeStatuses(map[llmdiagv1.Status]int) {}
func (nopRecorder) ObserveNodeSet(refresh.NodeSet)           {}

// stack is one replica: its own Redis client, store, lease and loop.
type stack struct {
	id     string
	rdb    redis.UniversalClient
	st     *redisstore.Store
	l      *lease.Lease
	reg    *prometheus.Registry
	loop   *refresh.Loop
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *stack) leading(t *testing.T) bool {
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Error(err)
		return false
	}
	for _, mf := range mfs {
		if mf.GetName() == "llmdiag_lease_is_leader" {
			return mf.GetMetric()[0].GetGauge().GetValue() == 1
		}
	}
	return false
}

// crash ends the replica as a crash would: its connections go first, so it
// can neither renew nor release the lease, then its goroutines stop.
func (s *stack) crash() {
	s.rdb.Close()
	s.cancel()
	<-s.done
}

const replicaPrefix = "t:"

func newStack(t *testing.T, url, id string, src source.Source, ttl time.Duration, log *slog.Logger) *stack {
	t.Helper()
	rdb, err := redisstore.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	log = log.With("replica", id)
	l, err := lease.New(rdb, replicaPrefix+"ingest", id, ttl, time.Now, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	st := redisstore.New(rdb, redisstore.Options{Prefix: replicaPrefix})
	loop := refresh.New(src, st, nopRecorder{}, log, time.Now, refresh.Config{Interval: 50 * time.Millisecond, Thresholds: diagnose.DefaultThresholds()})
	ctx, cancel := context.WithCancel(context.Background())
	s := &stack{id: id, rdb: rdb, st: st, l: l, reg: reg, loop: loop, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(s.done); leadRefresh(ctx, l, loop) }()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// header is what the store keeps in front of a record: the writer's epoch,
// the observation time and a write sequence ("epoch sec nanos seq\n", see
// store/redisstore's putScript).
type header struct {
	epoch uint64
	at    time.Time
	seq   uint64
}

func readHeader(ctx context.Context, rdb redis.UniversalClient, node string) (header, bool, error) {
	v, err := rdb.Get(ctx, replicaPrefix+"{n:"+node+"}:rec").Result()
	if errors.Is(err, redis.Nil) {
		return header{}, false, nil
	}
	if err != nil {
		return header{}, false, err
	}
	line, _, ok := strings.Cut(v, "\n")
	f := strings.Fields(line)
	if !ok || len(f) != 4 {
		return header{}, false, fmt.Errorf("record of %s: header %q", node, line)
	}
	var n [4]int64
	for i, s := range f {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return header{}, false, fmt.Errorf("record of %s: header %q: %w", node, line, err)
		}
	}
	return header{epoch: uint64(n[0]), at: time.Unix(n[1], n[2]), seq: uint64(n[3])}, true, nil
}

// monitor watches the store and the replicas while they run: every record's
// writer epoch and observed_at must never go back, and at most one replica
// may be leading at any moment.
type monitor struct {
	mu         sync.Mutex
	violations []string
	epochs     []uint64 // distinct writer epochs, in the order they appeared
	firstAt    map[uint64]time.Time
	polls      int
}

func (m *monitor) run(ctx context.Context, t *testing.T, rdb redis.UniversalClient, nodes []string, stacks func() []*stack) {
	last := map[string]header{}
	for ctx.Err() == nil {
		leaders := 0
		for _, s := range stacks() {
			if s.leading(t) {
				leaders++
			}
		}
		m.mu.Lock()
		m.polls++
		if leaders > 1 {
			m.violations = append(m.violations, fmt.Sprintf("%d replicas leading at once", leaders))
		}
		for _, n := range nodes {
			h, ok, err := readHeader(ctx, rdb, n)
			if err != nil || !ok {
				continue
			}
			p, seen := last[n]
			if seen && (h.epoch < p.epoch || h.at.Before(p.at) || h.seq < p.seq) {
				m.violations = append(m.violations, fmt.Sprintf("%s went back: epoch %d→%d, observed %v→%v, seq %d→%d", n, p.epoch, h.epoch, p.at, h.at, p.seq, h.seq))
			}
			last[n] = h
			if len(m.epochs) == 0 || m.epochs[len(m.epochs)-1] != h.epoch {
				if _, dup := m.firstAt[h.epoch]; !dup {
					m.epochs = append(m.epochs, h.epoch)
					m.firstAt[h.epoch] = time.Now()
				}
			}
		}
		m.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
}

func (m *monitor) firstWrite(epoch uint64) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.firstAt[epoch]
	return at, ok
}

// TestReplicasOneLeaderTakeoverFencing runs three
// replicas (refresh loop + ingest lease, each with its own Redis client)
// against one real redis-server. Exactly one refreshes at a time; when the
// leader crashes another takes over within two lease periods; an ex-leader
// that comes back and writes with its old epoch is fenced.
func TestReplicasOneLeaderTakeoverFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: three replicas on a real Redis, about 8 s")
	}
	srv := redistest.Start(t)
	// Seconds, so that scheduler delays on busy cores stay a small part of
	// the bounds below, each of which is relative to the ttl.
	const ttl = 2 * time.Second
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	nodes := []string{"n0", "n1", "n2"}
	var clock atomic.Int64
	src := ticking{base: time.Unix(1_800_000_000, 0), clock: &clock, nodes: nodes}

	var mu sync.Mutex
	live := map[string]*stack{}
	for _, id := range []string{"a", "b", "c"} {
		live[id] = newStack(t, srv.URL(), id, src, ttl, log)
	}
	stacks := func() []*stack {
		mu.Lock()
		defer mu.Unlock()
		var out []*stack
		for _, s := range live {
			out = append(out, s)
		}
		return out
	}
	leader := func() *stack {
		for _, s := range stacks() {
			if s.leading(t) {
				return s
			}
		}
		return nil
	}

	watch, err := redisstore.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	mon := &monitor{firstAt: map[uint64]time.Time{}}
	mctx, mstop := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	go func() { defer close(mdone); mon.run(mctx, t, watch, nodes, stacks) }()
	defer func() { mstop(); <-mdone }()

	ctx := context.Background()
	var old *stack
	var oldEpoch uint64
	for round := range 2 {
		testkit.Wait{Every: 2 * time.Millisecond, For: 5 * time.Second}.Until(t, "a leader", func() bool { return leader() != nil })
		lead := leader()
		_, epoch, _ := lead.l.Leader()
		testkit.Wait{Every: 2 * time.Millisecond, For: 5 * time.Second}.Until(t, "the leader's first records", func() bool { _, ok := mon.firstWrite(epoch); return ok })
		time.Sleep(ttl) // three renewals' worth of refreshing under contention
		// Every replica reads the leader's records and agrees who leads.
		for _, s := range stacks() {
			if h, e, ok := s.l.Leader(); !ok || h != lead.id || e != epoch {
				t.Errorf("round %d: %s sees leader %q epoch %d (ok %v), want %s %d", round, s.id, h, e, ok, lead.id, epoch)
			}
			if _, err := s.st.Get(ctx, "n0"); err != nil {
				t.Errorf("round %d: %s reads n0: %v", round, s.id, err)
			}
		}

		crashed := time.Now()
		lead.crash()
		mu.Lock()
		delete(live, lead.id)
		mu.Unlock()
		took := testkit.Wait{Every: 2 * time.Millisecond, For: 2 * ttl}.Until(t, "another replica takes over within 2×ttl", func() bool { return leader() != nil })
		next := leader()
		_, nextEpoch, _ := next.l.Leader()
		testkit.Wait{Every: 2 * time.Millisecond, For: 2 * ttl}.Until(t, "the new leader's first records", func() bool { _, ok := mon.firstWrite(nextEpoch); return ok })
		wrote, _ := mon.firstWrite(nextEpoch)
		t.Logf("round %d: leader %s (epoch %d) crashed; %s (epoch %d) took the lease after %v and its first records were in the store after %v (ttl %v)",
			round, lead.id, epoch, next.id, nextEpoch, took.Round(time.Millisecond), wrote.Sub(crashed).Round(time.Millisecond), ttl)
		if nextEpoch <= epoch {
			t.Errorf("round %d: epoch %d after %d", round, nextEpoch, epoch)
		}
		if old == nil {
			old, oldEpoch = lead, epoch
		}
	}

	// The first ex-leader comes back (a long pause, a healed partition)
	// and resumes writing with its old epoch: the store refuses it and
	// keeps the current leader's records.
	rdb, err := redisstore.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	stale := redisstore.New(rdb, redisstore.Options{Prefix: replicaPrefix})
	before, _, err := readHeader(ctx, rdb, "n0")
	if err != nil {
		t.Fatal(err)
	}
	future := ticking{base: src.base.Add(time.Hour), clock: new(atomic.Int64), nodes: nodes}
	staleLoop := refresh.New(future, stale, nopRecorder{}, log.With("replica", old.id+"(stale)"), time.Now, refresh.Config{Thresholds: diagnose.DefaultThresholds()})
	if err := staleLoop.Once(store.WithFence(ctx, oldEpoch)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale leader's refresh with epoch %d: %v, want ErrFenced", oldEpoch, err)
	}
	obs := future.at(src.base.Add(2 * time.Hour))
	rec := &store.Record{Node: &llmdiagv1.Node{Id: "n0"}, Metrics: obs[0].Metrics}
	if err := stale.Put(store.WithFence(ctx, oldEpoch), rec, refresh.PointOf(obs[0].Metrics)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale leader's Put with epoch %d: %v, want ErrFenced", oldEpoch, err)
	}
	after, _, err := readHeader(ctx, rdb, "n0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := stale.Get(ctx, "n0")
	if err != nil {
		t.Fatal(err)
	}
	if after.epoch < before.epoch || after.epoch == oldEpoch || !got.Metrics.GetObservedAt().AsTime().Before(future.base) {
		t.Fatalf("the stale write landed: before %+v, after %+v, stored observed_at %v", before, after, got.Metrics.GetObservedAt().AsTime())
	}

	mstop()
	<-mdone
	mon.mu.Lock()
	defer mon.mu.Unlock()
	for _, v := range mon.violations {
		t.Error(v)
	}
	t.Logf("%d polls of the store; writer epochs in order: %v", mon.polls, mon.epochs)
	if len(mon.epochs) != 3 {
		t.Errorf("writer epochs %v: want three leaders' records", mon.epochs)
	}
	for i := 1; i < len(mon.epochs); i++ {
		if mon.epochs[i] <= mon.epochs[i-1] {
			t.Errorf("writer epochs %v not increasing", mon.epochs)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
