package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrOverBudget is returned (wrapped) when work a request asks of a source
// would go past the request's Budget.
var ErrOverBudget = errors.New("over the request's query budget")

// Budget is how many queries to its backend (Prometheus) one request may
// cause a source to send. It travels in the request's context (WithBudget):
// a source charges the queries of a unit of work before it sends them and
// refuses, with an error wrapping ErrOverBudget, the work that would go past
// the limit; what it was charged and did not send it refunds. Work another
// request already started, or a cache answers, costs nothing.
//
// A source may also Keep what it read for the request, so that one request
// reads each unit of work once, however long it takes to use it (a
// comparison of 1,000 nodes reads the fleet once, at one evaluation time,
// though its cache entries expire meanwhile).
//
// A nil *Budget is unlimited and keeps nothing. Safe for concurrent use.
type Budget struct {
	limit int

	mu   sync.Mutex
	used int
	kept map[any]any
}

// NewBudget returns a budget of limit queries.
func NewBudget(limit int) *Budget { return &Budget{limit: limit} }

// Charge takes n queries for what (named in the error) from b, or takes
// nothing and returns an error wrapping ErrOverBudget when that would spend
// more than the limit.
func (b *Budget) Charge(n int, what string) error {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return fmt.Errorf("%w of %d: %s needs up to %d queries and %d are spent", ErrOverBudget, b.limit, what, n, b.used)
	}
	b.used += n
	return nil
}

// Refund gives back n queries charged and not sent; a negative n charges
// queries sent beyond what was charged, whatever the limit.
func (b *Budget) Refund(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used = max(b.used-n, 0)
}

// Used is the number of queries charged so far.
func (b *Budget) Used() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Keep remembers v under key (a comparable value of the source's own type)
// for the rest of the request.
func (b *Budget) Keep(key, v any) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kept == nil {
		b.kept = map[any]any{}
	}
	b.kept[key] = v
}

// Kept returns what Keep remembered under key.
func (b *Budget) Kept(key any) (any, bool) {
	if b == nil {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.kept[key]
	return v, ok
}

type budgetKey struct{}

// WithBudget returns ctx carrying b.
func WithBudget(ctx context.Context, b *Budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// BudgetOf returns the budget ctx carries, or nil (unlimited).
func BudgetOf(ctx context.Context) *Budget {
	b, _ := ctx.Value(budgetKey{}).(*Budget)
	return b
}

// Reuse is how long the answer for an on-demand window of length window
// may be reused: a twentieth of the window, between 1 s and 15 s (a
// lifetime window, 0, counts as 5 m). Reused, an answer ends that much
// earlier than asked, whatever its offset; a twentieth of the window is
// within what an indicator over it can tell. The server's query cache and
// the Prometheus source's fleet-wide windows both keep answers this long.
func Reuse(window time.Duration) time.Duration {
	if window == 0 {
		window = 5 * time.Minute
	}
	return min(max(window/20, time.Second), 15*time.Second)
}
