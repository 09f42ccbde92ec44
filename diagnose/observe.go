package diagnose

import (
	"math"
	"slices"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
)

// opt is an optional reading: ok is false when the value is unknown.
type opt struct {
	v  float64
	ok bool
}

// known reads an optional field; NaN, ±Inf and negative values are unknown.
func known(p *float64) opt {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) || *p < 0 {
		return opt{}
	}
	return opt{v: *p, ok: true}
}

// below reports whether o is known and below limit.
func (o opt) below(limit float64) bool { return o.ok && o.v < limit }

// perRequestSource says where the per-request decode speed came from.
type perRequestSource int

const (
	perRequestReported perRequestSource = iota // decode_tokens_per_second_per_request
	perRequestDerived                          // generation rate ÷ running
	perRequestTPOT                             // 1 / P50 time per output token
	perRequestITL                              // 1 / P50 inter-token latency
)

// facts is what the rules read, gathered once from the input.
type facts struct {
	t       Thresholds
	m       *llmdiagv1.NodeMetrics // as the consistency checks read it
	profile *llmdiagv1.Profile     // never nil
	checks  consistency
	// trendHint is Input.Trend.
	trendHint *TrendHint

	kv, kvCapacity, queue, running, ratio opt
	prompt, gen, perRequest, preempt, rps opt
	aborted                               opt
	perRequestFrom                        perRequestSource
	// staleness is the data's age in seconds.
	staleness opt
	// ttftMean and queueTimeMean are the window's means in seconds.
	ttftMean, queueTimeMean opt

	e2eP50, e2eP95, e2eP99 *llmdiagv1.Percentile // nil when unknown
	ttftP99                *llmdiagv1.Percentile
	itlP50, itlP99         *llmdiagv1.Percentile
	queueTimeP99           *llmdiagv1.Percentile

	hist history
	// stall is the engine's progress over the refreshes (cause_stalled.go).
	stall stall
	// peer is the peer comparison reported (the larger ratio); peers holds
	// one per latency metric with enough peers, E2E first.
	peer  peerComparison
	peers []peerComparison
}

// history is what the refresh history says about the queue, the
// queue/running ratio, KV pressure and the mean E2E latency.
type history struct {
	points   int           // refreshes with a known queue, the current one included
	queueing int           // of which queueing
	span     time.Duration // from the oldest such refresh to now
	now      bool          // queueing in the current window
	spikes   int           // queueing episodes that drained
	// surgeNow and surges are now and spikes for the queue alone above
	// QueueSaturated: what a burst is. A queue/running ratio at its limit
	// with a handful waiting (2 behind 1 running) counts towards sustained
	// queueing, but is too small a thing to call a burst.
	surgeNow bool
	surges   int
	// queueCritHeld: the queue has stayed above QueueCrit for QueueCritFor,
	// or is above it now with no history to say otherwise.
	queueCritHeld bool

	// step is the usual gap between refreshes (the median gap).
	step time.Duration
	// queue counts refreshes queueing (as t.queueing says), ratio those
	// with queue/running at QueueRunningRatioWarn or above, kv those with KV
	// pressure at KVWarn or above.
	queue, ratio, kv episodes
	// surge counts refreshes with the queue above QueueSaturated.
	surge episodes

	trend trend

	// queueHold and kvHold are the two halves of saturation, with
	// hysteresis (hold); saturated is either, the node not routable.
	queueHold, kvHold hold
	saturated         bool
	// score is the verdict's load score (loadScore).
	score float64
	// at is the current refresh's time.
	at time.Time
}

// episodes is how one condition held over the history: in how many
// refreshes, in how many separate runs, the longest run, and how many runs
// ended (drained) before the current window.
type episodes struct {
	known, above  int
	runs, drained int
	longest, cur  int // refreshes
	now           bool
	first         time.Time
	firstSet      bool
	last          time.Time
}

// add records one refresh; an unknown reading neither extends nor ends a run.
func (e *episodes) add(at time.Time, known, above bool) {
	if !known {
		return
	}
	if !e.firstSet {
		e.first, e.firstSet = at, true
	}
	e.last = at
	e.known++
	e.now = above
	if !above {
		if e.cur > 0 {
			e.drained++
		}
		e.cur = 0
		return
	}
	e.above++
	if e.cur == 0 {
		e.runs++
	}
	e.cur++
	e.longest = max(e.longest, e.cur)
}

