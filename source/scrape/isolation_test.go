package scrape_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/scrape"
)

const goodBody = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n"

// fakeNet answers each host as its name says: "good…" at once with a
// gauge, "hang…" never (until the request's context ends), "fail…" with
// HTTP 500, "stall…" with headers and then a body that never comes. It
// counts calls and the bodies being read at once, in all and of "stall…".
type fakeNet struct {
	mu                      sync.Mutex
	calls                   map[string]int
	times                   map[string][]time.Time // when each call came
	reading, stalling       int
	peakReading, peakStalls int
	ended                   int // hanging round trips that have returned
}

func newFakeNet() *fakeNet { return &fakeNet{calls: map[string]int{}, times: map[string][]time.Time{}} }

func (f *fakeNet) RoundTrip(r *http.Request) (*http.Response, error) {
	host := r.URL.Hostname()
	f.mu.Lock()
	f.calls[host]++
	f.times[host] = append(f.times[host], time.Now())
	f.mu.Unlock()
	answer := func(code int, body io.ReadCloser) *http.Response {
		return &http.Response{StatusCode: code, Status: fmt.Sprint(code, " ", http.StatusText(code)), Body: body, Header: http.Header{}, Request: r}
	}
	switch {
	case strings.HasPrefix(host, "good"):
		return answer(http.StatusOK, &countedBody{f: f, r: strings.NewReader(goodBody)}), nil
	case strings.HasPrefix(host, "hang"):
		<-r.Context().Done()
		f.mu.Lock()
		f.ended++
		f.mu.Unlock()
		return nil, r.Context().Err()
	case strings.HasPrefix(host, "fail"):
		return answer(http.StatusInternalServerError, io.NopCloser(strings.NewReader("oops"))), nil
	case strings.HasPrefix(host, "stall"):
		return answer(http.StatusOK, &countedBody{f: f, ctx: r.Context(), stall: true}), nil
	}
	return nil, errors.New("no such host")
}

// countedBody counts itself as being read from its first Read until a Read
// returns an error (EOF included).
type countedBody struct {
	f       *fakeNet
	r       io.Reader
	ctx     context.Context
	stall   bool
	started bool
	over    bool
}

func (b *countedBody) Read(p []byte) (int, error) {
	if b.over {
		return 0, io.EOF
	}
	f := b.f
	if !b.started {
		b.started = true
		f.mu.Lock()
		f.reading++
		f.peakReading = max(f.peakReading, f.reading)
		if b.stall {
			f.stalling++
			f.peakStalls = max(f.peakStalls, f.stalling)
		}
		f.mu.Unlock()
	}
	var n int
	var err error
	if b.stall {
		<-b.ctx.Done()
		err = b.ctx.Err()
	} else {
		n, err = b.r.Read(p)
	}
	if err != nil {
		b.over = true
		f.mu.Lock()
		f.reading--
		if b.stall {
			f.stalling--
		}
		f.mu.Unlock()
	}
	return n, err
}

func (b *countedBody) Close() error { return nil }

func (f *fakeNet) snapshot() (calls map[string]int, peakReading, peakStalls, ended int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(map[string]int, len(f.calls))
	for k, v := range f.calls {
		c[k] = v
	}
	return c, f.peakReading, f.peakStalls, f.ended
}

// callTimes returns when host was called.
func (f *fakeNet) callTimes(host string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.times[host]...)
}

func (f *fakeNet) resetPeaks() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peakReading, f.peakStalls = f.reading, f.stalling
}

func byNode(obs []source.Observation) map[string]*llmdiagv1.NodeMetrics {
	m := make(map[string]*llmdiagv1.NodeMetrics, len(obs))
	for _, o := range obs {
		m[o.Node.ID] = o.Metrics
	}
	return m
}

// drain lets every scrape reach its deadline before the bubble ends, even
// when the test fails early.
func drain(t *testing.T) { t.Cleanup(func() { time.Sleep(2 * time.Hour) }) }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestRefreshDoesNotWaitForAHangingTarget: a refresh ends at its deadline
// with every target reported, the one that hangs with its own error; the
// next refresh does not scrape it again while its scrape runs, and reads
// its timeout once the scrape has ended.
func TestRefreshDoesNotWaitForAHangingTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drain(t)
		fn := newFakeNet()
		targets := []fleet.Node{
			{ID: "good", URL: "http://good/metrics", Engine: "vllm"},
			{ID: "hang", URL: "http://user:secret@hang/metrics", Engine: "vllm"},
			{ID: "fail", URL: "http://fail/metrics", Engine: "vllm"},
		}
		const timeout = 2 * time.Second
		s := scrape.New(targets, &http.Client{Transport: fn}, discard(), time.Now, scrape.Options{Timeout: timeout})

		// A cycle whose deadline comes before the scrape timeout.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		obs, err := s.Refresh(ctx, "5m")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second {
			t.Fatalf("refresh took %v, want the cycle's 1s deadline", took)
		}
		if len(obs) != 3 {
			t.Fatalf("%d observations, want one per target", len(obs))
		}
		by := byNode(obs)
		good := by["good"]
		if !good.GetUp() || len(good.GetErrors()) != 0 || good.GetRunning() != 3 || !good.GetObservedAt().AsTime().Equal(start) {
			t.Fatalf("good target: %v", good)
		}
		wantErr(t, by["hang"], "still running after 1s", "no answer yet")
		wantErr(t, by["fail"], "HTTP 500")

		// At once again: the hanging scrape still runs, so it is not
		// started again; the others are.
		start = time.Now()
		obs, err = s.Refresh(context.Background(), "5m")
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("second refresh took %v; nothing it started hangs", took)
		}
		calls, _, _, _ := fn.snapshot()
		if calls["hang"] != 1 || calls["good"] != 2 || calls["fail"] != 2 {
			t.Fatalf("calls %v; want hang 1, good and fail 2", calls)
		}
		wantErr(t, byNode(obs)["hang"], "still running after 1s")

		// Past the scrape's own deadline, its timeout is recorded and it is
		// scraped again.
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		obs, err = s.Refresh(context.Background(), "5m")
		if err != nil {
			t.Fatal(err)
		}
		if calls, _, _, _ := fn.snapshot(); calls["hang"] != 2 {
			t.Fatalf("hang called %d times, want 2", calls["hang"])
		}
		wantErr(t, byNode(obs)["hang"], "no answer within 2s")
		if g := byNode(obs)["good"]; !g.GetUp() || len(g.GetErrors()) != 0 {
			t.Fatalf("good target beside a hanging one: %v", g)
		}
	})
}

