package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/store"
)

// HAProxy's agent check (agent-check, agent-send, agent-port): HAProxy
// connects over TCP, sends its agent-send string (here the node id and a
// newline), reads one line and the agent closes. The line holds words
// HAProxy applies to the server: a weight "NN%", an operational state
// ("up", "down"), an administrative one ("ready", "drain") and "#" with a
// description shown in its stats.

const (
	// HAProxyAgentMaxLine bounds the agent-send line, newline included: a
	// node id is at most 128 characters.
	HAProxyAgentMaxLine = 256
	// HAProxyAgentReadTimeout is how long a connection has to send its
	// agent-send line.
	HAProxyAgentReadTimeout = time.Second
	// HAProxyAgentMaxConns bounds the connections the agent keeps open at
	// once: HAProxy holds one per server and check, for well under a
	// second each.
	HAProxyAgentMaxConns = 256
	// HAProxyAgentMinWeight is the weight of a routable node at load
	// score 1 (and the least any routable node gets but for a slow
	// decoder's).
	HAProxyAgentMinWeight = 10
	// HAProxyAgentMinSlowWeight is the least weight of a routable node
	// decoding slower than its peers (slowFactor below 1).
	HAProxyAgentMinSlowWeight = 1
	// HAProxyAgentFailOpen is the reply when the data cannot say.
	HAProxyAgentFailOpen = "ready up 100% #llmdiag: no fresh data (fail open)"
	// HAProxyAgentStopping is every reply while the agent is stopping
	// (HAProxyAgentOptions.StopAnswer).
	HAProxyAgentStopping = "ready up 100% #llmdiag: stopping (fail open)"
	// haproxySlowRatio: a node decoding below this fraction of its model
	// group's median per-request speed gets the square of that fraction
	// of its weight (slowFactor).
	haproxySlowRatio = 0.8
	// haproxyOutlierFactor scales the weight of a NODE_OUTLIER node whose
	// decode speed cannot be compared.
	haproxyOutlierFactor = 0.5
	// haproxyPeersEvery is how long the model groups' median decode speeds
	// are reused before the store is listed again.
	haproxyPeersEvery = time.Second
)

// Reply kinds, the label of llmdiag_haproxy_agent_replies_total.
const (
	HAProxyReplyUp       = "up"
	HAProxyReplyDrain    = "drain"
	HAProxyReplyDown     = "down"
	HAProxyReplyFailOpen = "fail_open"
	HAProxyReplyBadInput = "bad_input"
)

// HAProxyAgentOptions configures HAProxyAgent.
type HAProxyAgentOptions struct {
	// Registerer, when not nil, gets llmdiag_haproxy_agent_replies_total.
	Registerer prometheus.Registerer
	// ReadTimeout is HAProxyAgentReadTimeout when zero.
	ReadTimeout time.Duration
	// MaxConns is HAProxyAgentMaxConns when zero.
	MaxConns int
	// StopAnswer is how long Serve goes on answering once its ctx is
	// done, every check with HAProxyAgentStopping, before it closes its
	// listener: HAProxy keeps the state an agent last gave a server when
	// the agent stops answering, so a drained or downed server would stay
	// so after llmdiag stops. Zero closes at once.
	StopAnswer time.Duration
}

// HAProxyAgent answers HAProxy's agent check from the store's latest
// record of the node, as GET /routable/{node} does.
type HAProxyAgent struct {
	s       *Service
	o       HAProxyAgentOptions
	replies *prometheus.CounterVec

	mu       sync.Mutex
	peersAt  time.Time
	medians  map[string]float64         // model → median per-request decode speed
	routable map[string]map[string]bool // model → its routable fresh nodes
}

// HAProxyAgent returns the agent over s's store.
func (s *Service) HAProxyAgent(o HAProxyAgentOptions) (*HAProxyAgent, error) {
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = HAProxyAgentReadTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = HAProxyAgentMaxConns
	}
	a := &HAProxyAgent{s: s, o: o, replies: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmdiag_haproxy_agent_replies_total",
		Help: "Replies of the HAProxy agent check (serve --haproxy-agent-listen), by kind: up, drain, down, fail_open, bad_input.",
	}, []string{"kind"})}
	for _, k := range []string{HAProxyReplyUp, HAProxyReplyDrain, HAProxyReplyDown, HAProxyReplyFailOpen, HAProxyReplyBadInput} {
		a.replies.WithLabelValues(k)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(a.replies); err != nil {
			return nil, fmt.Errorf("haproxy agent metrics: %w", err)
		}
	}
	return a, nil
}

