package memory

import (
	"context"
	"fmt"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/store"
)

// Load replaces a node's record and its whole history (oldest first; points
// beyond HistoryLen are dropped from the front): how a replica's copy takes
// over what a shared store holds.
func (s *Store) Load(ctx context.Context, rec *store.Record, hist []diagnose.Point) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id := rec.Node.GetId()
	n := &node{written: s.opts.Now()}
	b, err := s.codec.Encode(id, rec)
	if err != nil {
		n.raw = cloneRecord(rec)
	}
	n.rec = b
	for _, p := range hist {
		if err := n.hist.Append(p, s.opts.HistoryLen); err != nil {
			return fmt.Errorf("%q: %w", id, err)
		}
	}
	s.mu.Lock()
	s.nodes[id] = n
	s.mu.Unlock()
	return nil
}

// Retain forgets every node keep does not name.
func (s *Store) Retain(ctx context.Context, keep map[string]bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.nodes {
		if !keep[id] {
			delete(s.nodes, id)
		}
	}
	return nil
}

// Delete forgets the named nodes: how a replica's copy follows a Sweep of
// the shared store.
func (s *Store) Delete(ctx context.Context, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.nodes, id)
	}
	return nil
}
