package alerts

import (
	"sync"
	"time"
)

// dedup remembers keys (fingerprint and status) for a window, at most max
// of them: when full, the oldest is forgotten first.
type dedup struct {
	window time.Duration
	max    int

	mu    sync.Mutex
	seen  map[string]time.Time
	order []entry // by admission time; may hold forgotten or re-admitted keys
}

type entry struct {
	key string
	at  time.Time
}

func newDedup(window time.Duration, max int) *dedup {
	return &dedup{window: window, max: max, seen: map[string]time.Time{}}
}

// admit reports whether key is new (not admitted within the window) and
// remembers it if so.
func (d *dedup) admit(key string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(now)
	if at, ok := d.seen[key]; ok && now.Sub(at) < d.window {
		return false
	}
	for len(d.seen) >= d.max && len(d.order) > 0 {
		d.pop()
	}
	d.seen[key] = now
	d.order = append(d.order, entry{key, now})
	return true
}

// forget drops key, so that the same alert is taken when sent again.
func (d *dedup) forget(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.seen, key)
}

// len is how many keys are remembered.
func (d *dedup) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}

// expire forgets the keys older than the window.
func (d *dedup) expire(now time.Time) {
	for len(d.order) > 0 && now.Sub(d.order[0].at) >= d.window {
		d.pop()
	}
	// Forgotten keys leave entries behind; keep the slice within bounds.
	if len(d.order) > 2*d.max+16 {
		kept := d.order[:0]
		for _, e := range d.order {
			if at, ok := d.seen[e.key]; ok && at.Equal(e.at) {
				kept = append(kept, e)
			}
		}
		d.order = kept
	}
}

// pop forgets the oldest entry, if it is still the key's.
func (d *dedup) pop() {
	e := d.order[0]
	d.order = d.order[1:]
	if at, ok := d.seen[e.key]; ok && at.Equal(e.at) {
		delete(d.seen, e.key)
	}
}
