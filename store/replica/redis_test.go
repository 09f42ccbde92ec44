package replica_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/store/redisstore"
	"github.com/llmdiag/llmdiag/store/replica"
)

// overRedis is a writer (the ingest leader, another process) and a replica
// of the same redis-server, each with its own client and clock.
type overRedis struct {
	rdb            redis.UniversalClient // the writer's
	w              *redisstore.Store
	shared         *redisstore.Store // the replica's
	r              *replica.Store
	wclock, rclock *testkit.Clock
}

// newOverRedis runs a redis-server for them, or uses url when not empty.
func newOverRedis(t *testing.T, url string, opts replica.Options, wrap func(*redisstore.Store) store.Store) *overRedis {
	t.Helper()
	if url == "" {
		url = redistest.Start(t).URL()
	}
	o := &overRedis{wclock: testkit.NewClock(t0), rclock: testkit.NewClock(t0)}
	dial := func() redis.UniversalClient {
		rdb, err := redisstore.NewClient(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	o.rdb = dial()
	o.w = redisstore.New(o.rdb, redisstore.Options{NodeTTL: 30 * time.Minute, Now: o.wclock.Now})
	o.shared = redisstore.New(dial(), redisstore.Options{NodeTTL: 30 * time.Minute, Now: o.rclock.Now})
	var shared store.Store = o.shared
	if wrap != nil {
		shared = wrap(o.shared)
	}
	opts.Now = o.rclock.Now
	o.r = replica.New(shared, memory.New(memory.Options{}, "copy"), opts)
	return o
}

// put writes node id observed at t0+sec through the writer.
func (o *overRedis) put(t *testing.T, id string, sec int) {
	t.Helper()
	at := t0.Add(time.Duration(sec) * time.Second)
	if err := o.w.Put(context.Background(), record(id, at, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: at, Up: true}); err != nil {
		t.Fatal(err)
	}
}

// sync syncs the replica and checks how: full or not, and how many nodes it
// read.
func (o *overRedis) sync(t *testing.T, full bool, read int) {
	t.Helper()
	if err := o.r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := o.r.Stats(); st.LastFull != full || st.LastRead != read {
		t.Fatalf("Sync: full %v, read %d nodes; want full %v, %d nodes", st.LastFull, st.LastRead, full, read)
	}
}

// copyIs checks that the copy holds exactly the nodes want names, each
// observed at t0 plus the given seconds.
func (o *overRedis) copyIs(t *testing.T, want map[string]int) {
	t.Helper()
	recs, err := o.r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, rec := range recs {
		got[rec.Node.GetId()] = int(rec.Metrics.GetObservedAt().AsTime().Sub(t0) / time.Second)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("copy holds %v (node: observed second); want %v", got, want)
	}
}

// TestIncrementalSyncFollowsChanges: after the first (full) sync, each sync
// reads only the nodes written since the last, and the copy follows the
// shared store: a changed node, a new one, one swept by the leader, one
// past the listing's NodeTTL.
func TestIncrementalSyncFollowsChanges(t *testing.T) {
	o := newOverRedis(t, "", replica.Options{FullEvery: 24 * time.Hour}, nil)
	o.put(t, "c", 0)
	o.wclock.Add(20 * time.Minute)
	o.rclock.Add(20 * time.Minute)
	o.put(t, "a", 1)
	o.put(t, "b", 1)
	o.sync(t, true, 3)
	o.copyIs(t, map[string]int{"a": 1, "b": 1, "c": 0})
	for _, step := range []struct {
		name string
		act  func()
		read int
		want map[string]int
	}{
		{"nothing written", func() {}, 0, map[string]int{"a": 1, "b": 1, "c": 0}},
		{"a node changed", func() { o.put(t, "b", 2) }, 1, map[string]int{"a": 1, "b": 2, "c": 0}},
		{"a new node", func() { o.put(t, "d", 3) }, 1, map[string]int{"a": 1, "b": 2, "c": 0, "d": 3}},
		{"a node swept", func() {
			if gone, err := o.w.Sweep(context.Background(), 10*time.Minute); err != nil || len(gone) != 1 {
				t.Fatalf("Sweep = %v, %v; want c", gone, err)
			}
		}, 0, map[string]int{"a": 1, "b": 2, "d": 3}},
		{"a node past NodeTTL, two written", func() {
			o.wclock.Add(20 * time.Minute)
			o.put(t, "b", 4)
			o.put(t, "d", 4)
			o.rclock.Add(35 * time.Minute) // a, written 20 min in, is 35 min old
		}, 2, map[string]int{"b": 4, "d": 4}},
	} {
		step.act()
		o.sync(t, false, step.read)
		o.copyIs(t, step.want)
	}
	if st := o.r.Stats(); st.Full != 1 || st.Incremental != 5 {
		t.Errorf("Stats = %+v; want 1 full sync, 5 incremental", st)
	}
}

// TestFullSyncRepairsDrift: what an incremental sync cannot see is repaired
// by the full read: at once when the write log says it cannot be followed,
// else by the periodic full check (DefaultFullEvery).
func TestFullSyncRepairsDrift(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// drift writes b observed at second 2 in a way the log may miss.
		drift func(t *testing.T, o *overRedis)
		// now: the next sync reads everything (the log says it must).
		now bool
		// want is the copy once repaired (node: observed second).
		want map[string]int
		// read is how many nodes the repairing sync reads, when not all
		// of want.
		read int
	}{
		{"a write logged below the last position", func(t *testing.T, o *overRedis) {
			old := o.rdb.ZScore(ctx, redisstore.DefaultPrefix+"{changes}:log", "b").Val()
			o.put(t, "b", 2)
			o.rdb.ZAdd(ctx, redisstore.DefaultPrefix+"{changes}:log", redis.Z{Score: old, Member: "b"})
		}, false, map[string]int{"a": 1, "b": 2}, 0},
		{"a write not logged (an older writer)", func(t *testing.T, o *overRedis) {
			old := o.rdb.ZScore(ctx, redisstore.DefaultPrefix+"{changes}:log", "b").Val()
			o.put(t, "b", 2)
			o.rdb.ZAdd(ctx, redisstore.DefaultPrefix+"{changes}:log", redis.Z{Score: old, Member: "b"})
			o.rdb.HIncrBy(ctx, redisstore.DefaultPrefix+"{changes}:seq", "n", -1)
		}, true, map[string]int{"a": 1, "b": 2}, 0},
		// a stays through LossGrace though unlisted: the leader writes
		// it again (TestRedisLosingItsDataLosesNoNode).
		{"redis lost its data", func(t *testing.T, o *overRedis) {
			o.rdb.FlushAll(ctx)
			o.put(t, "b", 2)
		}, true, map[string]int{"a": 1, "b": 2}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOverRedis(t, "", replica.Options{}, nil)
			o.put(t, "a", 1)
			o.put(t, "b", 1)
			o.sync(t, true, 2)
			o.wclock.Add(time.Second) // the index's time moves with each write
			tc.drift(t, o)
			if tc.now {
				read := len(tc.want)
				if tc.read > 0 {
					read = tc.read
				}
				o.sync(t, true, read)
				o.copyIs(t, tc.want)
				return
			}
			o.sync(t, false, 0)
			o.copyIs(t, map[string]int{"a": 1, "b": 1}) // the drift
			o.rclock.Add(replica.DefaultFullEvery - time.Second)
			o.sync(t, false, 0)
			o.rclock.Add(time.Second)
			o.sync(t, true, 2)
			o.copyIs(t, tc.want)
		})
	}
}

