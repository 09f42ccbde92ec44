package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/storetest"
	"github.com/llmdiag/llmdiag/store/redisstore"
)

// exactTrim makes XADD MAXLEN ~ trim exactly (one entry per stream node),
// as the conformance suite's feed bounds need.
func exactTrim(t *testing.T, s *redistest.Server) {
	t.Helper()
	if _, err := s.Do("CONFIG", "SET", "stream-node-max-entries", "1"); err != nil {
		t.Fatal(err)
	}
}

func client(t *testing.T, addr string) redis.UniversalClient {
	t.Helper()
	rdb, err := redisstore.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func harness(rdb redis.UniversalClient) storetest.Harness {
	var n atomic.Int32
	return storetest.Harness{
		New: func(t *testing.T, o storetest.Options) store.Store {
			return redisstore.New(rdb, redisstore.Options{
				Prefix:     fmt.Sprintf("t%d-%d:", n.Add(1), time.Now().UnixNano()),
				HistoryLen: o.HistoryLen, FeedLen: o.FeedLen, Now: o.Now,
			})
		},
		Ahead: func(tok string) string { return tok[:strings.LastIndexByte(tok, ':')+1] + "99" },
	}
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	exactTrim(t, srv)
	storetest.Conformance(t, harness(client(t, srv.URL())))
}

func TestConformanceCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	for _, n := range c.Nodes {
		exactTrim(t, n)
	}
	storetest.Conformance(t, harness(client(t, strings.Join(c.Addrs(), ","))))
}