// span is the time the known refreshes cover.
func (e episodes) span() time.Duration { return e.last.Sub(e.first) }

// trend is the mean E2E latency's drift over the history, fitted with the
// Theil–Sen estimator (the median of pairwise slopes), robust to the odd
// outlying refresh.
type trend struct {
	points   int
	span     time.Duration
	from, to float64 // fitted mean at the oldest point and now, seconds
	change   float64 // (to - from) / from
	ok       bool    // enough points to fit
}

// minTrendPoints is the number of refreshes with a known mean E2E latency a
// trend needs. Three points fit any line badly; five give the Theil–Sen
// median ten pairwise slopes.
const minTrendPoints = 5

// rising reports a rise of at least E2EMeanRise over the span.
func (tr trend) rising(t Thresholds) bool { return tr.ok && tr.change >= t.E2EMeanRise }

// falling reports the mirror of rising: a fall to 1/(1+E2EMeanRise) of the
// starting level or below (−33% for a 50% rise).
func (tr trend) falling(t Thresholds) bool {
	return tr.ok && t.E2EMeanRise > 0 && tr.change <= -t.E2EMeanRise/(1+t.E2EMeanRise)
}

// theilSen fits v against x (seconds since at0, a time in seconds) and
// returns the fitted values at x[0] and x[n-1] and the relative change
// between them. buf is scratch; hint is medianSlope's.
func theilSen(x, v []float64, at0 float64, buf *[]float64, hint *TrendHint) (from, to, change float64, ok bool) {
	n := len(x)
	if n < 2 {
		return 0, 0, 0, false
	}
	slope, any := medianSlope(x, v, at0, buf, hint)
	if !any {
		return 0, 0, 0, false
	}
	res := slices.Grow((*buf)[:0], n)[:n]
	for i := range n {
		res[i] = v[i] - slope*x[i]
	}
	from = medianOf(res) + slope*x[0]
	to = from + slope*(x[n-1]-x[0])
	base := from
	if base <= 0 {
		base = median(v)
	}
	if base <= 0 {
		return 0, 0, 0, false
	}
	return from, to, (to - from) / base, true
}

// noHistory reports whether only the current window is known.
func (h history) noHistory() bool { return h.points <= 1 }

// fraction is the share of refreshes that were queueing.
func (h history) fraction() float64 {
	if h.points == 0 {
		return 0
	}
	return float64(h.queueing) / float64(h.points)
}

// sustained reports whether the queue is high now and over most of the
// history (or now, with no history to say otherwise).
func (h history) sustained(t Thresholds) bool {
	return h.now && (h.noHistory() || h.fraction() >= t.SustainedFraction)
}

// peerComparison is how the node's latency tail compares with its peers'.
type peerComparison struct {
	peers    int                 // usable peers for the metric reported
	metric   llmdiagv1.Indicator // INDICATOR_E2E_P99 or INDICATOR_TTFT_P99
	own      float64             // seconds
	median   float64             // seconds
	ratio    float64             // own / median
	ownLoad  float64
	peerLoad float64 // median load score of the peers
	outlier  bool
	// groupMedian is the median over the whole group, the node included,
	// of groupN nodes.
	groupMedian float64
	groupN      int
}

