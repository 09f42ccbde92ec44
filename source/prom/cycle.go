package prom

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Budget of a read whose context has a deadline (a refresh: the refresh
// loop's timeout).
const (
	// reserveDiv: the last 1/reserveDiv of the time is kept for assembling
	// and storing what arrived; every query ends before it.
	reserveDiv = 10
	// minLeftDiv: no query is sent with less than 1/minLeftDiv of the time
	// left before the queries' end, nor with less than the mean time the
	// queries of the read have taken so far.
	minLeftDiv = 20
)

// shapeTargets is not a query: it asks the targets API for the last scrape
// errors of the nodes that are not live.
const shapeTargets shape = -1

// cycle schedules the queries of one read on Config.Concurrency workers,
// most important first (priority), within the read's deadline. Identity
// queries go first; the data queries of an engine are queued when its
// identity reports nodes, or from the start for the engines of hint (the
// engines that had nodes at the last refresh), so that they need not wait
// for a round trip; they are dropped, unsent, when the identity finds no
// node after all.
type cycle struct {
	s     *Source
	a     *assembly
	b     builder
	ctx   context.Context
	t     time.Time // evaluation time
	start time.Time
	end   time.Time // the queries' deadline; zero: none but Config.Timeout

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []query // by priority
	inflight int
	queued   map[llmdiagv1.Engine]bool // data queued (or sent)
	targets  bool                      // targets request queued
	role     bool                      // role query queued
	sent     int
	ok       int
	dataOK   int // successful queries other than identity
	dataBad  int // failed or not sent queries other than identity
	failed   int
	dropped  int           // not sent: too little time left
	took     time.Duration // total of the successful queries
}

func newCycle(ctx context.Context, s *Source, a *assembly, b builder, t time.Time) *cycle {
	c := &cycle{s: s, a: a, b: b, ctx: ctx, t: t, start: time.Now(), queued: map[llmdiagv1.Engine]bool{}}
	c.cond = sync.NewCond(&c.mu)
	if d, ok := ctx.Deadline(); ok {
		c.end = d.Add(-d.Sub(c.start) / reserveDiv)
	}
	return c
}

// priority orders the queue: identity, then the targets request, then the
// gauges a router reads first (queue, running, KV), then the buckets (the
// large answers, and the percentiles), then the rest, and the role query
// last. Within a priority
// the engines take turns (query.seq).
func priority(q query) int {
	switch {
	case q.shape == shapeIdentity:
		return 0
	case q.shape == shapeTargets:
		return 1
	case q.shape == shapeRole:
		return 5 // last: a node's figures stand without it
	case q.hasConcept() && (q.concept == engine.Queue || q.concept == engine.Running || isKV(q.concept)):
		return 2
	case q.shape == shapeBuckets:
		return 3
	}
	return 4
}

// push adds qs to the queue; c.mu must be held.
func (c *cycle) push(qs ...query) {
	c.queue = append(c.queue, qs...)
	slices.SortStableFunc(c.queue, func(x, y query) int {
		return cmp.Or(cmp.Compare(priority(x), priority(y)), cmp.Compare(x.seq, y.seq))
	})
	c.cond.Broadcast()
}

// queueData queues the data queries of es; c.mu must be held.
func (c *cycle) queueData(es *engineState) {
	if c.queued[es.m.Engine] {
		return
	}
	c.queued[es.m.Engine] = true
	if !c.role {
		// With the first engine's data: one query for every engine.
		c.role = true
		if q, err := c.b.role(); err != nil {
			c.s.log.Error("role labels have no query", "err", err)
		} else {
			c.push(q)
		}
	}
	qs, err := c.b.data(es.m)
	if err != nil {
		c.s.log.Error("engine mapping has no query", "engine", es.m.Engine, "err", err)
		c.a.engineErr(es, fmt.Sprintf("no query for engine %s: %v", es.m.Engine, err))
		return
	}
	// Within a priority the engines take turns, so that under a deadline
	// each gets its most important families first.
	for i := range qs {
		qs[i].seq = i
	}
	c.push(qs...)
}

// left is the time left before the queries' end.
func (c *cycle) left() time.Duration { return time.Until(c.end) }

// minLeft is the least time left a query is sent with.
func (c *cycle) minLeft() time.Duration {
	m := c.end.Sub(c.start) / minLeftDiv
	if c.ok > 0 {
		m = max(m, c.took/time.Duration(c.ok))
	}
	return m
}

// next returns the next query to send; false when there is none left to
// send (the queue is empty and nothing in flight may add to it, or the time
// is up: what is queued is then dropped, each failing with a timeout).
func (c *cycle) next() (query, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if len(c.queue) > 0 {
			var why error
			if err := c.ctx.Err(); err != nil {
				why = err
			} else if !c.end.IsZero() {
				if left, need := c.left(), c.minLeft(); left < need {
					why = fmt.Errorf("timeout: not sent, %v left before the %s deadline, queries take about %v",
						max(left, 0).Round(time.Millisecond), c.what(), need.Round(time.Millisecond))
				}
			}
			if why != nil {
				for _, q := range c.queue {
					if q.shape != shapeTargets {
						c.a.fail(q, why)
						c.dropped++
						if isData(q) {
							c.dataBad++
						}
					}
				}
				c.queue = nil
				c.cond.Broadcast()
				return query{}, false
			}
			q := c.queue[0]
			c.queue = c.queue[1:]
			c.inflight++
			if q.shape != shapeTargets {
				c.sent++
			}
			return q, true
		}
		if c.inflight == 0 {
			return query{}, false
		}
		c.cond.Wait()
	}
}

