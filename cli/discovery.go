package cli

import (
	"context"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/fleetsd"
)

// discovery reads --discovery's file and builds its discovery (package
// fleetsd): with --prometheus a node's id is its --node-label, so that it
// names the node as Prometheus's series do. Bounded by --max-nodes.
func (s *serving) discovery(context.Context) error {
	c := s.cfg
	if c.discoveryPath == "" {
		return nil
	}
	f, err := fleetsd.Load(c.discoveryPath, s.log)
	if err != nil {
		return usageError{err}
	}
	s.sdFile = f
	opts := fleetsd.Options{Log: s.log, Registerer: s.reg, MaxTargets: c.maxNodes, Debounce: c.discoveryDebounce}
	if c.prom.url != "" {
		opts.IDLabel = c.prom.nodeLabel
	}
	s.disco, err = fleetsd.New(f, opts)
	if err != nil {
		return err
	}
	for _, j := range f.Jobs {
		s.log.Info("discovery job", "job", j.Name(), "mechanisms", len(j.Config.ServiceDiscoveryConfigs), "default_rules", j.Defaulted)
	}
	return nil
}

// runDiscovery runs the discovery until ctx is done, handing every node set
// to the scraper first (the nodes with a url), then to the refresh loop
// (refresh.Loop.SetFleet), which removes the nodes gone at its next
// refresh; with --prometheus, only the nodes discovery lists are kept of
// those Prometheus presents (refresh.Config.FleetOnly). first is closed
// once the first set is applied; done
// when the discovery has stopped.
func (s *serving) runDiscovery(ctx context.Context) (first, done <-chan struct{}) {
	f, d := make(chan struct{}), make(chan struct{})
	var known map[string]bool
	apply := func(nodes []fleet.Node) {
		byID := make(map[string]fleet.Node, len(nodes))
		var scraped []fleet.Node
		ids := make(map[string]bool, len(nodes))
		added := 0
		for _, n := range nodes {
			byID[n.ID] = n
			ids[n.ID] = true
			if !known[n.ID] {
				added++
			}
			if n.URL != "" {
				scraped = append(scraped, n)
			}
		}
		removed := len(known) + added - len(ids)
		if s.src.scraper != nil {
			s.src.scraper.SetTargets(scraped)
		}
		s.loop.SetFleet(byID, true)
		if known == nil {
			close(f)
		}
		if known == nil || added > 0 || removed > 0 {
			s.log.Info("discovery: node set", "nodes", len(nodes), "added", added, "removed", removed, "fast_nodes", s.loop.FastNodes())
		}
		known = ids
	}
	go func() {
		defer close(d)
		if err := s.disco.Run(ctx, apply); err != nil {
			s.log.Error("discovery stopped", "err", err)
		}
	}()
	return f, d
}

// waitDiscovery waits for the first node set before the first refresh, so
// that it is not made of nothing: at most twice --discovery-debounce (a
// discovery whose every mechanism failed to start sends none).
func (s *serving) waitDiscovery(ctx context.Context, first <-chan struct{}) {
	t := time.NewTimer(2 * s.cfg.discoveryDebounce)
	defer t.Stop()
	select {
	case <-first:
	case <-ctx.Done():
	case <-t.C:
		s.log.Warn("discovery: no node set yet; refreshing meanwhile", "waited", 2*s.cfg.discoveryDebounce)
	}
}
