package scrape_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/source/scrape"
)

// TestRefreshSpreadsScrapes: with Options.Spread the i-th of n targets (by
// id) is scraped i·Spread/n after the refresh begins, each in the same
// place on every refresh, once it has been read (the first refresh reads
// every target at once); a context deadline too near for the spread
// shortens it so that every target is still scraped in time; a cancelled
// refresh starts no more.
func TestRefreshSpreadsScrapes(t *testing.T) {
	const timeout = 2 * time.Second
	targets := func(n int) []fleet.Node {
		var ts []fleet.Node
		for i := range n {
			ts = append(ts, fleet.Node{ID: fmt.Sprintf("n%d", i), URL: fmt.Sprintf("http://good%d/metrics", i), Engine: "vllm"})
		}
		return ts
	}
	tests := []struct {
		name     string
		spread   time.Duration
		deadline time.Duration // the refresh's context deadline; 0: none
		want     []time.Duration
	}{
		{"no spread", 0, 0, []time.Duration{0, 0, 0, 0}},
		{"spread", 4 * time.Second, 0, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}},
		{"spread cut to the deadline", 4 * time.Second, 3 * time.Second, []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond}},
		{"deadline too near for any", 4 * time.Second, time.Second, []time.Duration{0, 0, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fn := newFakeNet()
				s := scrape.New(targets(4), &http.Client{Transport: fn}, discard(), time.Now, scrape.Options{Timeout: timeout, Spread: tc.spread})
				for round := range 3 {
					want := tc.want
					if round == 0 {
						want = []time.Duration{0, 0, 0, 0} // none read yet
					}
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if tc.deadline > 0 {
						ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					}
					start := time.Now()
					obs, err := s.Refresh(ctx, "5m")
					took := time.Since(start)
					cancel()
					if err != nil {
						t.Fatal(err)
					}
					for i, o := range obs {
						if !o.Metrics.GetUp() || len(o.Metrics.GetErrors()) != 0 {
							t.Fatalf("round %d: %s: %v", round, o.Node.ID, o.Metrics)
						}
						calls := fn.callTimes(fmt.Sprintf("good%d", i))
						if len(calls) != round+1 {
							t.Fatalf("round %d: %s called %d times", round, o.Node.ID, len(calls))
						}
						if got := calls[round].Sub(start); got != want[i] {
							t.Errorf("round %d: %s scraped %v after the refresh began, want %v", round, o.Node.ID, got, want[i])
						}
					}
					// The answers come at once: the refresh ends with the last start.
					if last := want[len(want)-1]; took != last {
						t.Errorf("round %d: refresh took %v, want %v", round, took, last)
					}
				}
			})
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fn := newFakeNet()
			s := scrape.New(targets(4), &http.Client{Transport: fn}, discard(), time.Now, scrape.Options{Timeout: timeout, Spread: 4 * time.Second})
			if _, err := s.Refresh(context.Background(), "5m"); err != nil { // every target read once
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(1500*time.Millisecond, cancel)
			_, err := s.Refresh(ctx, "5m")
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want cancelled", err)
			}
			calls, _, _, _ := fn.snapshot()
			if calls["good0"] != 2 || calls["good1"] != 2 || calls["good2"] != 1 || calls["good3"] != 1 {
				t.Fatalf("calls %v: want the two due before the cancel, and no more", calls)
			}
		})
	})
}