func observe(in Input, t Thresholds) *facts {
	m, checks := consistent(in)
	f := &facts{t: t, m: m, profile: in.Profile, checks: checks, trendHint: in.Trend}
	if f.profile == nil {
		f.profile = &llmdiagv1.Profile{}
	}
	f.kv = known(m.KvPressure)
	f.kvCapacity = known(m.KvCapacityTokens)
	f.queue = known(m.Queue)
	f.running = known(m.Running)
	f.ratio = queueRatio(f.queue, f.running, known(m.QueueRunningRatio))
	f.prompt = known(m.PromptTokensPerSecond)
	f.gen = known(m.GenerationTokensPerSecond)
	f.preempt = known(m.PreemptionsPerSecond)
	f.rps = known(m.RequestsPerSecond)
	f.aborted = known(m.AbortedRequestsPerSecond)
	if st := m.GetStaleness(); st != nil {
		f.staleness = opt{v: st.AsDuration().Seconds(), ok: st.AsDuration() >= 0}
	}
	f.ttftMean = distMean(m.GetTtft())
	f.queueTimeMean = distMean(m.GetQueueTime())
	f.perRequest, f.perRequestFrom = perRequestDecode(m)

	f.e2eP50 = percentile(m.GetE2E(), 0.50)
	f.e2eP95 = percentile(m.GetE2E(), 0.95)
	f.e2eP99 = percentile(m.GetE2E(), 0.99)
	f.ttftP99 = percentile(m.GetTtft(), 0.99)
	f.itlP50 = percentile(m.GetInterToken(), 0.50)
	f.itlP99 = percentile(m.GetInterToken(), 0.99)
	f.queueTimeP99 = percentile(m.GetQueueTime(), 0.99)

	f.hist = f.readHistory(in.History)
	f.stall = f.readStall(in.History)
	f.discountOffload()
	if in.Group != nil {
		f.peer, f.peers = in.Group.compare(m, t)
	} else {
		f.peer, f.peers = comparePeers(m, in.Peers, t)
	}
	return f
}

// distMean is d's mean: as reported, else sum ÷ count; unknown without
// observations.
func distMean(d *llmdiagv1.Distribution) opt {
	if d == nil {
		return opt{}
	}
	if v := known(d.Mean); v.ok {
		return v
	}
	if d.GetCount() > 0 {
		return known(ptr(d.GetSum() / d.GetCount()))
	}
	return opt{}
}

func ptr(v float64) *float64 { return &v }

// queueRatio is queue ÷ running from the gauges when both are known (0 when
// both are 0, +Inf when only running is 0), else the reported ratio.
func queueRatio(queue, running, reported opt) opt {
	if !queue.ok || !running.ok {
		return reported
	}
	switch {
	case queue.v == 0:
		return opt{v: 0, ok: true}
	case running.v == 0:
		return opt{v: math.Inf(1), ok: true}
	}
	return opt{v: queue.v / running.v, ok: true}
}

// perRequestDecode is the decode speed one request sees, in tok/s, as
// metrics.PerRequestDecode reads it (so that it is the
// decode_tokens_per_second_per_request `llmdiag metrics` shows), and where
// it came from.
func perRequestDecode(m *llmdiagv1.NodeMetrics) (opt, perRequestSource) {
	v, from := metrics.PerRequestDecode(m)
	switch from {
	case metrics.DecodeDerived:
		return opt{v: v, ok: true}, perRequestDerived
	case metrics.DecodeTPOT:
		return opt{v: v, ok: true}, perRequestTPOT
	case metrics.DecodeITL:
		return opt{v: v, ok: true}, perRequestITL
	case metrics.DecodeReported:
		return opt{v: v, ok: true}, perRequestReported
	}
	return opt{}, 0
}

// percentile returns the q-quantile of d, or nil when d does not carry it or
// the window has no observations.
func percentile(d *llmdiagv1.Distribution, q float64) *llmdiagv1.Percentile {
	for _, p := range d.GetPercentiles() {
		if math.Abs(p.GetQuantile()-q) < 1e-9 {
			if math.IsNaN(p.GetValue()) || math.IsInf(p.GetValue(), 0) || p.GetValue() < 0 {
				return nil
			}
			return p
		}
	}
	return nil
}

// queueing reports whether a refresh counts as queueing: more waiting than
// QueueSaturated, or at least one waiting and a queue/running ratio at
// QueueRunningRatioCrit or above.
func (t Thresholds) queueing(queue, ratio opt) bool {
	if queue.ok && queue.v > t.QueueSaturated {
		return true
	}
	return ratio.ok && ratio.v >= t.QueueRunningRatioCrit && (!queue.ok || queue.v >= 1)
}