// wantErr fails unless m is down with errors containing every part, and
// no password.
func wantErr(t *testing.T, m *llmdiagv1.NodeMetrics, parts ...string) {
	t.Helper()
	errs := strings.Join(m.GetErrors(), "; ")
	if m == nil || m.GetUp() {
		t.Fatalf("%s: want down, got %v", m.GetNode(), m)
	}
	for _, p := range parts {
		if !strings.Contains(errs, p) {
			t.Fatalf("%s: errors %q lack %q", m.GetNode(), errs, p)
		}
	}
	if strings.Contains(errs, "secret") {
		t.Fatalf("%s: errors show the password: %q", m.GetNode(), errs)
	}
}

// TestStallingTargetsCannotHoldEverySlot: targets that answer headers and
// then stall hold read slots until their deadline; once they have failed,
// they share half the slots, and the targets that answer always find one.
func TestStallingTargetsCannotHoldEverySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drain(t)
		fn := newFakeNet()
		var targets []fleet.Node
		for _, id := range []string{"good0", "good1", "good2", "stall0", "stall1", "stall2", "stall3", "stall4", "stall5", "stall6", "stall7"} {
			targets = append(targets, fleet.Node{ID: id, URL: "http://" + id + "/metrics", Engine: "vllm"})
		}
		s := scrape.New(targets, &http.Client{Transport: fn}, discard(), time.Now, scrape.Options{Timeout: time.Second, Concurrency: 4})
		// A refresh knows a stalling target once one of its scrapes has held
		// a slot until its deadline: the first four take every slot at
		// once; in each refresh after, at least two of those not yet known
		// get the slots the known ones leave. By the fourth refresh all
		// eight are known.
		// Refreshes come every 2s, twice the scrape timeout.
		interval := func() { time.Sleep(time.Second); synctest.Wait() }
		for range 3 {
			if _, err := s.Refresh(context.Background(), "5m"); err != nil {
				t.Fatal(err)
			}
			interval()
		}
		for cycle := 4; cycle <= 6; cycle++ {
			fn.resetPeaks()
			obs, err := s.Refresh(context.Background(), "5m")
			if err != nil {
				t.Fatal(err)
			}
			interval()
			by := byNode(obs)
			for _, id := range []string{"good0", "good1", "good2"} {
				if m := by[id]; !m.GetUp() || len(m.GetErrors()) != 0 || m.GetRunning() != 3 {
					t.Fatalf("cycle %d: %s beside stalling targets: %v", cycle, id, m)
				}
			}
			for _, id := range []string{"stall0", "stall7"} {
				if errs := strings.Join(by[id].GetErrors(), "; "); errs == "" {
					t.Fatalf("cycle %d: %s has no error", cycle, id)
				}
			}
			_, peak, stalls, _ := fn.snapshot()
			if peak > 4 || stalls > 2 {
				t.Fatalf("cycle %d: %d bodies read at once, %d of them stalling; want at most 4 and 2", cycle, peak, stalls)
			}
		}
		// Those that found no slot say which limit refused them (read from
		// the ring once every scrape has ended: the refresh ends at the
		// instant they do, and may be first).
		if _, err := s.Refresh(context.Background(), "5m"); err != nil {
			t.Fatal(err)
		}
		interval()
		var limited int
		for _, tg := range targets {
			m, err := s.Window(context.Background(), tg.ID, "5m", 0)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(strings.Join(m.GetErrors(), ";"), "at most 4 answers are read at once, 2 of them from targets whose last scrape ran out of time") {
				limited++
			}
		}
		// Two stalling targets read at once, the others wait; a slot freed
		// at the very instant a waiter's time runs out may go either way.
		if limited < 1 || limited > 6 {
			t.Fatalf("%d stalling targets refused a slot naming the limit, want 1 to 8-2 = 6", limited)
		}
	})
}

// TestRefreshCancelledStopsItsScrapes: a refresh whose context is
// cancelled (not past its deadline: shut down) fails and stops what it
// started.
func TestRefreshCancelledStopsItsScrapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drain(t)
		fn := newFakeNet()
		s := scrape.New([]fleet.Node{{ID: "hang", URL: "http://hang/metrics"}}, &http.Client{Transport: fn}, discard(), time.Now, scrape.Options{Timeout: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancel() }()
		start := time.Now()
		if _, err := s.Refresh(ctx, "5m"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled refresh: %v", err)
		}
		synctest.Wait()
		if _, _, _, ended := fn.snapshot(); ended != 1 || time.Since(start) != time.Second {
			t.Fatalf("%d hanging scrapes ended after %v; want 1 at the cancellation", ended, time.Since(start))
		}
	})
}
