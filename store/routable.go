package store

import (
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
)

// Routability is what a node's latest record says of whether to send it
// traffic: the one rule GET /routable/{node}, the HAProxy agent and the
// Kubernetes readiness gate all read.
type Routability int

const (
	// Unknown: the data cannot say (stale, older than the service's
	// StaleAfter, or a verdict of UNKNOWN); each caller's fail-open rule
	// decides.
	Unknown Routability = iota
	// Routable: fresh data, and the verdict routes to the node.
	Routable
	// NotRoutable: fresh data, and the verdict keeps traffic away.
	NotRoutable
)

// String is the value's name in lower case.
func (r Routability) String() string {
	switch r {
	case Routable:
		return "routable"
	case NotRoutable:
		return "not routable"
	}
	return "unknown"
}

// Decide is rec's routability at now; stale is true when the data is older
// than staleAfter (then the answer is Unknown). A nil record is Unknown.
func Decide(rec *Record, now time.Time, staleAfter time.Duration) (r Routability, stale bool) {
	if rec == nil || rec.Node == nil {
		return Unknown, false
	}
	if _, stale = metrics.Staleness(rec.Metrics.GetObservedAt().AsTime(), now, staleAfter); stale {
		return Unknown, true
	}
	if rec.Node.GetStatus() == llmdiagv1.Status_STATUS_UNKNOWN {
		return Unknown, false
	}
	if rec.Node.GetRoutable() {
		return Routable, false
	}
	return NotRoutable, false
}
