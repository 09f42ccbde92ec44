package loadtest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/loadtest"
)

// call is a call of latency lat(i) on a clock that only calls move: it
// moves clk on by its latency, so at concurrency 1 every latency is exact.
func call(clk *testkit.Clock, lat func(i int) time.Duration) func(context.Context, int, int) error {
	return func(_ context.Context, _, i int) error {
		clk.Add(lat(i))
		return nil
	}
}

func constant(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

// Rows come per concurrency, then per call, with each figure's median
// over rounds and the p50 ratio to the first call.
func TestRowsAndRatios(t *testing.T) {
	clk := testkit.NewClock(time.Unix(0, 0))
	// tail is 2 ms, and 20 ms for one call in ten: p50 and p90 2 ms, p99 20 ms.
	tail := func(i int) time.Duration {
		if i%10 == 9 {
			return 20 * time.Millisecond
		}
		return 2 * time.Millisecond
	}
	res, err := loadtest.Run(context.Background(), loadtest.Config{Concurrency: []int{1}, Calls: 100, Rounds: 3, Warmup: 10, Now: clk.Now}, []loadtest.Call{
		{Name: "floor", Do: call(clk, constant(time.Millisecond))},
		{Name: "double", Do: call(clk, constant(2*time.Millisecond))},
		{Name: "tail", Do: call(clk, tail)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []loadtest.Row{
		{Call: "floor", Concurrency: 1, P50: time.Millisecond, P90: time.Millisecond, P99: time.Millisecond, PerSecond: 1000, Ratio: 1},
		{Call: "double", Concurrency: 1, P50: 2 * time.Millisecond, P90: 2 * time.Millisecond, P99: 2 * time.Millisecond, PerSecond: 500, Ratio: 2},
		// 90 calls of 2 ms and 10 of 20 ms: 0.38 s, 263 calls a second.
		{Call: "tail", Concurrency: 1, P50: 2 * time.Millisecond, P90: 2 * time.Millisecond, P99: 20 * time.Millisecond, PerSecond: 100 / 0.38, Ratio: 2},
	}
	if res.Rounds != 3 || len(res.Rows) != len(want) {
		t.Fatalf("%d rounds, %d rows: %+v", res.Rounds, len(res.Rows), res.Rows)
	}
	for i, w := range want {
		g := res.Rows[i]
		if g.Call != w.Call || g.Concurrency != w.Concurrency || g.P50 != w.P50 || g.P90 != w.P90 || g.P99 != w.P99 || !near(g.PerSecond, w.PerSecond) || !near(g.Ratio, w.Ratio) {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}
}

func near(a, b float64) bool { return a > b*0.999 && a < b*1.001 }

// Each measurement runs the kinds one after the other within each
// concurrency, round after round, after a warm-up of each kind at the
// highest concurrency; every kind is called exactly as often as asked, from
// no more workers than the concurrency.
func TestScheduleAndCounts(t *testing.T) {
	var mu sync.Mutex
	var order []string
	calls := map[string]*atomic.Int64{}
	call := func(name string) loadtest.Call {
		calls[name] = &atomic.Int64{}
		return loadtest.Call{Name: name, Do: func(_ context.Context, w, i int) error {
			calls[name].Add(1)
			if i == 0 {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
			}
			if w < 0 || w >= 4 {
				return errors.New("worker out of range")
			}
			return nil
		}}
	}
	cfg := loadtest.Config{Concurrency: []int{1, 4}, Calls: 50, Rounds: 2, Warmup: 7}
	res, err := loadtest.Run(context.Background(), cfg, []loadtest.Call{call("h"), call("m"), call("d")})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(order, " ")
	want := "h m d " + strings.Repeat("h m d h m d ", 2)
	if got != strings.TrimSpace(want) {
		t.Fatalf("order %q, want %q", got, strings.TrimSpace(want))
	}
	for name, n := range calls {
		if want := int64(7 + 2*2*50); n.Load() != want {
			t.Errorf("%s called %d times, want %d", name, n.Load(), want)
		}
	}
	if len(res.Rows) != 6 || res.Rows[3].Call != "h" || res.Rows[3].Concurrency != 4 {
		t.Fatalf("rows %+v", res.Rows)
	}
}

var errBoom = errors.New("boom")

// A failing call ends the run with its error, naming the kind and the
// concurrency; so does a call past its timeout.
func TestCallErrorsEndTheRun(t *testing.T) {
	tests := []struct {
		name string
		cfg  loadtest.Config
		do   func(ctx context.Context, w, i int) error
		want error
		says string
	}{
		{"error", loadtest.Config{Concurrency: []int{3}, Calls: 20, Warmup: -1}, func(_ context.Context, _, i int) error {
			if i == 5 {
				return errBoom
			}
			return nil
		}, errBoom, "slow (concurrency 3): boom"},
		{"timeout", loadtest.Config{Concurrency: []int{2}, Calls: 20, Timeout: 20 * time.Millisecond, Warmup: -1}, func(ctx context.Context, _, _ int) error {
			<-ctx.Done() // a service that never answers
			return ctx.Err()
		}, context.DeadlineExceeded, "slow (concurrency 2)"},
		{"in warm-up", loadtest.Config{Calls: 20}, func(context.Context, int, int) error { return errBoom }, errBoom, "warm-up: slow (concurrency 8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadtest.Run(context.Background(), tt.cfg, []loadtest.Call{
				{Name: "floor", Do: func(context.Context, int, int) error { return nil }},
				{Name: "slow", Do: tt.do},
			})
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("err %v, want %v saying %q", err, tt.want, tt.says)
			}
		})
	}
}

// The run stops by itself at Duration: with the rounds finished by then,
// or with ErrNoRound when none did.
func TestDurationBoundsTheRun(t *testing.T) {
	var made atomic.Int64
	// Answers the warm-up and the first round (2 kinds × 10 calls), then
	// hangs until the call's context ends.
	hangAfter := func(n int64) func(context.Context, int, int) error {
		return func(ctx context.Context, _, _ int) error {
			if made.Add(1) > n {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
	}
	cfg := loadtest.Config{Concurrency: []int{1}, Calls: 10, Rounds: 3, Warmup: 5, Timeout: time.Hour, Duration: 200 * time.Millisecond}
	res, err := loadtest.Run(context.Background(), cfg, []loadtest.Call{{Name: "a", Do: hangAfter(2*5 + 2*10)}, {Name: "b", Do: hangAfter(2*5 + 2*10)}})
	if err != nil || res.Rounds != 1 || len(res.Rows) != 2 {
		t.Fatalf("Run = %+v, %v; want the first round alone", res, err)
	}
	made.Store(0)
	_, err = loadtest.Run(context.Background(), cfg, []loadtest.Call{{Name: "a", Do: hangAfter(3)}})
	if !errors.Is(err, loadtest.ErrNoRound) {
		t.Fatalf("Run with no round finished: %v, want ErrNoRound", err)
	}
}

// A caller that cancels gets its context's error, not a partial result.
func TestCancelIsNotAResult(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, err := loadtest.Run(ctx, loadtest.Config{Concurrency: []int{1}, Calls: 10, Warmup: -1}, []loadtest.Call{{Name: "a", Do: func(ctx context.Context, _, i int) error {
		if i == 3 {
			cancel()
		}
		return ctx.Err()
	}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		cfg  loadtest.Config
		says string
	}{
		{loadtest.Config{Concurrency: []int{1, 0}}, "concurrency 0"},
		{loadtest.Config{Calls: -1}, "calls -1"},
		{loadtest.Config{Rounds: -2}, "rounds -2"},
		{loadtest.Config{Timeout: -time.Second}, "timeout -1s"},
		{loadtest.Config{Duration: -time.Second}, "duration -1s"},
	}
	for _, tt := range tests {
		if err := tt.cfg.Check(); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Check(%+v) = %v, want %q", tt.cfg, err, tt.says)
		}
	}
	if err := (loadtest.Config{}).Check(); err != nil {
		t.Errorf("the zero Config: %v", err)
	}
}
