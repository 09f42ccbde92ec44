package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/fanout"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// start runs a hub over a fresh memory store until the test ends.
func start(t *testing.T, feedLen int, opts fanout.Options) (*memory.Store, *fanout.Hub, context.CancelFunc) {
	t.Helper()
	st := memory.New(memory.Options{FeedLen: feedLen}, "t")
	if opts.Wait == 0 {
		opts.Wait = 100 * time.Millisecond
	}
	h := fanout.New(st, opts)
	ctx, cancel := context.WithCancel(context.Background())
	go h.Run(ctx)
	t.Cleanup(func() {
		cancel()
		<-h.Done()
	})
	return st, h, cancel
}

func health(node string, status llmdiagv1.Status, score float64) *llmdiagv1.NodeHealth {
	return &llmdiagv1.NodeHealth{Node: node, Model: "m", Status: status, LoadScore: score}
}

func publish(t *testing.T, st store.Store, h *llmdiagv1.NodeHealth) store.Event {
	t.Helper()
	ev, err := st.Publish(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func syncSub(t *testing.T, h *fanout.Hub, o fanout.SubOptions) (*fanout.Sub, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, pos, _, err := h.Sync(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, pos
}

// next returns the next change, skipping heartbeats, within a deadline.
func next(t *testing.T, s *fanout.Sub) fanout.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		m, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if m.Kind == fanout.Change {
			return m
		}
	}
}

// A subscriber that never reads delays no other and holds at most one state
// per selected node (pure coalescing) or Queue plus that (the default); when
// it reads again it gets every node's latest state, once.
func TestSlowSubscriberIsBoundedAndDelaysNoOne(t *testing.T) {
	for _, queue := range []int{-1, 0, 8} {
		t.Run(fmt.Sprintf("queue=%d", queue), func(t *testing.T) {
			st, h, _ := start(t, 1<<16, fanout.Options{})
			const nodes, events = 10, 20000
			slow, _ := syncSub(t, h, fanout.SubOptions{Queue: queue, Heartbeat: time.Hour})
			fast, _ := syncSub(t, h, fanout.SubOptions{Queue: queue, Heartbeat: time.Hour})

			var wg sync.WaitGroup
			got := map[string]*llmdiagv1.NodeHealth{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				final := func() bool {
					for i := range nodes {
						if got[fmt.Sprintf("n%d", i)].GetLoadScore() != float64(events-nodes+i) {
							return false
						}
					}
					return true
				}
				for !final() {
					m := next(t, fast)
					got[m.Health.GetNode()] = m.Health
				}
			}()
			start := time.Now()
			for i := range events {
				publish(t, st, health(fmt.Sprintf("n%d", i%nodes), llmdiagv1.Status(1+i%3), float64(i)))
			}
			wg.Wait()
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("fast subscriber took %v with a stuck one beside it", d)
			}
			bound := nodes
			if queue >= 0 {
				bound += max(queue, fanout.DefaultQueue*boolInt(queue == 0))
			}
			pending, peak := slow.Pending()
			if peak > bound || pending > bound {
				t.Fatalf("stuck subscriber holds %d (peak %d) states; bound %d", pending, peak, bound)
			}
			// The stuck subscriber, reading now, ends with every node's last state.
			last := map[string]float64{}
			for pending, _ = slow.Pending(); pending > 0; pending, _ = slow.Pending() {
				m := next(t, slow)
				if s, ok := last[m.Health.GetNode()]; ok && m.Health.GetLoadScore() <= s {
					t.Fatalf("node %s went back from score %v to %v", m.Health.GetNode(), s, m.Health.GetLoadScore())
				}
				last[m.Health.GetNode()] = m.Health.GetLoadScore()
			}
			for i := range nodes {
				if want := float64(events - nodes + i); last[fmt.Sprintf("n%d", i)] != want {
					t.Fatalf("n%d: latest score %v, want %v", i, last[fmt.Sprintf("n%d", i)], want)
				}
			}
			if st := h.Stats(); st.Coalesced == 0 || st.Events != events {
				t.Fatalf("stats %+v: want %d events and some coalesced", st, events)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Selectors and min_score_change: a score-only move is handed out once it is
// at least the minimum away from the score last handed out; a status change
// always is.
func TestMinScoreChange(t *testing.T) {
	st, h, _ := start(t, 0, fanout.Options{})
	s, _ := syncSub(t, h, fanout.SubOptions{
		MinScoreChange: 0.2,
		Match:          func(h *llmdiagv1.NodeHealth) bool { return h.GetNode() == "a" },
	})
	ok, warn := llmdiagv1.Status_STATUS_OK, llmdiagv1.Status_STATUS_WARN
	for _, e := range []*llmdiagv1.NodeHealth{
		health("a", ok, 0.10),   // first: sent
		health("b", warn, 0),    // not selected
		health("a", ok, 0.15),   // +0.05 from 0.10: not sent
		health("a", ok, 0.25),   // +0.15: not sent
		health("a", ok, 0.35),   // +0.25: sent
		health("a", ok, 0.35),   // same: not sent
		health("a", warn, 0.36), // status: sent
	} {
		publish(t, st, e)
	}
	var got []string
	for len(got) < 3 {
		m := next(t, s)
		got = append(got, fmt.Sprintf("%s/%v/%.2f", m.Health.GetNode(), m.Health.GetStatus(), m.Health.GetLoadScore()))
	}
	want := "[a/STATUS_OK/0.10 a/STATUS_OK/0.35 a/STATUS_WARN/0.36]"
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}

// Resuming with the token of any message handed out, after any burst of
// events and any amount of coalescing, gives no gap and repeats nothing: per
// node, the states seen across all connections are a strictly increasing
// subsequence of those published, ending with the last one.
func TestResumeIsExactUnderCoalescing(t *testing.T) {
	st, h, _ := start(t, 1<<16, fanout.Options{})
	for trial := range 40 {
		rng := rand.New(rand.NewPCG(uint64(trial), 7))
		nodes := 1 + rng.IntN(6)
		queue := []int{-1, 1, 3, 64}[rng.IntN(4)]
		o := fanout.SubOptions{Queue: queue, Heartbeat: time.Second}
		seq := 0 // scores are publication order, so states are comparable
		pub := func(n int) {
			for range n {
				seq++
				node := fmt.Sprintf("t%d-n%d", trial, rng.IntN(nodes))
				publish(t, st, health(node, llmdiagv1.Status(1+rng.IntN(4)), float64(seq)))
			}
		}
		o.Match = func(h *llmdiagv1.NodeHealth) bool {
			return len(h.GetNode()) > 0 && h.GetNode()[:len(fmt.Sprintf("t%d-", trial))] == fmt.Sprintf("t%d-", trial)
		}
		sub, token := syncSub(t, h, o)
		lastPub := map[string]float64{}
		seen := map[string]float64{}
		for round := range 6 {
			pub(rng.IntN(30))
			// Read a random number of messages, then drop the connection.
			reads := rng.IntN(20)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			for range reads {
				m, err := sub.Next(ctx)
				if err != nil {
					break // nothing more pending within the deadline
				}
				if m.Kind == fanout.Change {
					n, s := m.Health.GetNode(), m.Health.GetLoadScore()
					if prev, ok := seen[n]; ok && s <= prev {
						t.Fatalf("trial %d round %d: %s seen again or backwards: %v after %v (queue %d)", trial, round, n, s, prev, queue)
					}
					seen[n] = s
				}
				token = m.Token
			}
			cancel()
			sub.Close()
			pub(rng.IntN(10)) // while disconnected
			var err error
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			sub, err = h.Resume(rctx, token, o)
			rcancel()
			if err != nil {
				t.Fatalf("trial %d: resume from %q: %v", trial, token, err)
			}
		}
		// Drain: every node ends at its last published state.
		for _, ev := range mustEvents(t, st) {
			if o.Match(ev.Health) {
				lastPub[ev.Health.GetNode()] = ev.Health.GetLoadScore()
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for !sameScores(seen, lastPub) {
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: seen %v, last published %v", trial, seen, lastPub)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			m, err := sub.Next(ctx)
			cancel()
			if err == nil && m.Kind == fanout.Change {
				n, s := m.Health.GetNode(), m.Health.GetLoadScore()
				if prev, ok := seen[n]; ok && s <= prev {
					t.Fatalf("trial %d drain: %s seen again or backwards: %v after %v", trial, n, s, prev)
				}
				seen[n] = s
			}
		}
		sub.Close()
	}
}

func sameScores(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func mustEvents(t *testing.T, st store.Store) []store.Event {
	t.Helper()
	var all []store.Event
	tok := ""
	for {
		evs, err := st.Events(context.Background(), tok, 1024, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return all
		}
		all = append(all, evs...)
		tok = evs[len(evs)-1].Token
	}
}

// A token the feed no longer holds is expired: the caller resyncs.
func TestResumeExpiredToken(t *testing.T) {
	st, h, _ := start(t, 4, fanout.Options{Ring: 2})
	first := publish(t, st, health("a", 1, 0))
	for i := range 10 {
		publish(t, st, health("a", 1, float64(i+1)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.Resume(ctx, first.Token, fanout.SubOptions{}); !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("resume from a trimmed token: %v, want ErrTokenExpired", err)
	}
	if _, err := h.Resume(ctx, "garbage", fanout.SubOptions{}); !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("resume from garbage: %v, want ErrTokenExpired", err)
	}
}

// Heartbeats come after the interval with nothing handed out, carrying the
// position of everything offered (selected or not); a change resets them.
func TestHeartbeatTiming(t *testing.T) {
	clk := newFakeClock()
	st, h, _ := start(t, 0, fanout.Options{Clock: clk})
	s, pos := syncSub(t, h, fanout.SubOptions{Heartbeat: 10 * time.Second, Match: func(h *llmdiagv1.NodeHealth) bool { return h.GetNode() == "a" }})
	msgs := make(chan fanout.Message, 10)
	go func() {
		for {
			m, err := s.Next(context.Background())
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	expectNone := func() {
		t.Helper()
		select {
		case m := <-msgs:
			t.Fatalf("unexpected %+v", m)
		case <-time.After(50 * time.Millisecond):
		}
	}
	expect := func(kind fanout.Kind, token string) {
		t.Helper()
		select {
		case m := <-msgs:
			if m.Kind != kind || m.Token != token {
				t.Fatalf("got kind %v token %q, want %v %q", m.Kind, m.Token, kind, token)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no message; want kind %v", kind)
		}
	}
	clk.WaitArmed(t, 1)
	clk.Add(9 * time.Second)
	expectNone()
	clk.Add(time.Second)
	expect(fanout.Heartbeat, pos)
	other := publish(t, st, health("b", 1, 0)) // not selected: only moves the token
	waitRead(t, h, 1)
	clk.WaitArmed(t, 1)
	clk.Add(10 * time.Second)
	expect(fanout.Heartbeat, other.Token)
	clk.WaitArmed(t, 1)
	clk.Add(5 * time.Second)
	ev := publish(t, st, health("a", 1, 0))
	waitRead(t, h, 2)
	expect(fanout.Change, ev.Token)
	clk.WaitArmed(t, 1)
	clk.Add(9 * time.Second) // 14s after the last heartbeat, 9s after the change
	expectNone()
	clk.Add(time.Second)
	expect(fanout.Heartbeat, ev.Token)
}

// TryNext hands out what is pending now, in order, and never waits or
// hands out a heartbeat, however long the subscriber was idle; what it
// hands out counts as sent (the heartbeat and the resume position).
func TestTryNext(t *testing.T) {
	clk := newFakeClock()
	st, h, _ := start(t, 0, fanout.Options{Clock: clk})
	s, _ := syncSub(t, h, fanout.SubOptions{Heartbeat: 10 * time.Second})
	clk.Add(time.Minute)
	if m, ok := s.TryNext(); ok {
		t.Fatalf("TryNext with nothing pending gave %+v", m)
	}
	a := publish(t, st, health("a", 1, 0))
	b := publish(t, st, health("b", 1, 0))
	waitRead(t, h, 2)
	for _, want := range []store.Event{a, b} {
		m, ok := s.TryNext()
		if !ok || m.Kind != fanout.Change || m.Token != want.Token || m.Health.GetNode() != want.Health.GetNode() {
			t.Fatalf("TryNext gave %+v, %v; want the change of %s", m, ok, want.Health.GetNode())
		}
	}
	if m, ok := s.TryNext(); ok {
		t.Fatalf("TryNext after the pending changes gave %+v", m)
	}
	// The last change handed out is the last sent: Next waits an interval
	// after it (arming its timer) for a heartbeat with its token.
	msgs := make(chan fanout.Message, 1)
	go func() {
		if m, err := s.Next(context.Background()); err == nil {
			msgs <- m
		}
	}()
	clk.WaitArmed(t, 1)
	clk.Add(10 * time.Second)
	select {
	case m := <-msgs:
		if m.Kind != fanout.Heartbeat || m.Token != b.Token {
			t.Fatalf("after TryNext, Next gave %+v; want a heartbeat with %q", m, b.Token)
		}
	case <-time.After(time.Minute):
		t.Fatal("no heartbeat an interval after the last change handed out")
	}
}

// waitRead waits until the hub has read n events.
func waitRead(t *testing.T, h *fanout.Hub, n uint64) {
	t.Helper()
	testkit.Wait{For: time.Minute, Every: time.Millisecond}.Until(t, fmt.Sprintf("the hub to read %d events", n), func() bool { return h.Stats().Events >= n })
}

// Stopping the hub ends every subscriber at once.
func TestStopEndsEverySubscriber(t *testing.T) {
	_, h, cancel := start(t, 0, fanout.Options{})
	const n = 200
	ended := make(chan error, n)
	for range n {
		s, _ := syncSub(t, h, fanout.SubOptions{Heartbeat: time.Hour})
		go func() {
			_, err := s.Next(context.Background())
			ended <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	cancel()
	for range n {
		select {
		case err := <-ended:
			if !errors.Is(err, fanout.ErrClosed) {
				t.Fatalf("Next after stop: %v, want ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("a subscriber did not end")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("ending %d subscribers took %v", n, d)
	}
	if _, _, _, err := h.Sync(context.Background(), fanout.SubOptions{}); !errors.Is(err, fanout.ErrClosed) {
		t.Fatalf("Sync after stop: %v", err)
	}
}

// A feed that does not answer at first gives Sync its error; the hub keeps
// trying and serves once it answers.
func TestFeedOutage(t *testing.T) {
	st := memory.New(memory.Options{}, "o")
	f := &flakyFeed{Store: st}
	f.down.Store(true)
	h := fanout.New(f, fanout.Options{Wait: 50 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-h.Done() }()
	go h.Run(ctx)
	if _, _, _, err := h.Sync(ctx, fanout.SubOptions{}); err == nil {
		t.Fatal("Sync with the feed down succeeded")
	}
	f.down.Store(false)
	var s *fanout.Sub
	var err error
	testkit.Wait{For: time.Minute, Every: 5 * time.Millisecond, Last: func() string { return fmt.Sprint(err) }}.Until(t, "Sync once the feed answers", func() bool {
		s, _, _, err = h.Sync(ctx, fanout.SubOptions{})
		return err == nil
	})
	defer s.Close()
	f.down.Store(true)
	publish(t, st, health("a", 2, 0)) // written while the hub cannot read
	time.Sleep(30 * time.Millisecond)
	f.down.Store(false)
	if m := next(t, s); m.Health.GetNode() != "a" {
		t.Fatalf("after the outage got %+v", m)
	}
}

// A subscriber that started from a listing newer than the hub's position
// (a replica's copy is written before the event reaches the feed) is not
// handed the older events in between: it never goes back in time, and it
// gets every change after the listing.
func TestSyncedFromANewerListingNeverGoesBack(t *testing.T) {
	st, h, _ := start(t, 0, fanout.Options{})
	ok, crit := llmdiagv1.Status_STATUS_OK, llmdiagv1.Status_STATUS_CRIT
	at := func(s llmdiagv1.Status, sec int64) *llmdiagv1.NodeHealth {
		e := health("a", s, 0)
		e.ObservedAt = timestamppb.New(time.Unix(1_800_000_000+sec, 0))
		return e
	}
	s, _ := syncSub(t, h, fanout.SubOptions{})
	s.MarkSent(at(ok, 7)) // the listing: the state at 7
	for _, e := range []*llmdiagv1.NodeHealth{
		at(crit, 6), // older than the listing: not news
		at(ok, 7),   // the listing itself
		at(crit, 8), // news
	} {
		publish(t, st, e)
	}
	m := next(t, s)
	if m.Health.GetStatus() != crit || m.Health.GetObservedAt().AsTime().Unix() != 1_800_000_008 {
		t.Fatalf("first change %v at %v; want CRIT at +8, nothing older than the listing", m.Health.GetStatus(), m.Health.GetObservedAt().AsTime())
	}
}