// failingRead is a shared store whose Read fails while fail is set.
type failingRead struct {
	*redisstore.Store
	fail atomic.Bool
}

func (f *failingRead) Read(ctx context.Context, ids []string) ([]*store.Record, [][]diagnose.Point, error) {
	if f.fail.Load() {
		return nil, nil, errors.New("connection reset")
	}
	return f.Store.Read(ctx, ids)
}

// TestFailedIncrementalReadFallsBackToFull: a sync whose incremental read
// failed leaves the copy degraded, and the next sync reads everything.
func TestFailedIncrementalReadFallsBackToFull(t *testing.T) {
	var f *failingRead
	o := newOverRedis(t, "", replica.Options{}, func(s *redisstore.Store) store.Store {
		f = &failingRead{Store: s}
		return f
	})
	o.put(t, "a", 1)
	o.sync(t, true, 1)
	o.put(t, "a", 2)
	f.fail.Store(true)
	if err := o.r.Sync(context.Background()); err == nil {
		t.Fatal("Sync with a failing read: no error")
	}
	if reason, _, degraded := o.r.Degraded(); !degraded {
		t.Errorf("not degraded after a failed sync (%q)", reason)
	}
	f.fail.Store(false)
	o.put(t, "b", 3)
	o.sync(t, true, 2)
	o.copyIs(t, map[string]int{"a": 2, "b": 3})
	o.sync(t, false, 0)
	if st := o.r.Stats(); st.Full != 2 || st.Incremental != 1 {
		t.Errorf("Stats = %+v; want 2 full, 1 incremental", st)
	}
}

