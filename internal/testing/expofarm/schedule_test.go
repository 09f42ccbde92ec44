package expofarm

import (
	"strings"
	"testing"
	"time"
)

func TestSteps(t *testing.T) {
	low, high := Gauges{Running: 1}, Gauges{Waiting: 9, Running: 2, KVUsage: 0.5}
	s := Steps{Period: 4 * time.Second, Stagger: time.Second, Low: low, High: high}
	epoch := time.Unix(0, 0)
	sec := func(f float64) time.Time { return epoch.Add(time.Duration(f * float64(time.Second))) }
	for _, tc := range []struct {
		node int
		at   time.Time
		want Gauges
		last time.Time
	}{
		{0, sec(0), high, sec(0)},
		{0, sec(0.5), high, sec(0)},
		{0, sec(1.999), high, sec(0)},
		{0, sec(2), low, sec(2)},
		{0, sec(3.5), low, sec(2)},
		{0, sec(4.25), high, sec(4)},
		{0, sec(-0.5), low, sec(-2)},
		{1, sec(0.5), low, sec(-1)}, // node 1's periods start at 1 s (mod 4 s)
		{1, sec(1.2), high, sec(1)},
		{1, sec(3.2), low, sec(3)},
		{5, sec(1.2), high, sec(1)}, // 5 s of stagger is 1 s mod the period
		{4, sec(0.1), high, sec(0)},
	} {
		if got := s.Gauges(tc.node, tc.at); got != tc.want {
			t.Errorf("node %d at %v: %+v, want %+v", tc.node, tc.at.Sub(epoch), got, tc.want)
		}
		if got := s.LastChange(tc.node, tc.at); !got.Equal(tc.last) {
			t.Errorf("node %d at %v: last change at %v, want %v", tc.node, tc.at.Sub(epoch), got.Sub(epoch), tc.last.Sub(epoch))
		}
	}
}

func TestStepsValidate(t *testing.T) {
	ok := DefaultSteps(1000)
	if err := ok.Validate(); err != nil {
		t.Fatalf("DefaultSteps: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Steps)
		want string
	}{
		{"period too short", func(s *Steps) { s.Period = time.Millisecond }, "period 1ms"},
		{"period too long", func(s *Steps) { s.Period = 2 * time.Hour }, "period 2h0m0s"},
		{"negative stagger", func(s *Steps) { s.Stagger = -1 }, "stagger"},
		{"negative waiting", func(s *Steps) { s.Low.Waiting = -1 }, "low: waiting -1"},
		{"running too high", func(s *Steps) { s.High.Running = maxRequests + 1 }, "high: running"},
		{"kv above 1", func(s *Steps) { s.High.KVUsage = 1.5 }, "high: kv_usage 1.5"},
		{"kv NaN", func(s *Steps) { s.Low.KVUsage = nan() }, "low: kv_usage NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}
