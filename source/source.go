package source

import (
	"context"
	"errors"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// ErrUnknownNode is returned (wrapped) for a node the source does not know.
var ErrUnknownNode = errors.New("unknown node")

// Observation is one node's state after a refresh.
type Observation struct {
	// Node is what is known of the node: id, URL, model, engine, profile and
	// labels (from the fleet file, or discovered by the source).
	Node fleet.Node
	// Engine is the engine the metrics were read as.
	Engine llmdiagv1.Engine
	// Sample carries the gauges and the deployment degrees seen; nil when
	// the source has none.
	Sample *sample.Sample
	// Metrics are the node's indicators over the refresh's window; nil when
	// the node has never been read.
	Metrics *llmdiagv1.NodeMetrics
}

// Source reads the indicators of a fleet.
type Source interface {
	// Refresh reads every node anew and returns one Observation per node
	// over window (a metrics.ParseWindow string).
	Refresh(ctx context.Context, window string) ([]Observation, error)
	// Window returns one node's indicators over window, ending offset ago.
	// An unknown node is an error wrapping ErrUnknownNode. A source whose
	// reads cost backend queries charges them to the Budget in ctx and
	// refuses, wrapping ErrOverBudget, what would go past it.
	Window(ctx context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error)
}