// what names the read in errors.
func (c *cycle) what() string {
	if c.b.match != "" {
		return "request"
	}
	return "refresh"
}

// done records that q finished after took: ok, or failed with err. An
// identity queues its engine's data, or drops it, and the targets request
// when some node is not live.
func (c *cycle) done(q query, took time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	defer c.cond.Broadcast()
	if q.shape == shapeTargets {
		return
	}
	if err != nil {
		c.failed++
		if isData(q) {
			c.dataBad++
		}
	} else {
		c.ok++
		c.took += took
		if isData(q) {
			c.dataOK++
		}
	}
	if q.shape != shapeIdentity {
		return
	}
	es := c.a.engineOf(q.engine)
	nodes, notLive := c.a.census(es)
	if err != nil || nodes == 0 {
		// No node of the engine known: its data is not worth a query.
		c.queue = slices.DeleteFunc(c.queue, func(x query) bool { return x.engine == q.engine })
		return
	}
	c.queueData(es)
	if notLive > 0 && !c.targets {
		c.targets = true
		c.push(query{engine: q.engine, shape: shapeTargets})
	}
}

// isData reports whether q reads the nodes' data: not their identity, nor
// their roles (without which a node's figures still stand).
func isData(q query) bool { return q.shape != shapeIdentity && q.shape != shapeRole }

// explain turns the error of a query sent with ctx after took into one
// that names a timeout, and which.
func (c *cycle) explain(ctx context.Context, took time.Duration, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) || c.ctx.Err() != nil {
		return err
	}
	d, _ := ctx.Deadline()
	if !c.end.IsZero() && !d.Before(c.end) {
		return fmt.Errorf("timeout: no answer within %v, the time left before the %s deadline: %w",
			took.Round(time.Millisecond), c.what(), context.DeadlineExceeded)
	}
	return fmt.Errorf("timeout: no answer within the query timeout, %v: %w", c.s.cfg.Timeout, context.DeadlineExceeded)
}

// run sends the queue on Config.Concurrency workers until next says stop.
func (c *cycle) run() {
	var wg sync.WaitGroup
	for range c.s.cfg.Concurrency {
		wg.Go(func() {
			w := c.s.workers.Get().(*worker)
			defer func() {
				// The body buffer outlives the worker in bodyPool.
				c.s.bodies.put(w.buf.Bytes())
				w.buf = bytes.Buffer{}
				c.s.workers.Put(w)
			}()
			for {
				q, ok := c.next()
				if !ok {
					return
				}
				if q.shape == shapeTargets {
					tctx, cancel := c.queryCtx()
					c.s.scrapeErrors(tctx, w, c.a)
					cancel()
					c.done(q, 0, nil)
					continue
				}
				fleetWide := c.b.match == ""
				if fleetWide {
					c.s.sizes.reserve(w, q, &c.s.bodies)
				}
				qctx, cancel := c.queryCtx()
				start := time.Now()
				warnings, err := c.s.query(qctx, w, q, c.t)
				took := time.Since(start)
				if err == nil && fleetWide {
					c.s.sizes.set(w, q)
				}
				if err != nil {
					err = c.explain(qctx, took, err)
					if c.ctx.Err() == nil {
						c.s.log.Debug("prometheus query failed", "query", q.expr, "err", err)
					}
					c.a.fail(q, err)
				} else {
					c.a.add(q, &w.vec, warnings)
				}
				cancel()
				c.done(q, took, err)
			}
		})
	}
	wg.Wait()
}

// queryCtx is the context of one query: the read's, ending at c.end.
func (c *cycle) queryCtx() (context.Context, context.CancelFunc) {
	if c.end.IsZero() {
		return context.WithCancel(c.ctx)
	}
	return context.WithDeadline(c.ctx, c.end)
}
