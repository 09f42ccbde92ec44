package metrics

import (
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Staleness is the one staleness rule of llmdiag: data observed at
// observedAt is age old at now (never negative: a clock a little ahead
// counts as fresh), and too old to judge when older than staleAfter.
// Sources, the refresh loop, the server and the verdict rules all ask here.
func Staleness(observedAt, now time.Time, staleAfter time.Duration) (age time.Duration, stale bool) {
	age = max(now.Sub(observedAt), 0)
	return age, TooOld(age, staleAfter)
}

// TooOld reports whether data of age is past staleAfter.
func TooOld(age, staleAfter time.Duration) bool { return age > staleAfter }

// Stale reports whether m is no fresh data: flagged stale by its source, or
// with a staleness past staleAfter.
func Stale(m *llmdiagv1.NodeMetrics, staleAfter time.Duration) bool {
	return m.GetStale() || (m.GetStaleness() != nil && TooOld(m.GetStaleness().AsDuration(), staleAfter))
}
