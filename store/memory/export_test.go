package memory

// EncodedSize returns the bytes node's record and history take encoded:
// what a store that serialises them (Redis) would keep.
func (s *Store) EncodedSize(node string) (rec, hist int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.nodes[node]
	if n == nil {
		return 0, 0
	}
	return len(n.rec), n.hist.Size()
}
