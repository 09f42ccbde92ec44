package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/internal/testing/redistest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/redisstore"
)

// TestChangesFollowTheWriteLog: Changes names the nodes written after a
// position, whatever the writer's clock says, and the nodes listed; Read
// reads those it still holds.
func TestChangesFollowTheWriteLog(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	// The writer's clock runs an hour behind the reader's: the log's order
	// is Redis's count, not the index's times.
	clock := testkit.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	w := redisstore.New(client(t, srv.URL()), redisstore.Options{Now: func() time.Time { return clock.Now().Add(-30 * time.Minute) }})
	r := redisstore.New(client(t, srv.URL()), redisstore.Options{Now: clock.Now})
	put := func(id string, sec int64) {
		t.Helper()
		if err := w.Put(ctx, observed(id, sec), diagnose.Point{At: time.Unix(sec, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	listed, changed, pos0, err := r.Changes(ctx, "")
	if err != nil || listed != nil || changed != nil || pos0 == "" {
		t.Fatalf(`Changes("") = %v, %v, %q, %v; want a position alone`, listed, changed, pos0, err)
	}
	put("a", 1)
	put("b", 1)
	listed, changed, pos1, err := r.Changes(ctx, pos0)
	if err != nil || fmt.Sprint(listed, changed) != "[a b] [a b]" {
		t.Fatalf("Changes after writing a, b = %v, %v, %v; want [a b] [a b]", listed, changed, err)
	}
	put("b", 2)
	put("c", 2)
	put("b", 3)
	listed, changed, pos2, err := r.Changes(ctx, pos1)
	if err != nil || fmt.Sprint(listed, changed) != "[a b c] [c b]" {
		t.Fatalf("Changes after writing b, c, b = %v, %v, %v; want [a b c] and, in write order, [c b]", listed, changed, err)
	}
	if listed, changed, _, err = r.Changes(ctx, pos2); err != nil || len(changed) != 0 || len(listed) != 3 {
		t.Fatalf("Changes with no write since = %v, %v, %v; want 3 listed, none changed", listed, changed, err)
	}
	recs, hists, err := r.Read(ctx, []string{"c", "b", "gone"})
	if err != nil || len(recs) != 2 || recs[0].Node.GetId() != "b" || len(hists[0]) != 3 || recs[1].Node.GetId() != "c" {
		t.Fatalf("Read(c, b, gone) = %v, %v, %v; want b (3 points) and c", recs, hists, err)
	}
	// A swept node leaves the listing and the log.
	if gone, err := w.Sweep(ctx, -time.Hour); err != nil || len(gone) != 3 {
		t.Fatalf("Sweep = %v, %v; want all three", gone, err)
	}
	put("d", 4)
	if listed, changed, _, err = r.Changes(ctx, pos2); err != nil || fmt.Sprint(listed, changed) != "[d] [d]" {
		t.Fatalf("Changes after a sweep = %v, %v, %v; want [d] [d]", listed, changed, err)
	}
	// A node written an hour ago by the reader's clock is listed no more.
	clock.Add(31 * time.Minute)
	if listed, _, _, err = r.Changes(ctx, pos2); err != nil || len(listed) != 0 {
		t.Fatalf("Changes past NodeTTL = %v, %v; want nothing listed", listed, err)
	}
}

// TestChangesRefuseWhatTheyCannotFollow: a position Changes cannot follow
// is store.ErrTokenExpired, so the reader reads everything.
func TestChangesRefuseWhatTheyCannotFollow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drift func(t *testing.T, srv *redistest.Server, w *redisstore.Store)
	}{
		{"redis lost its data", func(t *testing.T, srv *redistest.Server, w *redisstore.Store) {
			if _, err := srv.Do("FLUSHALL"); err != nil {
				t.Fatal(err)
			}
			for sec := range int64(5) {
				mustPut(t, w, "a", 10+sec)
			}
		}},
		{"the log is behind the position (failover)", func(t *testing.T, srv *redistest.Server, w *redisstore.Store) {
			if _, err := srv.Do("HINCRBY", redisstore.DefaultPrefix+"{changes}:seq", "n", "-1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"a writer that does not log (an older llmdiag)", func(t *testing.T, srv *redistest.Server, w *redisstore.Store) {
			if _, err := srv.Do("ZADD", redisstore.DefaultPrefix+"nodes", "GT", fmt.Sprint(time.Now().Add(time.Hour).UnixMilli()), "a"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			ctx := context.Background()
			w := redisstore.New(client(t, srv.URL()), redisstore.Options{})
			r := redisstore.New(client(t, srv.URL()), redisstore.Options{})
			mustPut(t, w, "a", 1)
			_, _, pos, err := r.Changes(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := r.Changes(ctx, pos); err != nil {
				t.Fatalf("before the drift: %v", err)
			}
			tc.drift(t, srv, w)
			if _, _, _, err := r.Changes(ctx, pos); !errors.Is(err, store.ErrTokenExpired) {
				t.Fatalf("Changes = %v; want ErrTokenExpired", err)
			}
		})
	}
	r := redisstore.New(client(t, redistest.Start(t).URL()), redisstore.Options{})
	for _, bad := range []string{"x", "x:1", "x:y:1", ":1:1"} {
		if _, _, _, err := r.Changes(context.Background(), bad); !errors.Is(err, store.ErrTokenExpired) {
			t.Errorf("Changes(%q) = %v; want ErrTokenExpired", bad, err)
		}
	}
}

func mustPut(t *testing.T, s *redisstore.Store, id string, sec int64) {
	t.Helper()
	if err := s.Put(context.Background(), observed(id, sec), diagnose.Point{At: time.Unix(sec, 0)}); err != nil {
		t.Fatal(err)
	}
}

// TestPruneForgetsLoggedNodes: the index prune that runs when no leader
// sweeps takes expired nodes out of the write log too.
func TestPruneForgetsLoggedNodes(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv.URL())
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	s := redisstore.New(rdb, redisstore.Options{NodeTTL: time.Minute, Now: clock.Now})
	mustPut(t, s, "a", 1)
	mustPut(t, s, "b", 1)
	clock.Add(2 * time.Minute) // past the keys' TTL by the index's clock
	mustPut(t, s, "b", 2)
	for key, want := range map[string][]string{"nodes": {"b"}, "{changes}:log": {"b"}} {
		got, err := rdb.ZRange(ctx, redisstore.DefaultPrefix+key, 0, -1).Result()
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s = %v, %v; want %v", key, got, err, want)
		}
	}
}
