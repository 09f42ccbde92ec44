package refresh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
)

// Defaults of the bounds on the node set.
const (
	DefaultRetention = time.Hour
	DefaultMaxNodes  = 10000
)

// NodeSet is what one refresh did to the set of nodes the loop keeps.
type NodeSet struct {
	// Refused counts new nodes refused because MaxNodes nodes are kept.
	Refused int
	// Invalid counts observations whose node id is not a valid id
	// (fleet.ValidID); they are skipped.
	Invalid int
	// Removed names the nodes swept this refresh: unseen for Retention.
	Removed []string
	// Quiet counts the nodes announced UNKNOWN this refresh: kept, but not
	// presented by the source for longer than StaleAfter.
	Quiet int
	// Kept is the number of nodes kept after the refresh.
	Kept int
}

// nodeSet is the loop's own account of the nodes it keeps, for the cap: id
// → when a refresh last admitted it. It is seeded from the store when a run
// starts (a new ingest leader inherits what the last one wrote) and ages
// out with Retention like the store, so it is bounded by MaxNodes whatever
// the store does.
type nodeSet struct {
	seeded bool
	seen   map[string]time.Time
	// quiet holds the nodes of seen that the feed was told have gone quiet
	// (quieten): a node leaves it when it comes back or is swept.
	quiet map[string]bool
}

// admit filters a refresh's observations at the loop's entrance: ids that
// are not valid node ids are skipped (and counted), and new nodes beyond
// MaxNodes are refused (and counted) while known ones keep refreshing.
// Observations without metrics pass untouched; Once skips them.
func (l *Loop) admit(ctx context.Context, obs []source.Observation) ([]source.Observation, NodeSet) {
	var ns NodeSet
	if !l.nodes.seeded {
		l.seed(ctx)
	}
	now := l.now()
	kept := obs[:0:0]
	var badExample string
	for _, o := range obs {
		id := o.Node.ID
		if !fleet.ValidID(id) {
			ns.Invalid++
			if badExample == "" {
				badExample = truncate(id, 80)
			}
			continue
		}
		if o.Metrics != nil {
			if _, known := l.nodes.seen[id]; !known && len(l.nodes.seen) >= l.cfg.MaxNodes {
				ns.Refused++
				continue
			}
			l.nodes.seen[id] = now
		}
		kept = append(kept, o)
	}
	if ns.Invalid > 0 {
		l.log.Warn("skipped nodes with invalid ids: a node id is 1-128 letters, digits and ._:/- starting with a letter or digit",
			"count", ns.Invalid, "example", badExample)
	}
	if ns.Refused > 0 {
		l.log.Warn("node cap reached: new nodes refused; known nodes keep refreshing",
			"refused", ns.Refused, "max_nodes", l.cfg.MaxNodes, "kept", len(l.nodes.seen))
	}
	return kept, ns
}

// seed starts the account from the store. A store that does not answer
// leaves it empty; the next run seeds again.
func (l *Loop) seed(ctx context.Context) {
	recs, err := l.st.List(ctx)
	if err != nil {
		l.log.Warn("node cap: could not read the nodes the store holds; counting from this refresh", "err", err)
		return
	}
	now := l.now()
	for _, r := range recs {
		if len(l.nodes.seen) >= l.cfg.MaxNodes {
			break
		}
		l.nodes.seen[r.Node.GetId()] = now
	}
	l.nodes.seeded = true
}

// sweep removes from the store the nodes unseen for Retention and tells
// the health feed they left: one final event each (see Removed). Only a
// fenced or cancelled write is an error; a store that does not answer is
// swept next time.
func (l *Loop) sweep(ctx context.Context) ([]string, error) {
	gone, err := l.st.Sweep(ctx, l.cfg.Retention)
	if err != nil {
		if errors.Is(err, store.ErrFenced) || ctx.Err() != nil {
			return nil, err
		}
		l.log.Warn("sweep of nodes unseen for the retention failed; retrying next refresh", "retention", l.cfg.Retention, "err", err)
	}
	now := l.now()
	ids := make([]string, 0, len(gone))
	for _, r := range gone {
		id := r.Node.GetId()
		delete(l.nodes.seen, id)
		delete(l.nodes.quiet, id)
		delete(l.wrote, id)
		l.fast.forget(false, id)
		ids = append(ids, id)
		if _, err := l.st.Publish(ctx, Removed(r, now)); err != nil {
			return ids, fmt.Errorf("publish the removal of %s: %w", id, err)
		}
	}
	for id, at := range l.nodes.seen {
		if now.Sub(at) >= l.cfg.Retention {
			delete(l.nodes.seen, id)
			delete(l.nodes.quiet, id)
		}
	}
	if len(ids) > 0 {
		l.log.Info("nodes left the fleet: unseen for the retention", "count", len(ids), "first", ids[0], "retention", l.cfg.Retention)
	}
	return ids, nil
}