// TestIncrementalSyncKeepsOwnWrites: this replica's own writes, in the copy
// but not in the shared store (as if they never reached it), are never
// undone by an incremental sync, as by a full one: a record observed after
// the shared store's stays, and a node the shared store does not list
// stays until a sync that began after it was written.
func TestIncrementalSyncKeepsOwnWrites(t *testing.T) {
	ctx := context.Background()
	o := newOverRedis(t, "", replica.Options{}, nil)
	o.put(t, "a", 1)
	o.sync(t, true, 1)
	for _, id := range []string{"a", "f"} {
		at := t0.Add(5 * time.Second)
		if err := o.r.Put(ctx, record(id, at, llmdiagv1.Status_STATUS_OK), diagnose.Point{At: at, Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Back to the shared state before those writes, in the same log.
	o.rdb.Del(ctx, "llmdiag:{n:a}:rec", "llmdiag:{n:a}:hist", "llmdiag:{n:f}:rec", "llmdiag:{n:f}:hist")
	o.rdb.ZRem(ctx, "llmdiag:nodes", "f")
	o.put(t, "a", 1)
	o.sync(t, false, 1)
	o.copyIs(t, map[string]int{"a": 5, "f": 5})
	o.put(t, "a", 2)
	o.sync(t, false, 1)
	o.copyIs(t, map[string]int{"a": 5}) // f was written before this sync's last one began
}

// TestIncrementalSyncOnCluster: the write log, the index and the nodes'
// keys lie on different Cluster slots; an incremental sync follows them.
func TestIncrementalSyncOnCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	o := newOverRedis(t, strings.Join(c.Addrs(), ","), replica.Options{}, nil)
	for _, id := range []string{"a", "b", "c", "d"} {
		o.put(t, id, 1)
	}
	o.sync(t, true, 4)
	o.put(t, "b", 2)
	o.put(t, "e", 2)
	o.wclock.Add(20 * time.Minute)
	o.put(t, "a", 3)
	if _, err := o.w.Sweep(context.Background(), 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	o.sync(t, false, 1)
	o.copyIs(t, map[string]int{"a": 3})
}

// TestHistoryFromAnEarlierVersion: a history the previous layout wrote
// (before E2EP99: store/internal/compact/testdata, its .txt golden the
// points that build decoded) is in Redis when this version starts. The
// replica's copy reads it whole; the writer appends a point with E2EP99 to
// it, and the next sync brings that point, E2EP99 and all, to the copy.
func TestHistoryFromAnEarlierVersion(t *testing.T) {
	ctx := context.Background()
	const fixture = "../internal/compact/testdata/history-v1-overloaded"
	raw, err := os.ReadFile(fixture + ".bin")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(fixture + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	for line := range strings.Lines(string(golden)) {
		at, err := time.Parse(time.RFC3339Nano, strings.Fields(line)[0])
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, at)
	}
	o := newOverRedis(t, "", replica.Options{FullEvery: 24 * time.Hour}, nil)
	last := times[len(times)-1]
	if err := o.w.Put(ctx, record("a", last, llmdiagv1.Status_STATUS_WARN), diagnose.Point{At: last, Up: true}); err != nil {
		t.Fatal(err)
	}
	// As the earlier version left it.
	if err := o.rdb.Set(ctx, "llmdiag:{n:a}:hist", raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
	o.sync(t, true, 1)
	check := func(want int) []diagnose.Point {
		t.Helper()
		h, err := o.r.History(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != want {
			t.Fatalf("copy's history of a: %d points, want %d", len(h), want)
		}
		for i, at := range times {
			if !h[i].At.Equal(at) || h[i].E2EP99 != nil || h[i].Running == nil {
				t.Fatalf("point %d: at %v, E2EP99 %v, running %v; want the earlier version's point at %v, running known, no E2EP99", i, h[i].At, h[i].E2EP99, h[i].Running, at)
			}
		}
		return h
	}
	check(len(times))

	at := last.Add(5 * time.Second)
	p99, mean := 42.5, 11.0
	if err := o.w.Put(ctx, record("a", at, llmdiagv1.Status_STATUS_CRIT), diagnose.Point{At: at, Up: true, E2EMean: &mean, E2EP99: &p99, Status: llmdiagv1.Status_STATUS_CRIT}); err != nil {
		t.Fatal(err)
	}
	v, err := o.rdb.Get(ctx, "llmdiag:{n:a}:hist").Bytes()
	if err != nil || len(v) == 0 || v[0] != 2 {
		t.Fatalf("history with E2EP99 stored as version %v (%v), want 2", v[:min(1, len(v))], err)
	}
	o.sync(t, false, 1)
	h := check(len(times) + 1)
	if p := h[len(h)-1]; !p.At.Equal(at) || p.E2EP99 == nil || *p.E2EP99 != p99 || p.Queue != nil || *p.E2EMean != mean {
		t.Fatalf("newest point %+v: want E2EP99 %v and mean %v, queue absent", p, p99, mean)
	}
}

// TestFastWritesReachReplicas: a leader's PutRecord (the fast lane's
// writes) goes through its own copy to Redis, and another replica's
// incremental sync reads the new record and the history as Put left it.
func TestFastWritesReachReplicas(t *testing.T) {
	o := newOverRedis(t, "", replica.Options{FullEvery: 24 * time.Hour}, nil)
	leader := replica.New(o.w, memory.New(memory.Options{}, "leader"), replica.Options{Now: o.wclock.Now})
	ctx := context.Background()
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	if err := leader.Put(ctx, record("a", at(1), llmdiagv1.Status_STATUS_OK), diagnose.Point{At: at(1), Up: true}); err != nil {
		t.Fatal(err)
	}
	o.sync(t, true, 1)
	fast := record("a", at(2), llmdiagv1.Status_STATUS_OK)
	fast.Node.Routable = true
	if err := leader.PutRecord(ctx, fast); err != nil {
		t.Fatal(err)
	}
	o.sync(t, false, 1)
	o.copyIs(t, map[string]int{"a": 2})
	if got, err := o.r.Get(ctx, "a"); err != nil || !got.Node.GetRoutable() {
		t.Fatalf("replica's copy of a = %v, %v; want the fast write (routable)", got, err)
	}
	if hist, err := o.r.History(ctx, "a"); err != nil || len(hist) != 1 || !hist[0].At.Equal(at(1)) {
		t.Fatalf("replica's history of a = %v, %v; want Put's one point", hist, err)
	}
	// Redis refuses a record older than its own, and a node never Put.
	if err := leader.PutRecord(ctx, record("a", at(1), llmdiagv1.Status_STATUS_OK)); !errors.Is(err, store.ErrOutOfOrder) {
		t.Fatalf("older PutRecord: err = %v, want ErrOutOfOrder", err)
	}
	if err := o.w.PutRecord(ctx, record("b", at(3), llmdiagv1.Status_STATUS_OK)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutRecord of a node never Put: err = %v, want ErrNotFound", err)
	}
}

// TestRedisLosingItsDataLosesNoNode: Redis restarted without persistence
// lists nothing until the leader writes again; meanwhile the copy keeps
// every node it held (reads never find the fleet empty), takes the ones
// the leader writes again, and drops one still unlisted only once
// LossGrace has passed.
func TestRedisLosingItsDataLosesNoNode(t *testing.T) {
	srv := redistest.Start(t)
	o := newOverRedis(t, srv.URL(), replica.Options{LossGrace: 10 * time.Second}, nil)
	ctx := context.Background()
	o.put(t, "a", 1)
	o.put(t, "b", 1)
	o.sync(t, true, 2)
	listed := func() string {
		recs, err := o.r.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.Node.GetId())
		}
		return strings.Join(ids, ",")
	}
	if _, err := srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	o.sync(t, true, 0)
	if got := listed(); got != "a,b" {
		t.Fatalf("after Redis lost its data the copy lists %q, want a,b", got)
	}
	o.put(t, "a", 2) // the leader's next refresh; b is gone from the fleet
	o.rclock.Add(5 * time.Second)
	if err := o.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != "a,b" {
		t.Fatalf("within the grace the copy lists %q, want a,b", got)
	}
	if rec, err := o.r.Get(ctx, "a"); err != nil || !rec.Metrics.GetObservedAt().AsTime().Equal(t0.Add(2*time.Second)) {
		t.Fatalf("a after the leader wrote it again: %v %v, want observed at t0+2s", rec, err)
	}
	o.rclock.Add(6 * time.Second)
	if err := o.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != "a" {
		t.Fatalf("after the grace the copy lists %q, want a alone", got)
	}
}
