package combine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
)

// Combined reads history from History and fresh gauges from Gauges.
type Combined struct {
	History source.Source // Prometheus
	Gauges  source.Source // direct scrape
}

// Refresh refreshes both sides concurrently and joins them by node id. One
// side failing as a whole leaves the other's nodes, with the failure in
// their warnings; only both failing fails the refresh.
func (c Combined) Refresh(ctx context.Context, window string) ([]source.Observation, error) {
	var (
		wg           sync.WaitGroup
		hist, gauges []source.Observation
		herr, gerr   error
	)
	wg.Add(2)
	go func() { defer wg.Done(); hist, herr = c.History.Refresh(ctx, window) }()
	go func() { defer wg.Done(); gauges, gerr = c.Gauges.Refresh(ctx, window) }()
	wg.Wait()
	if herr != nil && gerr != nil {
		return nil, fmt.Errorf("both sources failed: %w; %w", herr, gerr)
	}
	scraped := make(map[string]source.Observation, len(gauges))
	for _, o := range gauges {
		if o.Metrics != nil {
			scraped[o.Node.ID] = o
		}
	}
	out := make([]source.Observation, 0, len(hist)+len(gauges))
	for _, o := range hist {
		g, ok := scraped[o.Node.ID]
		delete(scraped, o.Node.ID)
		switch {
		case ok && o.Metrics == nil: // the history source has nothing yet
			o = g
		case ok:
			o = join(o, g)
		case gerr != nil && o.Metrics != nil:
			o.Metrics = proto.Clone(o.Metrics).(*llmdiagv1.NodeMetrics)
			o.Metrics.Warnings = append(o.Metrics.Warnings, fmt.Sprintf("direct scrapes unavailable, gauges from the history source: %v", gerr))
		}
		out = append(out, o)
	}
	for _, g := range scraped {
		if herr != nil {
			g.Metrics.Warnings = append(g.Metrics.Warnings, fmt.Sprintf("history source unavailable, rates and percentiles from direct scrapes: %v", herr))
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node.ID < out[j].Node.ID })
	return out, nil
}

// Window reads on-demand windows from History, and from Gauges when History
// cannot answer (it does not know the node, or is down). A request History
// refuses as over its budget is refused, not answered from the gauges.
func (c Combined) Window(ctx context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	m, err := c.History.Window(ctx, node, window, offset)
	if err == nil {
		return m, nil
	}
	if errors.Is(err, source.ErrOverBudget) || ctx.Err() != nil {
		return nil, err
	}
	if g, gerr := c.Gauges.Window(ctx, node, window, offset); gerr == nil {
		g.Warnings = append(g.Warnings, fmt.Sprintf("history source: %v", err))
		return g, nil
	}
	return nil, err
}

// join takes h's history and g's gauges when g reached the node.
func join(h, g source.Observation) source.Observation {
	gm := g.Metrics
	if !gm.GetUp() || len(gm.GetErrors()) > 0 {
		h.Metrics.Warnings = append(h.Metrics.Warnings, "direct scrape failed, gauges from the history source: "+fmt.Sprint(gm.GetErrors()))
		return h
	}
	m := proto.Clone(h.Metrics).(*llmdiagv1.NodeMetrics)
	m.Queue, m.Running, m.QueueRunningRatio = gm.Queue, gm.Running, gm.QueueRunningRatio
	if gm.KvPressure != nil {
		m.KvPressure = gm.KvPressure
	}
	if gm.KvCapacityTokens != nil {
		m.KvCapacityTokens = gm.KvCapacityTokens
	}
	metrics.SetPerRequestDecode(m) // with the fresher running
	if gm.GetObservedAt().AsTime().After(m.GetObservedAt().AsTime()) {
		m.ObservedAt, m.Staleness, m.Stale = gm.ObservedAt, gm.Staleness, gm.Stale
	}
	h.Metrics = m
	if h.Node.URL == "" {
		h.Node.URL = g.Node.URL
	}
	if h.Node.Profile == (fleet.Profile{}) {
		h.Node.Profile = g.Node.Profile
	}
	return h
}

var _ source.Source = Combined{}