// readHistory walks the refreshes before the current window, then the
// current window itself.
func (f *facts) readHistory(points []Point) history {
	t := f.t
	sc := historyScratches.Get().(*historyScratch)
	defer historyScratches.Put(sc)
	h, steps := f.readHolds(points, sc)
	now := h.at
	critSince, critRun := time.Time{}, false
	xs, means, gaps := slices.Grow(sc.xs[:0], len(steps)), slices.Grow(sc.means[:0], len(steps)), slices.Grow(sc.gaps[:0], len(steps))
	defer func() { sc.xs, sc.means, sc.gaps = xs[:0], means[:0], gaps[:0] }()
	// The trend's x are seconds since the first step, each time as a float
	// less the first's: exact differences (see trendFit).
	base := unixSeconds(steps[0].at)
	for i := range steps {
		s := &steps[i] // not a copy: a step is some hundred bytes
		if i > 0 {
			gaps = append(gaps, sub(s.at, steps[i-1].at).Seconds())
		}
		if s.mean.ok {
			xs = append(xs, unixSeconds(s.at)-base)
			means = append(means, s.mean.v)
		}
		h.ratio.add(s.at, s.ratio.ok, s.ratio.ok && s.ratio.v >= t.QueueRunningRatioWarn)
		h.kv.add(s.at, s.kv.ok, s.kv.ok && s.kv.v >= t.KVWarn)
		if !s.queue.ok && !s.ratio.ok {
			continue
		}
		h.queue.add(s.at, true, t.queueing(s.queue, s.ratio))
		h.surge.add(s.at, s.queue.ok, s.queue.ok && s.queue.v > t.QueueSaturated)
		if s.queue.ok && s.queue.v > t.QueueCrit {
			if !critRun {
				critSince, critRun = s.at, true
			}
		} else {
			critRun = false
		}
	}
	h.step = time.Duration(medianOf(gaps) * float64(time.Second))
	h.points, h.queueing, h.spikes = h.queue.known, h.queue.above, h.queue.drained
	h.now = h.queue.now && h.queue.last.Equal(now)
	h.surges = h.surge.drained
	h.surgeNow = h.surge.now && h.surge.last.Equal(now)
	if h.points > 0 {
		h.span = now.Sub(h.queue.first)
	}
	h.queueCritHeld = f.queue.ok && f.queue.v > t.QueueCrit &&
		(h.noHistory() || (critRun && now.Sub(critSince) >= t.QueueCritFor))

	h.trend.points = len(means)
	if len(means) >= minTrendPoints {
		h.trend.span = time.Duration((xs[len(xs)-1] - xs[0]) * float64(time.Second))
		h.trend.from, h.trend.to, h.trend.change, h.trend.ok = theilSen(xs, means, base, &sc.slopes, f.trendHint)
		h.trend.ok = h.trend.ok && h.trend.span > 0
	}
	return h
}

// unixSeconds is t in seconds since 1970 as a float64: to about a quarter
// of a microsecond in this century.
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// readHolds is the part of readHistory that routing reads (Routing, on
// every fast read): the steps (the points before now, and now), the
// saturation holds and the load score. sc is readHistory's scratch; the
// steps returned live in it.
func (f *facts) readHolds(points []Point, sc *historyScratch) (history, []histStep) {
	t := f.t
	var now time.Time
	if ts := f.m.GetObservedAt(); ts != nil {
		now = ts.AsTime()
	} else if len(points) > 0 {
		now = points[len(points)-1].At.Add(time.Nanosecond)
	}
	steps := slices.Grow(sc.steps[:0], len(points)+1)
	for _, pt := range points {
		if !pt.Up || !pt.At.Before(now) {
			continue
		}
		q, r := known(pt.Queue), known(pt.Running)
		steps = append(steps, histStep{at: pt.At, queue: q, running: r, ratio: queueRatio(q, r, opt{}), kv: known(pt.KVPressure), mean: known(pt.E2EMean)})
	}
	var mean opt
	if e := f.m.GetE2E(); e != nil {
		mean = known(e.Mean)
	}
	steps = append(steps, histStep{at: now, queue: f.queue, running: f.running, ratio: f.ratio, kv: f.kv, mean: mean})

	h := history{at: now}
	sc.queueSteps = slices.Grow(sc.queueSteps[:0], len(steps))
	sc.kvSteps = slices.Grow(sc.kvSteps[:0], len(steps))
	queueSteps, kvSteps := sc.queueSteps[:len(steps)], sc.kvSteps[:len(steps)]
	for i, s := range steps {
		queueSteps[i].at, kvSteps[i].at = s.at, s.at
		queueSteps[i].known, queueSteps[i].on = t.queueSaturated(s.queue, s.running)
		kvSteps[i].known, kvSteps[i].on = t.kvSaturated(s.kv)
	}
	h.queueHold, h.kvHold = readHold(queueSteps, t), readHold(kvSteps, t)
	h.saturated = h.queueHold.on || h.kvHold.on
	// The score reads the pressure of the last RoutingHold refreshes only.
	var recent []float64
	for _, s := range steps[max(len(steps)-max(t.RoutingHold, 1), 0):] {
		recent = append(recent, pressure(s.queue, s.running, s.kv, t))
	}
	h.score = loadScore(h.saturated, recent)
	sc.steps = steps[:0]
	return h, steps
}