// Serve answers the connections ln accepts, at most MaxConns at once (the
// others are closed at once), until ctx is done; then, for StopAnswer, it
// answers every check HAProxyAgentStopping (fail open), and closes ln.
func (a *HAProxyAgent) Serve(ctx context.Context, ln net.Listener) error {
	ln = CapConnections(ln, a.o.MaxConns)
	open := ctx // what keeps ln open: ctx, and StopAnswer beyond it
	if a.o.StopAnswer > 0 {
		var cancel context.CancelFunc
		open, cancel = context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stopTimer := context.AfterFunc(ctx, func() { time.AfterFunc(a.o.StopAnswer, cancel) })
		defer stopTimer()
	}
	stop := context.AfterFunc(open, func() { _ = ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if open.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		stopping := ctx.Err() != nil
		wg.Go(func() { a.serveConn(open, c, stopping) })
	}
}

// serveConn reads the agent-send line within ReadTimeout and writes the
// reply (HAProxyAgentStopping when stopping); the whole exchange is
// bounded by twice ReadTimeout.
func (a *HAProxyAgent) serveConn(ctx context.Context, c net.Conn, stopping bool) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * a.o.ReadTimeout))
	_ = c.SetReadDeadline(time.Now().Add(a.o.ReadTimeout))
	r := bufio.NewReaderSize(c, HAProxyAgentMaxLine)
	var reply string
	if stopping {
		// The line is read all the same: closing with it unread would
		// reset the connection before HAProxy reads the reply.
		_, _ = r.ReadSlice('\n')
		reply, _ = a.count(HAProxyAgentStopping, HAProxyReplyFailOpen)
	} else {
		reply, _ = a.Exchange(ctx, r)
	}
	_, _ = c.Write([]byte(reply + "\n"))
}

// Exchange reads one agent-send line from r (at most HAProxyAgentMaxLine
// bytes, the newline included; a read error such as a deadline ends it)
// and returns the reply, without its newline, and its kind.
func (a *HAProxyAgent) Exchange(ctx context.Context, r *bufio.Reader) (reply, kind string) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return a.count("ready up 100% #llmdiag: agent-send line longer than "+strconv.Itoa(HAProxyAgentMaxLine)+" bytes (fail open)", HAProxyReplyBadInput)
	case err != nil:
		return a.count("ready up 100% #llmdiag: no agent-send line (the node id and \\n) within "+a.o.ReadTimeout.String()+" (fail open)", HAProxyReplyBadInput)
	}
	node := string(line[:len(line)-1])
	if n := len(node); n > 0 && node[n-1] == '\r' {
		node = node[:n-1]
	}
	if !fleet.ValidID(node) {
		return a.count("ready up 100% #llmdiag: invalid node id in agent-send (fail open)", HAProxyReplyBadInput)
	}
	return a.Reply(ctx, node)
}

func (a *HAProxyAgent) count(reply, kind string) (string, string) {
	a.replies.WithLabelValues(kind).Inc()
	return reply, kind
}

