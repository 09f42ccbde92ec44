package memory

import (
	"bytes"
	"context"
	"fmt"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/store"
)

// Take replaces a node's record and its whole history (oldest first; points
// beyond HistoryLen are dropped from the front) with what a shared store
// holds, unless the record held here was observed after rec: how a
// replica's copy takes over the shared store's state without undoing a
// newer write of its own. The check and the replacement are one step, so a
// Put that races the copy is never overwritten by the older record. It
// reports whether it replaced the node.
func (s *Store) Take(ctx context.Context, rec *store.Record, hist []diagnose.Point) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	id := rec.Node.GetId()
	n := &node{written: s.opts.Now(), observed: rec.Metrics.GetObservedAt().AsTime()}
	b, err := s.codec.Encode(id, rec)
	if err != nil {
		n.raw = cloneRecord(rec)
	}
	n.rec = b
	for _, p := range hist {
		if err := n.hist.Append(p, s.opts.HistoryLen); err != nil {
			return false, fmt.Errorf("%q: %w", id, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := s.nodes[id]
	if mine != nil && mine.observed.After(n.observed) {
		return false, nil
	}
	// A copy of what the store already holds (a replica's full check) is
	// no change: answers prepared from it stay valid.
	if mine == nil || n.raw != nil || mine.raw != nil || !bytes.Equal(mine.rec, n.rec) || !mine.hist.Equal(n.hist) {
		s.gen.Add(1)
	}
	s.nodes[id] = n
	return true, nil
}

// Puts returns how many Puts the store has taken: pass it to
// RetainUnwritten to keep what is written from then on.
func (s *Store) Puts() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.puts
}

// RetainUnwritten forgets every node keep does not name, except those Put
// after the store had taken since Puts: a replica's sync drops the nodes
// the shared store no longer holds, but not one its own writer added while
// the sync read the shared store (or while it was unreachable).
func (s *Store) RetainUnwritten(ctx context.Context, keep map[string]bool, since uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.nodes {
		if !keep[id] && n.put <= since {
			delete(s.nodes, id)
			s.gen.Add(1)
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
		if _, ok := s.nodes[id]; ok {
			delete(s.nodes, id)
			s.gen.Add(1)
		}
	}
	return nil
}