// comparePeers compares the node's E2E and TTFT P99 with the median of its
// usable peers: every comparison with enough peers, E2E first, and the one to
// report (an outlier first, else the larger ratio).
func comparePeers(m *llmdiagv1.NodeMetrics, peers []*llmdiagv1.NodeMetrics, t Thresholds) (peerComparison, []peerComparison) {
	var usable []*llmdiagv1.NodeMetrics
	for _, p := range peers {
		if p == nil || !p.GetUp() || isStale(p, t) || p.GetNode() == m.GetNode() {
			continue
		}
		if p.GetModel() != "" && m.GetModel() != "" && p.GetModel() != m.GetModel() || !sameRole(p, m) {
			continue
		}
		usable = append(usable, p)
	}
	ownLoad := Pressure(m.Queue, m.Running, m.KvPressure, t)
	var best peerComparison
	var all []peerComparison
	for _, c := range []struct {
		ind  llmdiagv1.Indicator
		dist func(*llmdiagv1.NodeMetrics) *llmdiagv1.Distribution
	}{
		{llmdiagv1.Indicator_INDICATOR_E2E_P99, (*llmdiagv1.NodeMetrics).GetE2E},
		{llmdiagv1.Indicator_INDICATOR_TTFT_P99, (*llmdiagv1.NodeMetrics).GetTtft},
	} {
		own := percentile(c.dist(m), 0.99)
		if own == nil {
			continue
		}
		var vals, loads []float64
		for _, p := range usable {
			if q := percentile(c.dist(p), 0.99); q != nil {
				vals = append(vals, q.GetValue())
				loads = append(loads, Pressure(p.Queue, p.Running, p.KvPressure, t))
			}
		}
		if len(vals) < t.MinPeers {
			continue
		}
		med := median(vals)
		if med <= 0 {
			continue
		}
		pc := peerComparison{
			peers: len(vals), metric: c.ind,
			own: own.GetValue(), median: med, ratio: own.GetValue() / med,
			ownLoad: ownLoad, peerLoad: median(loads),
			groupMedian: median(append(slices.Clone(vals), own.GetValue())), groupN: len(vals) + 1,
		}
		all, best = addComparison(all, best, pc, t)
	}
	return best, all
}

// addComparison judges whether pc shows an outlier, appends it to all and
// returns the comparison to report of best and pc: an outlier first, else
// the larger ratio (best.peers == 0: none yet).
func addComparison(all []peerComparison, best, pc peerComparison, t Thresholds) ([]peerComparison, peerComparison) {
	pc.outlier = pc.ratio >= t.OutlierRatio &&
		pc.own >= t.OutlierMinLatency.Seconds() &&
		pc.ownLoad <= pc.peerLoad+t.OutlierLoadMargin
	all = append(all, pc)
	if best.peers == 0 || (pc.outlier && !best.outlier) || (pc.outlier == best.outlier && pc.ratio > best.ratio) {
		best = pc
	}
	return all, best
}

// median of vs; vs is not modified. 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