// remove forgets the nodes the fleet no longer has (SetFleet) and tells
// the health feed they left: one final event each, as sweep does. A store
// that is no store.Remover keeps them until the retention's sweep (the
// event is published all the same). Only a fenced or cancelled write is an
// error; a store that does not answer leaves them to the sweep.
func (l *Loop) remove(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	var recs []*store.Record
	if r, ok := l.st.(store.Remover); ok {
		var err error
		if recs, err = r.Remove(ctx, ids...); err != nil {
			if errors.Is(err, store.ErrFenced) || ctx.Err() != nil {
				return nil, err
			}
			l.log.Warn("could not remove the nodes discovery no longer has; the retention's sweep will", "count", len(ids), "err", err)
		}
	} else {
		for _, id := range ids {
			if rec, err := l.st.Get(ctx, id); err == nil {
				recs = append(recs, rec)
			}
		}
	}
	now := l.now()
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		id := r.Node.GetId()
		out = append(out, id)
		if _, err := l.st.Publish(ctx, Removed(r, now)); err != nil {
			return out, fmt.Errorf("publish the removal of %s: %w", id, err)
		}
	}
	for _, id := range ids {
		delete(l.nodes.seen, id)
		delete(l.nodes.quiet, id)
		delete(l.wrote, id)
		l.slo.forget(id)
	}
	if len(out) > 0 {
		l.log.Info("nodes left the fleet: no longer discovered", "count", len(out), "first", out[0])
	}
	return out, nil
}

// quieten tells the health feed, once per node, that the source has not
// presented a node kept in the store for longer than the thresholds'
// StaleAfter (a pod gone from Prometheus, a target dropped from discovery):
// its last verdict is no longer the truth, so subscribers (routers) get it
// UNKNOWN and not routable, as ListNodes already shows it, until it comes
// back (its next verdict is published whatever it is) or is swept after
// Retention. It returns how many nodes it announced; only a fenced or
// cancelled publish is an error.
func (l *Loop) quieten(ctx context.Context) (int, error) {
	staleAfter := l.cfg.Thresholds.StaleAfter
	if staleAfter <= 0 {
		staleAfter = diagnose.DefaultThresholds().StaleAfter
	}
	now := l.now()
	var n int
	for id, at := range l.nodes.seen {
		if l.nodes.quiet[id] || !metrics.TooOld(now.Sub(at), staleAfter) {
			continue
		}
		r, err := l.st.Get(ctx, id)
		switch {
		case isNotFound(err):
			l.nodes.quiet[id] = true // nothing was told of it: nothing to take back
			continue
		case err != nil:
			l.log.Debug("could not read a quiet node; retrying next refresh", "node", id, "err", err)
			continue
		}
		if _, err := l.st.Publish(ctx, Quiet(r, now)); err != nil {
			if errors.Is(err, store.ErrFenced) || ctx.Err() != nil {
				return n, fmt.Errorf("publish that %s went quiet: %w", id, err)
			}
			l.log.Debug("could not publish that a node went quiet; retrying next refresh", "node", id, "err", err)
			continue
		}
		l.nodes.quiet[id] = true
		n++
	}
	if n > 0 {
		l.log.Info("nodes no longer presented by the source: UNKNOWN and not routable until they come back",
			"count", n, "stale_after", staleAfter, "retention", l.cfg.Retention)
	}
	return n, nil
}

// Quiet is the health event of a node the source no longer presents: its
// last model and labels (so every stream that selected it matches it),
// UNKNOWN, NO_DATA and not routable, with the age of its last observation.
func Quiet(r *store.Record, now time.Time) *llmdiagv1.NodeHealth {
	h := Health(r.Node, r.Metrics.GetObservedAt())
	h.Status, h.RootCause, h.Routable = llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, false
	if at := r.Metrics.GetObservedAt(); at != nil {
		h.Staleness = durationpb.New(max(now.Sub(at.AsTime()), 0))
	}
	return h
}

// Removed is the final health event of a node that left the fleet: Quiet
// (what a client that does not know the removed field acts on), and
// removed.
func Removed(r *store.Record, now time.Time) *llmdiagv1.NodeHealth {
	h := Quiet(r, now)
	h.Removed = true
	return h
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