// Reply is the agent's reply for node, without its newline, and its kind:
//
//   - routable: "ready up NN%", NN = 100 − 90 × the load score (0 to 1),
//     so 100% idle down to HAProxyAgentMinWeight at a saturation point;
//     a node decoding slower than its peers gets less (slowFactor), down
//     to HAProxyAgentMinSlowWeight;
//   - not routable, neither STALLED nor DOWN (saturated queue or KV
//     cache, a GPU fault): "up drain #CAUSE" ("up" lifts an earlier
//     "down": HAProxy keeps a server the agent took down down until the
//     agent says up, drain or not); but a node at or past its saturation
//     point (load score ≥ 1) none of whose fresh peers is routable gets
//     "ready up" at HAProxyAgentMinWeight: draining every saturated node
//     of a model would leave HAProxy no server to send to (503s) where
//     the nodes still serve, queueing;
//   - STALLED or DOWN: "down #CAUSE";
//   - stale or unknown data, an unknown node, no verdicts yet, a store
//     that cannot be read: HAProxyAgentFailOpen.
//
// "ready" undoes an earlier "drain": HAProxy keeps an administrative
// state until told otherwise.
func (a *HAProxyAgent) Reply(ctx context.Context, node string) (reply, kind string) {
	rec, err := a.s.get(ctx, node)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			a.s.log.Warn("haproxy agent: store lookup failed", "node", node, "err", err)
		}
		return a.count(HAProxyAgentFailOpen, HAProxyReplyFailOpen)
	}
	n := rec.Node
	now := a.s.now()
	decision, _ := store.Decide(rec, now, a.s.cfg.StaleAfter)
	if decision == store.Unknown {
		return a.count(HAProxyAgentFailOpen, HAProxyReplyFailOpen)
	}
	cause := n.GetRootCause().String()
	switch {
	case n.GetStatus() == llmdiagv1.Status_STATUS_DOWN || n.GetRootCause() == llmdiagv1.Cause_CAUSE_STALLED:
		return a.count("down #"+cause, HAProxyReplyDown)
	case decision == store.NotRoutable && n.GetLoadScore() >= 1 && !a.routablePeer(ctx, n.GetModel(), node, now):
		// Saturated, and so is every peer: draining them all would
		// leave HAProxy no server, and the requests a 503.
		return a.count("ready up "+strconv.Itoa(HAProxyAgentMinWeight)+"% #"+cause, HAProxyReplyUp)
	case decision == store.NotRoutable:
		return a.count("up drain #"+cause, HAProxyReplyDrain)
	}
	w := HAProxyWeight(n.GetLoadScore(), a.slowFactor(ctx, rec, now))
	return a.count("ready up "+strconv.Itoa(w)+"% #"+cause, HAProxyReplyUp)
}

// HAProxyWeight is a routable node's weight in percent: 100 − 90 × score
// (score taken between 0 and 1; not a number reads 0), rounded, so at
// least HAProxyAgentMinWeight; with a factor below 1 (a slow decoder's),
// times factor, rounded, at least HAProxyAgentMinSlowWeight.
func HAProxyWeight(score, factor float64) int {
	if math.IsNaN(score) {
		score = 0
	}
	score = min(max(score, 0), 1)
	w := 100 - float64(100-HAProxyAgentMinWeight)*score
	if math.IsNaN(factor) || factor >= 1 {
		return max(int(math.Round(w)), HAProxyAgentMinWeight)
	}
	return max(int(math.Round(w*max(factor, 0))), HAProxyAgentMinSlowWeight)
}

// slowFactor scales a routable node's weight by its decode speed against
// its peers': the square of r, its per-request decode speed (agentSpeed)
// ÷ the median of the fresh nodes serving the same model (at least
// min_peers of them besides it), when r is below haproxySlowRatio; for a NODE_OUTLIER
// verdict, r² when r is below 1, else haproxyOutlierFactor when it cannot
// be compared. 1 otherwise.
//
// The square, not r: a request on the slow node takes ~1/r as long as on
// a peer. With a weight ∝ r the node gets requests in proportion to its
// speed, its utilization its peers', so a node at a tenth of their speed
// among three peers still gets 1 request in 31, each 10× slower: more
// than 1% of the requests, the backend's p99 set by it. With r² it gets
// 1 in 300, and its requests leave the tail; at r near 1 the two differ
// little.
func (a *HAProxyAgent) slowFactor(ctx context.Context, rec *store.Record, now time.Time) float64 {
	outlier := rec.Node.GetRootCause() == llmdiagv1.Cause_CAUSE_NODE_OUTLIER
	ratio := math.NaN()
	if speed, ok := agentSpeed(rec.Metrics); ok {
		if med, ok := a.median(ctx, rec.Node.GetModel(), now); ok && med > 0 {
			ratio = speed / med
		}
	}
	switch {
	case !math.IsNaN(ratio) && (ratio < haproxySlowRatio || outlier && ratio < 1):
		return ratio * ratio
	case outlier && math.IsNaN(ratio):
		return haproxyOutlierFactor
	}
	return 1
}

