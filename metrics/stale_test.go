package metrics

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

func TestStaleness(t *testing.T) {
	now := time.Unix(1_000, 0)
	for _, c := range []struct {
		name      string
		observed  time.Time
		wantAge   time.Duration
		wantStale bool
	}{
		{"fresh", now.Add(-10 * time.Second), 10 * time.Second, false},
		{"at the limit", now.Add(-30 * time.Second), 30 * time.Second, false},
		{"past the limit", now.Add(-30*time.Second - time.Millisecond), 30*time.Second + time.Millisecond, true},
		{"from the future", now.Add(time.Second), 0, false},
	} {
		age, stale := Staleness(c.observed, now, 30*time.Second)
		if age != c.wantAge || stale != c.wantStale {
			t.Errorf("%s: Staleness = %v, %v; want %v, %v", c.name, age, stale, c.wantAge, c.wantStale)
		}
	}
}

func TestStale(t *testing.T) {
	for _, c := range []struct {
		name string
		m    *llmdiagv1.NodeMetrics
		want bool
	}{
		{"nil", nil, false},
		{"fresh", &llmdiagv1.NodeMetrics{Staleness: durationpb.New(time.Second)}, false},
		{"old", &llmdiagv1.NodeMetrics{Staleness: durationpb.New(time.Minute)}, true},
		{"flagged", &llmdiagv1.NodeMetrics{Stale: true, Staleness: durationpb.New(time.Second)}, true},
		{"no staleness", &llmdiagv1.NodeMetrics{}, false},
	} {
		if got := Stale(c.m, 30*time.Second); got != c.want {
			t.Errorf("%s: Stale = %v, want %v", c.name, got, c.want)
		}
	}
}