func TestNewClientURLs(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("CONFIG", "SET", "requirepass", "s3cret"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url     string
		wantErr bool
	}{
		{"redis://:s3cret@" + srv.Addr() + "/0", false},
		{"redis://default:s3cret@" + srv.Addr(), false},
		{"redis://:wrong@" + srv.Addr(), true},
		{"redis://" + srv.Addr(), true},
	} {
		rdb, err := redisstore.NewClient(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		err = rdb.Ping(context.Background()).Err()
		rdb.Close()
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: ping err = %v, want error %v", tc.url, err, tc.wantErr)
		}
	}
	for _, bad := range []string{"", "redis://[::1"} {
		if _, err := redisstore.NewClient(bad); err == nil {
			t.Fatalf("NewClient(%q) succeeded", bad)
		}
	}
	// The password given apart (serve --redis-password-file), with or
	// without a user in the URL; not both in the URL and apart.
	for _, tc := range []struct {
		url, password string
		wantErr       bool
	}{
		{"redis://" + srv.Addr(), "s3cret", false},
		{"redis://default@" + srv.Addr() + "/0", "s3cret", false},
		{"redis://" + srv.Addr(), "wrong", true},
	} {
		rdb, err := redisstore.NewClientWith(tc.url, redisstore.ClientOptions{Password: tc.password})
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		err = rdb.Ping(context.Background()).Err()
		rdb.Close()
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s with a password apart: ping err = %v, want error %v", tc.url, err, tc.wantErr)
		}
	}
	if _, err := redisstore.NewClientWith("redis://:other@"+srv.Addr(), redisstore.ClientOptions{Password: "s3cret"}); err == nil {
		t.Fatal("a password in the URL and apart: accepted")
	}
	if _, err := redisstore.NewClientWith("redis://"+srv.Addr(), redisstore.ClientOptions{PasswordFile: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Fatal("a missing password file: accepted")
	}

	// A password file is read anew for new connections: rotated on the
	// server and in the file, the client reconnects with the new one.
	file := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rdb, err := redisstore.NewClientWith("redis://"+srv.Addr(), redisstore.ClientOptions{PasswordFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping with the password file: %v", err)
	}
	if err := os.WriteFile(file, []byte("r0tated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "requirepass", "r0tated").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no").Err(); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Logf("client kill: %v", err)
	}
	testkit.Eventually(t, 5*time.Second, "ping with the rotated password", func() bool { return rdb.Ping(ctx).Err() == nil })
}

// TestNewClientErrorsRedacted: no error of NewClient carries the URL's
// password (url.Parse quotes the URL it refuses).
func TestNewClientErrorsRedacted(t *testing.T) {
	for _, bad := range []string{"redis://u:pw-s3cret@[::1", "redis://u:pw-s3cret@h:1/x/y", "redis://u:pw-s3cret@h:bad%zz", "redis://u:pw-s3cret@h:1?bogus=1"} {
		c, err := redisstore.NewClient(bad)
		if err == nil {
			c.Close()
			t.Errorf("NewClient(%q) succeeded", bad)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("NewClient(%q): %v", bad, err)
		}
	}
}

// TestRecordsCrossProcesses: what one Store (one process) writes, another
// reads exactly, less the Diagnosis.
func TestRecordsCrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	w := redisstore.New(client(t, srv.URL()), redisstore.Options{})
	r := redisstore.New(client(t, srv.URL()), redisstore.Options{})
	var nodes []storetest.Node
	storetest.Fleet(40, func(int) int { return 130 }, func(_ int, n storetest.Node) {
		nodes = append(nodes, n)
		for _, p := range n.Points[:len(n.Points)-1] {
			if err := w.Put(ctx, &store.Record{Node: n.Record.Node, Metrics: n.Record.Metrics}, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Put(ctx, n.Record, n.Points[len(n.Points)-1]); err != nil {
			t.Fatal(err)
		}
	})
	list, err := r.List(ctx)
	if err != nil || len(list) != len(nodes) {
		t.Fatalf("List: %d records, %v; want %d", len(list), err, len(nodes))
	}
	for _, n := range nodes {
		id := n.Record.Node.GetId()
		got, err := r.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Diagnosis != nil {
			t.Fatalf("%s: Diagnosis stored; the layout leaves it out", id)
		}
		if !proto.Equal(got.Node, n.Record.Node) || !proto.Equal(got.Metrics, n.Record.Metrics) {
			t.Fatalf("%s: record changed on the way through Redis", id)
		}
		hist, err := r.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := n.Points[len(n.Points)-redisstore.DefaultHistoryLen:]
		if len(hist) != len(want) {
			t.Fatalf("%s: %d points, want %d", id, len(hist), len(want))
		}
		for i := range want {
			if !hist[i].At.Equal(want[i].At) || hist[i].Status != want[i].Status || fmt.Sprint(deref(hist[i])) != fmt.Sprint(deref(want[i])) {
				t.Fatalf("%s point %d: %+v, want %+v", id, i, hist[i], want[i])
			}
		}
	}
}

func deref(p diagnose.Point) []float64 {
	var out []float64
	for _, g := range []*float64{p.Queue, p.Running, p.KVPressure, p.E2EMean, p.GenerationRate} {
		if g == nil {
			out = append(out, -1e300)
		} else {
			out = append(out, *g)
		}
	}
	return out
}

func observed(id string, sec int64) *store.Record {
	return &store.Record{
		Node:    &llmdiagv1.Node{Id: id, Model: "m"},
		Metrics: &llmdiagv1.NodeMetrics{Node: id, Model: "m", ObservedAt: &timestamppb.Timestamp{Seconds: sec}},
	}
}

func TestFencing(t *testing.T) {
	srv := redistest.Start(t)
	s := redisstore.New(client(t, srv.URL()), redisstore.Options{})
	bg := context.Background()
	p := func(sec int64) diagnose.Point { return diagnose.Point{At: time.Unix(sec, 0)} }
	steps := []struct {
		name    string
		epoch   uint64
		sec     int64
		wantErr error
	}{
		{"first leader writes", 1, 100, nil},
		{"first leader writes on", 1, 105, nil},
		{"new leader takes over", 2, 110, nil},
		{"stale leader, later data", 1, 115, store.ErrFenced},
		{"stale leader, unfenced", 0, 120, store.ErrFenced},
		{"new leader, older observation", 2, 108, store.ErrOutOfOrder},
		{"new leader, same observation", 2, 110, nil},
		{"new leader writes on", 2, 120, nil},
	}
	for _, st := range steps {
		err := s.Put(store.WithFence(bg, st.epoch), observed("n", st.sec), p(st.sec))
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
		}
	}
	rec, _ := s.Get(bg, "n")
	hist, _ := s.History(bg, "n")
	var secs []int64
	for _, h := range hist {
		secs = append(secs, h.At.Unix())
	}
	if rec.Metrics.GetObservedAt().GetSeconds() != 120 || fmt.Sprint(secs) != "[100 105 110 110 120]" {
		t.Fatalf("stored %d, history %v: refused writes got through", rec.Metrics.GetObservedAt().GetSeconds(), secs)
	}
	// Other nodes have their own epochs; the feed has one.
	if err := s.Put(store.WithFence(bg, 1), observed("other", 1), p(1)); err != nil {
		t.Fatalf("epoch 1 on a node epoch 2 never wrote: %v", err)
	}
	if _, err := s.Publish(store.WithFence(bg, 3), &llmdiagv1.NodeHealth{Node: "n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(store.WithFence(bg, 2), &llmdiagv1.NodeHealth{Node: "n"}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale publish: %v, want ErrFenced", err)
	}
	if _, err := s.Publish(store.WithFence(bg, 3), &llmdiagv1.NodeHealth{Node: "n"}); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentPutsKeepEveryPoint: writes of one node from several
// clients never lose a history point (the history is read, appended and
// written back under a check).
func TestConcurrentPutsKeepEveryPoint(t *testing.T) {
	srv := redistest.Start(t)
	var stores []*redisstore.Store
	for range 3 {
		stores = append(stores, redisstore.New(client(t, srv.URL()), redisstore.Options{HistoryLen: 500}))
	}
	var wg sync.WaitGroup
	for w, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := s.Put(context.Background(), observed("n", 0), diagnose.Point{At: time.Unix(int64(w*100+i), 0)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	hist, err := stores[0].History(context.Background(), "n")
	if err != nil || len(hist) != 60 {
		t.Fatalf("%d points, %v; want 60", len(hist), err)
	}
}

func TestNodesExpire(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := client(t, srv.URL())
	// b is written on every poll while a is left alone: a expires and
	// leaves the index, b never does. (Sleeping 200 ms twice against a
	// 300 ms TTL expired b too when the machine was busy.)
	const ttl = time.Second
	s := redisstore.New(rdb, redisstore.Options{NodeTTL: ttl})
	for _, id := range []string{"a", "b"} {
		if err := s.Put(ctx, observed(id, 1), diagnose.Point{At: time.Unix(1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	seq := int64(1)
	putB := func() {
		seq++
		if err := s.Put(ctx, observed("b", seq), diagnose.Point{At: time.Unix(seq, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, time.Minute, "a to expire while b is written", func() bool {
		putB()
		_, err := s.Get(ctx, "a")
		return errors.Is(err, store.ErrNotFound)
	})
	if _, err := s.History(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("History of an expired node: %v", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Node.GetId() != "b" {
		t.Fatalf("List = %v, %v; want b alone", list, err)
	}
	// The index is pruned by a write at most every ttl/10.
	var ids []string
	testkit.Wait{For: time.Minute, Last: func() string { return fmt.Sprint(ids) }}.Until(t, "a write to prune a from the index", func() bool {
		putB()
		ids, _ = rdb.ZRange(ctx, redisstore.DefaultPrefix+"nodes", 0, -1).Result()
		return fmt.Sprint(ids) == "[b]"
	})
}

func TestFeedResumesAcrossRestart(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{Persist: true})
	ctx := context.Background()
	s := redisstore.New(client(t, srv.URL()), redisstore.Options{})
	var tokens []string
	for i := range 5 {
		ev, err := s.Publish(ctx, &llmdiagv1.NodeHealth{Node: fmt.Sprint("n", i)})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, ev.Token)
	}
	srv.Restart()
	// Outage: a reader waits through it and reads on once Redis is back.
	got := make(chan []store.Event, 1)
	go func() {
		for {
			evs, err := s.Events(ctx, tokens[4], 10, time.Second)
			if err == nil && len(evs) > 0 {
				got <- evs
				return
			}
			if errors.Is(err, store.ErrTokenExpired) {
				got <- nil
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if evs, err := s.Events(ctx, tokens[1], 10, 0); err != nil || len(evs) != 3 || evs[0].Health.GetNode() != "n2" {
		t.Fatalf("after restart: %v %v, want n2..n4", evs, err)
	}
	ev, err := s.Publish(ctx, &llmdiagv1.NodeHealth{Node: "n5"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-got:
		if len(evs) != 1 || evs[0].Token != ev.Token {
			t.Fatalf("waiting reader got %v, want n5", evs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader did not resume")
	}

	// Without persistence the feed is gone: old tokens expire.
	mem := redistest.Start(t)
	s2 := redisstore.New(client(t, mem.URL()), redisstore.Options{})
	ev, err = s2.Publish(ctx, &llmdiagv1.NodeHealth{Node: "x"})
	if err != nil {
		t.Fatal(err)
	}
	mem.Restart()
	s2.Publish(ctx, &llmdiagv1.NodeHealth{Node: "y"})
	if _, err := s2.Events(ctx, ev.Token, 10, 0); !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("token of a lost feed: %v, want ErrTokenExpired", err)
	}
}

// TestTokenExpiresAfterTrim uses the server's default stream nodes: MAXLEN ~
// keeps at least FeedLen events, and tokens whose next event was trimmed
// expire.
func TestTokenExpiresAfterTrim(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s := redisstore.New(client(t, srv.URL()), redisstore.Options{FeedLen: 10})
	var tokens []string
	for i := range 350 {
		ev, err := s.Publish(ctx, &llmdiagv1.NodeHealth{Node: fmt.Sprint("n", i)})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, ev.Token)
	}
	if _, err := s.Events(ctx, tokens[0], 10, 0); !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("trimmed token: %v", err)
	}
	evs, err := s.Events(ctx, tokens[338], 100, 0)
	if err != nil || len(evs) != 11 || evs[0].Health.GetNode() != "n339" {
		t.Fatalf("recent token: %d events, %v", len(evs), err)
	}
}

// TestCachedAcrossStores: 50 concurrent identical Cached calls spread over
// three Stores (three replicas) make one load.
func TestCachedAcrossStores(t *testing.T) {
	srv := redistest.Start(t)
	var stores []*redisstore.Store
	for range 3 {
		stores = append(stores, redisstore.New(client(t, srv.URL()), redisstore.Options{}))
	}
	var loads atomic.Int32
	release := make(chan struct{})
	load := func(context.Context) ([]byte, error) {
		loads.Add(1)
		<-release
		return []byte("v"), nil
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := stores[i%3].Cached(context.Background(), "q", time.Minute, load)
			if err != nil || string(v) != "v" {
				t.Errorf("call %d: %q %v", i, v, err)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("50 calls over 3 stores made %d loads, want 1", n)
	}
}

// TestCachedHolderDies: the replica loading dies (its connection to Redis
// goes); the lock expires and another replica loads.
func TestCachedHolderDies(t *testing.T) {
	srv := redistest.Start(t)
	opts := redisstore.Options{LockTTL: 300 * time.Millisecond}
	dying := client(t, srv.URL())
	a := redisstore.New(dying, opts)
	b := redisstore.New(client(t, srv.URL()), opts)
	started := make(chan struct{})
	go a.Cached(context.Background(), "q", time.Minute, func(context.Context) ([]byte, error) {
		close(started)
		select {} // never returns: the process is as good as dead
	})
	<-started
	dying.Close() // no more lock renewals
	var loads atomic.Int32
	begin := time.Now()
	v, err := b.Cached(context.Background(), "q", time.Minute, func(context.Context) ([]byte, error) {
		loads.Add(1)
		return []byte("b"), nil
	})
	if err != nil || string(v) != "b" || loads.Load() != 1 {
		t.Fatalf("after the holder died: %q %v, %d loads", v, err, loads.Load())
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("took %v to take over a dead lock of 300ms", d)
	}
}

// TestCachedWithoutRedis: an outage degrades the cache to no cache.
func TestCachedWithoutRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := redisstore.New(client(t, srv.URL()), redisstore.Options{})
	srv.Stop()
	v, err := s.Cached(context.Background(), "q", time.Minute, func(context.Context) ([]byte, error) { return []byte("v"), nil })
	if err != nil || string(v) != "v" {
		t.Fatalf("Cached with Redis down: %q %v", v, err)
	}
	if _, err := s.Get(context.Background(), "n"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get with Redis down: %v, want an outage error", err)
	}
}

func TestNewClientParsing(t *testing.T) {
	for _, tc := range []struct {
		url              string
		cluster          bool
		addrs            []string
		user, pass       string
		wantErr, wantTLS bool
	}{
		{url: "redis://127.0.0.1:6379", addrs: []string{"127.0.0.1:6379"}},
		{url: "redis://u:p%40ss@h:6380/2", addrs: []string{"h:6380"}, user: "u", pass: "p@ss"},
		{url: "rediss://:secret@h:6380", addrs: []string{"h:6380"}, pass: "secret", wantTLS: true},
		{url: "redis://u:p@h1:7000,h2:7001,h3:7002", cluster: true, addrs: []string{"h1:7000", "h2:7001", "h3:7002"}, user: "u", pass: "p"},
		{url: "redis://h1:7000?addr=h2:7001", cluster: true, addrs: []string{"h1:7000", "h2:7001"}},
		{url: "h1:7000,h2:7001", cluster: true, addrs: []string{"h1:7000", "h2:7001"}},
		{url: "http://h:1", wantErr: true},
		{url: "redis://", wantErr: true},
		{url: "redis://h:1?bogus=1", wantErr: true},
	} {
		c, err := redisstore.NewClient(tc.url)
		if tc.wantErr {
			if err == nil {
				c.Close()
				t.Errorf("%s: no error", tc.url)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		var (
			addrs      []string
			user, pass string
			ctxTimeout bool
			tls        bool
		)
		switch c := c.(type) {
		case *redis.Client:
			o := c.Options()
			addrs, user, pass, ctxTimeout, tls = []string{o.Addr}, o.Username, o.Password, o.ContextTimeoutEnabled, o.TLSConfig != nil
		case *redis.ClusterClient:
			o := c.Options()
			addrs, user, pass, ctxTimeout, tls = o.Addrs, o.Username, o.Password, o.ContextTimeoutEnabled, o.TLSConfig != nil
		}
		c.Close()
		if _, isCluster := c.(*redis.ClusterClient); isCluster != tc.cluster || fmt.Sprint(addrs) != fmt.Sprint(tc.addrs) ||
			user != tc.user || pass != tc.pass || !ctxTimeout || tls != tc.wantTLS {
			t.Errorf("%s: cluster %v addrs %v user %q pass %q ctx deadlines %v tls %v", tc.url, isCluster, addrs, user, pass, ctxTimeout, tls)
		}
	}
}

// A node is listed for NodeTTL after its last write; its keys live a quarter
// longer so that Sweep can read what it removes.
func TestNodeTTLBoundsListing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.URL())
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := redisstore.New(rdb, redisstore.Options{Prefix: "ttl:", NodeTTL: time.Minute, Now: func() time.Time { return now }})
	rec := &store.Record{Node: &llmdiagv1.Node{Id: "a", Model: "m"}, Metrics: &llmdiagv1.NodeMetrics{Node: "a", Model: "m"}}
	if err := st.Put(ctx, rec, diagnose.Point{At: now}); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, "ttl:{n:a}:rec").Val(); ttl <= time.Minute || ttl > 75*time.Second {
		t.Errorf("record key PTTL %v, want in (1m, 75s]", ttl)
	}
	if list, err := st.List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v; want a", list, err)
	}
	now = now.Add(61 * time.Second)
	if list, err := st.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List past NodeTTL = %v, %v; want nothing", list, err)
	}
	gone, err := st.Sweep(ctx, time.Minute)
	if err != nil || len(gone) != 1 || gone[0].Node.GetModel() != "m" {
		t.Fatalf("Sweep = %v, %v; want a with its model", gone, err)
	}
	if n := rdb.Exists(ctx, "ttl:{n:a}:rec", "ttl:{n:a}:hist").Val(); n != 0 {
		t.Errorf("%d keys of a swept node remain", n)
	}
	if n := rdb.ZCard(ctx, "ttl:nodes").Val(); n != 0 {
		t.Errorf("index holds %d nodes after Sweep", n)
	}
}
