package combine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/combine"
)

// hanging is a history source whose refreshes answer only what is sent on
// answers (or fail when their ctx is done), counting the refreshes in
// flight.
type hanging struct {
	answers chan fake
	mu      sync.Mutex
	calls   int
	now     int // refreshes in flight
	most    int // the most ever in flight at once
	ctxErrs []error
}

func newHanging() *hanging { return &hanging{answers: make(chan fake, 1)} }

func (h *hanging) Refresh(ctx context.Context, _ string) ([]source.Observation, error) {
	h.mu.Lock()
	h.calls++
	h.now++
	h.most = max(h.most, h.now)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.now--
		h.mu.Unlock()
	}()
	select {
	case a := <-h.answers:
		return a.obs, a.err
	case <-ctx.Done():
		h.mu.Lock()
		h.ctxErrs = append(h.ctxErrs, ctx.Err())
		h.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (h *hanging) Window(context.Context, string, string, time.Duration) (*llmdiagv1.NodeMetrics, error) {
	return nil, source.ErrUnknownNode
}

func (h *hanging) counts() (calls, inFlight, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, h.now, h.most
}

func promAt(rate float64) fake {
	return fake{obs: []source.Observation{obs("a", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(9), Running: sample.F(10), GenerationTokensPerSecond: sample.F(rate)})}}
}

var scraped = fake{obs: []source.Observation{obs("a", t0.Add(time.Second), &llmdiagv1.NodeMetrics{Queue: sample.F(0), Running: sample.F(20)})}}

func warnings(o []source.Observation) string {
	if len(o) != 1 {
		return ""
	}
	return strings.Join(o[0].Metrics.GetWarnings(), "\n")
}

// TestSlowHistory: a History slower than Wait holds the gauges back for
// Wait, no longer; they join History's last answer, with a warning, and an
// answer that came in the background serves the next refresh.
func TestSlowHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 2 * time.Second
		h := newHanging()
		c := combine.New(h, scraped, combine.Options{Wait: wait})
		defer c.Close()
		refresh := func() ([]source.Observation, time.Duration, error) {
			t.Helper()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			start := time.Now()
			got, err := c.Refresh(ctx, "5m")
			return got, time.Since(start), err
		}

		// No answer yet: as if History had failed.
		got, took, err := refresh()
		if err != nil || took != wait || got[0].Metrics.GetQueue() != 0 ||
			!strings.Contains(warnings(got), "history source unavailable, rates and percentiles from direct scrapes: no answer after 2s") {
			t.Fatalf("first refresh took %s: %v, %v", took, got, err)
		}
		h.answers <- promAt(100) // the first History refresh answers, in the background
		synctest.Wait()

		// The next refresh: History hangs again; its last answer stands in.
		time.Sleep(3 * time.Second)                 // the refresh interval, in the bubble's time
		for _, slow := range []string{"2s", "4s"} { // and again: the warning does not pile up
			got, took, err = refresh()
			a := got[0].Metrics
			if err != nil || took != wait || a.GetQueue() != 0 || a.GetRunning() != 20 || a.GetGenerationTokensPerSecond() != 100 || a.GetDecodeTokensPerSecondPerRequest() != 5 ||
				len(a.GetWarnings()) != 1 || !strings.Contains(a.GetWarnings()[0], "history source slow (no answer after "+slow+"), rates and percentiles from its last answer, read at") {
				t.Fatalf("slow refresh took %s: %v, %v", took, a, err)
			}
		}
		h.answers <- promAt(200)
		synctest.Wait()

		// History answers within Wait: exactly what a Combined that waits says.
		h.answers <- promAt(300)
		got, took, err = refresh()
		want, werr := combine.New(promAt(300), scraped, combine.Options{}).Refresh(t.Context(), "5m")
		if err != nil || werr != nil || took != 0 || len(got) != 1 || !proto.Equal(got[0].Metrics, want[0].Metrics) {
			t.Fatalf("fast refresh took %s: %v, %v; want %v", took, got, err, want)
		}
		if calls, _, most := h.counts(); calls != 3 || most != 1 {
			t.Fatalf("history refreshes %d, most at once %d; want 3 (the second joined by the refresh after), 1", calls, most)
		}
	})
}

// TestOneHistoryRefreshInFlight: refreshes that find History's refresh in
// flight join it, one after the other or at once.
func TestOneHistoryRefreshInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHanging()
		c := combine.New(h, scraped, combine.Options{Wait: time.Second})
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		for range 3 {
			if _, err := c.Refresh(ctx, "5m"); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				if _, err := c.Refresh(ctx, "5m"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if calls, now, most := h.counts(); calls != 1 || now != 1 || most != 1 {
			t.Fatalf("history refreshes %d, in flight %d, most at once %d; want 1, 1, 1", calls, now, most)
		}
		h.answers <- promAt(100)
		synctest.Wait()
		h.answers <- promAt(200)
		got, err := c.Refresh(ctx, "5m")
		if err != nil || got[0].Metrics.GetGenerationTokensPerSecond() != 200 {
			t.Fatalf("after the answer: %v, %v", got, err)
		}
		if calls, _, most := h.counts(); calls != 2 || most != 1 {
			t.Fatalf("history refreshes %d, most at once %d; want 2, 1", calls, most)
		}
	})
}

// TestHistoryRefreshIsBounded: the caller's ctx ending returns Refresh at
// once; the History refresh goes on, to its deadline (or Timeout, or
// Close) and no further, and no goroutine outlives it (synctest.Test
// fails on one left blocked).
func TestHistoryRefreshIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // of the refresh's ctx; 0: none
		close    bool          // Close right after Refresh returned
		want     time.Duration // when History's refresh ends, from the start
		wantErr  error         // what its ctx says then
	}{
		{name: "deadline", deadline: 10 * time.Second, want: 10 * time.Second, wantErr: context.DeadlineExceeded},
		{name: "no deadline: Timeout", want: combine.DefaultTimeout, wantErr: context.DeadlineExceeded},
		{name: "closed", deadline: 10 * time.Second, close: true, want: 0, wantErr: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHanging()
				c := combine.New(h, scraped, combine.Options{}) // waits for History until ctx is done
				start := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				if tc.deadline > 0 {
					ctx, cancel = context.WithTimeout(t.Context(), tc.deadline)
				}
				type result struct {
					obs []source.Observation
					err error
				}
				done := make(chan result, 1)
				go func() { o, err := c.Refresh(ctx, "5m"); done <- result{o, err} }()
				synctest.Wait()
				cancel()
				r := <-done
				if r.err != nil || time.Since(start) != 0 || !strings.Contains(warnings(r.obs), "history source unavailable") {
					t.Fatalf("refresh returned after %s: %v, %v; want at once, the gauges alone", time.Since(start), r.obs, r.err)
				}
				if tc.close {
					c.Close()
				}
				for {
					synctest.Wait()
					if _, now, _ := h.counts(); now == 0 {
						break
					}
					time.Sleep(time.Second) // the bubble's time: the History refresh's deadline comes
				}
				h.mu.Lock()
				errs := h.ctxErrs
				h.mu.Unlock()
				if took := time.Since(start); took != tc.want || len(errs) != 1 || !errors.Is(errs[0], tc.wantErr) {
					t.Fatalf("history refresh ended after %s with %v; want %s, %v", took, errs, tc.want, tc.wantErr)
				}
			})
		})
	}
}
