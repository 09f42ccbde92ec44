package slackcmd

import (
	"sync"
	"time"
)

// replaySet remembers the signatures accepted, each until the moment its
// request's timestamp becomes stale (after which the timestamp check refuses
// a replay by itself), and at most max of them.
type replaySet struct {
	mu      sync.Mutex
	max     int
	expires map[string]time.Time
}

func newReplaySet(max int) *replaySet {
	return &replaySet{max: max, expires: make(map[string]time.Time)}
}

// addResult is what add did.
type addResult int

const (
	added addResult = iota
	// replayed: the signature is remembered, and not expired.
	replayed
	// full: max signatures are remembered, none expired; nothing was added.
	full
)

// add remembers sig until expires (inclusive: the timestamp check refuses
// only what is past it), unless it is already remembered at now.
// When the set is full it first forgets the expired signatures; if none
// has expired it refuses (a replay must never pass because the set forgot).
func (s *replaySet) add(sig string, now, expires time.Time) addResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.expires[sig]; ok && !now.After(e) {
		return replayed
	}
	if len(s.expires) >= s.max {
		for k, e := range s.expires {
			if now.After(e) {
				delete(s.expires, k)
			}
		}
		if len(s.expires) >= s.max {
			return full
		}
	}
	s.expires[sig] = expires
	return added
}

// len is how many signatures are remembered.
func (s *replaySet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.expires)
}