// agentSpeed is a decode node's per-request decode speed as the agent
// compares it with its peers': the lower of its pace (1 / the P50
// inter-token latency over the window, else 1 / the P50 time per output
// token) and decode_tokens_per_second_per_request (the generation rate
// over the window shared by the requests running now), either alone when
// the other is unknown. The decode speed falls first when a node slows
// down (its requests pile up while the window still holds its faster
// past); the pace stays down once the agent's own lower weight has
// emptied the node's batch, when the decode speed, the window's rate over
// the few requests left, reads high and alone would give the node its
// weight back. ok is false for a prefill worker and when neither is
// known.
func agentSpeed(m *llmdiagv1.NodeMetrics) (float64, bool) {
	if m == nil || m.GetRole() == llmdiagv1.Role_ROLE_PREFILL {
		return 0, false
	}
	speed, ok := math.Inf(1), false
	if v := m.DecodeTokensPerSecondPerRequest; v != nil && *v >= 0 && !math.IsInf(*v, 0) {
		speed, ok = *v, true
	}
	for _, d := range []*llmdiagv1.Distribution{m.GetInterToken(), m.GetTimePerOutputToken()} {
		if p := p50(d); p > 0 && !math.IsInf(p, 0) {
			return min(speed, 1/p), true
		}
	}
	return speed, ok
}

// p50 is the value d lists for the 0.5 quantile, 0 when none.
func p50(d *llmdiagv1.Distribution) float64 {
	for _, p := range d.GetPercentiles() {
		if math.Abs(p.GetQuantile()-0.5) < 1e-9 {
			return p.GetValue()
		}
	}
	return 0
}

// median is the median per-request decode speed (agentSpeed) of model's
// fresh nodes, from the peers listing (peers); ok is false with fewer
// than min_peers + 1 nodes (the node and its peers).
func (a *HAProxyAgent) median(ctx context.Context, model string, now time.Time) (float64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.peers(ctx, now) {
		return 0, false
	}
	med, ok := a.medians[model]
	return med, ok
}

// routablePeer reports whether a fresh node serving model other than node
// is routable, from the peers listing (peers); true when the store cannot
// be read (the caller then keeps its drain).
func (a *HAProxyAgent) routablePeer(ctx context.Context, model, node string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.peers(ctx, now) {
		return true
	}
	for id := range a.routable[model] {
		if id != node {
			return true
		}
	}
	return false
}

// peers lists the store, at most every haproxyPeersEvery, into the model
// groups' median decode speeds and their routable fresh nodes; false when
// the store cannot be read. a.mu is held.
func (a *HAProxyAgent) peers(ctx context.Context, now time.Time) bool {
	if a.medians != nil && now.Sub(a.peersAt) < haproxyPeersEvery && !now.Before(a.peersAt) {
		return true
	}
	recs, err := a.s.list(ctx)
	if err != nil {
		return false
	}
	minPeers := max(a.s.cfg.Thresholds.MinPeers, 2)
	speeds := map[string][]float64{}
	a.routable = map[string]map[string]bool{}
	for _, r := range recs {
		m := r.Metrics
		if _, stale := metrics.Staleness(m.GetObservedAt().AsTime(), now, a.s.cfg.StaleAfter); m == nil || stale {
			continue
		}
		mod := r.Node.GetModel()
		if d, _ := store.Decide(r, now, a.s.cfg.StaleAfter); d == store.Routable {
			if a.routable[mod] == nil {
				a.routable[mod] = map[string]bool{}
			}
			a.routable[mod][r.Node.GetId()] = true
		}
		if speed, ok := agentSpeed(m); ok {
			speeds[mod] = append(speeds[mod], speed)
		}
	}
	a.medians = map[string]float64{}
	for mod, v := range speeds {
		if len(v) < minPeers+1 {
			continue
		}
		slices.Sort(v)
		med := v[len(v)/2]
		if len(v)%2 == 0 {
			med = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		a.medians[mod] = med
	}
	a.peersAt = now
	return true
}
