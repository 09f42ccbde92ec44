package prom

import (
	"fmt"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
)

// PlannedQuery is one instant query a refresh sends, as Plan lists it.
type PlannedQuery struct {
	// Expr is the PromQL sent.
	Expr   string
	Engine llmdiagv1.Engine
	// Shape says what the answer holds, per node: "identity" (per node,
	// replica and rank, the last scrape time), "value" (one value),
	// "replicas" (one per replica), "info" (one per replica, the info
	// labels' product), "ranked" (one per replica and rank), "buckets" (one
	// per le), "sum", "count" (a histogram's), "created" (when the
	// node's counters started) or "role" (per node, the values of the
	// labels that say its role; for every engine).
	Shape string
	// Concept is what the query reads; zero for identity and created.
	Concept engine.Concept
}

// Plan lists the queries a Source made of cfg sends in a refresh over
// window (a metrics.ParseWindow string) when every engine of engines has
// nodes: per engine its identity query, then its data queries; then the
// one role query (Engine unspecified, Shape "role"). It is for
// what stands in for Prometheus (tests, benchmarks) and must answer each.
func Plan(cfg Config, window string, engines ...llmdiagv1.Engine) ([]PlannedQuery, error) {
	cfg.defaults()
	dur, lifetime, err := metrics.ParseWindow(window)
	if err != nil {
		return nil, err
	}
	b := (&Source{cfg: cfg}).builder(dur, lifetime)
	var out []PlannedQuery
	for _, e := range engines {
		m, ok := engine.Lookup(e)
		if !ok {
			return nil, fmt.Errorf("engine %s: no mapping", e)
		}
		id, err := b.identity(m)
		if err != nil {
			return nil, fmt.Errorf("identity of %s: %w", e, err)
		}
		data, err := b.data(m)
		if err != nil {
			return nil, fmt.Errorf("data of %s: %w", e, err)
		}
		for _, q := range append([]query{id}, data...) {
			out = append(out, PlannedQuery{Expr: q.expr, Engine: q.engine, Shape: q.shape.String(), Concept: q.concept})
		}
	}
	if len(engines) > 0 {
		q, err := b.role()
		if err != nil {
			return nil, fmt.Errorf("role: %w", err)
		}
		out = append(out, PlannedQuery{Expr: q.expr, Engine: q.engine, Shape: q.shape.String()})
	}
	return out, nil
}
