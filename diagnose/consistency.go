package diagnose

import (
	"math"
	"strconv"

	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Consistency checks: figures that contradict each other or themselves.
// Each check that fires puts one line in the verdict's evidence saying what
// llmdiag read instead, a note on the findings it affects, and takes
// inconsistentWeight off the confidence (docs/verdict-rules.md,
// "Contradictory inputs"):
//
//   - a negative rate or gauge (a rate taken across a counter reset, or a
//     broken gauge) is read as unknown;
//   - KV pressure above 1 is read as 1 up to 1+kvOverSlack (accounting
//     slack), and as unknown beyond (not a share of the cache: a sum over
//     ranks, or a percentage);
//   - running reading 0 now and at the stuckRunningRefreshes refreshes
//     before, while the generation rate rose between them, is read as
//     unknown (see stuckRunning);
//   - a mean TTFT below the mean queue time, which TTFT should include: at
//     ttftExclusionRatio × or more the engine's TTFT leaves the queue out,
//     and the wait for the first token is read as queue time + TTFT; closer
//     than that the two histograms count different requests, and queue
//     time is read as all of TTFT.
const (
	// inconsistentWeight is what each check that fires takes off the
	// confidence, as much as an unexplained finding (unexplainedWeight):
	// the verdict rests on figures that contradict each other.
	inconsistentWeight = 0.1
	// kvOverSlack is how far above 1 KV pressure may read and still be
	// taken as a full cache.
	kvOverSlack = 0.05
	// ttftExclusionRatio is the mean queue time, as a multiple of the mean
	// TTFT, from which TTFT is taken to leave the queue out.
	ttftExclusionRatio = 2
	// stuckRunningRefreshes is how many refreshes before the current one
	// running must read 0 in too, with tokens coming out, to contradict
	// the generation rate.
	stuckRunningRefreshes = 3
	// riseSlack is the relative rise of a window's generation rate that
	// counts as tokens generated (history points keep float32 precision).
	riseSlack = 1e-3
)

// gaugeField is one optional reading of NodeMetrics, with the name the
// texts give it and the findings it feeds.
type gaugeField struct {
	name  msg
	get   func(m *llmdiagv1.NodeMetrics) **float64
	feeds []llmdiagv1.Indicator
}

// gaugeFields are the readings that are never negative.
var gaugeFields = [...]gaugeField{
	{nameQueue, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.Queue },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_QUEUE, llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO}},
	{nameRunning, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.Running },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_DECODE_SPEED}},
	{nameRatio, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.QueueRunningRatio },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO}},
	{nameKV, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.KvPressure },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_KV_PRESSURE}},
	{nameKVCapacity, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.KvCapacityTokens }, nil},
	{namePrompt, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.PromptTokensPerSecond },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO}},
	{nameGeneration, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.GenerationTokensPerSecond },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, llmdiagv1.Indicator_INDICATOR_DECODE_SPEED, llmdiagv1.Indicator_INDICATOR_PREFILL_DECODE_RATIO}},
	{nameDecodeSpeed, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.DecodeTokensPerSecondPerRequest },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_DECODE_SPEED}},
	{namePreemptions, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.PreemptionsPerSecond },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_PREEMPTIONS}},
	{nameFinished, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.RequestsPerSecond },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_ABORTS}},
	{nameAborts, func(m *llmdiagv1.NodeMetrics) **float64 { return &m.AbortedRequestsPerSecond },
		[]llmdiagv1.Indicator{llmdiagv1.Indicator_INDICATOR_ABORTS}},
}

// negativeReading is a reading below 0, read as unknown.
type negativeReading struct {
	field gaugeField
	v     float64
}

// consistency is what the checks found in one input.
type consistency struct {
	negatives []negativeReading
	// kvRead is KV pressure as read when above 1: kvClamped when read as
	// 1, else read as unknown.
	kvRead    float64
	kvClamped bool
	// runningStuck: running read 0 now and before while tokens came out;
	// genNow is the generation rate now.
	runningStuck bool
	genNow       float64
	// ttftBelowQueue: the mean TTFT is below the mean queue time;
	// ttftExcludesQueue: by ttftExclusionRatio or more.
	ttftBelowQueue, ttftExcludesQueue bool
	ttftMean, queueMean               float64
}

// consistent runs the checks on in.Metrics (fresh, from a node that
// answers) and returns the metrics as the rules should read them: a copy
// with what the checks read differently, or in.Metrics itself when nothing
// fired. in is not modified.
func consistent(in Input) (*llmdiagv1.NodeMetrics, consistency) {
	m := in.Metrics
	var c consistency
	var out *llmdiagv1.NodeMetrics
	edit := func() *llmdiagv1.NodeMetrics {
		if out == nil {
			out = proto.Clone(m).(*llmdiagv1.NodeMetrics)
		}
		return out
	}
	for _, g := range gaugeFields {
		if v := *g.get(m); v != nil && *v < 0 {
			c.negatives = append(c.negatives, negativeReading{g, *v})
			*g.get(edit()) = nil
		}
	}
	if v := m.KvPressure; v != nil && *v > 1 {
		c.kvRead = *v
		if *v <= 1+kvOverSlack {
			c.kvClamped = true
			edit().KvPressure = ptr(1)
		} else {
			edit().KvPressure = nil
		}
	}
	if c.runningStuck = stuckRunning(m, in.History); c.runningStuck {
		c.genNow = m.GetGenerationTokensPerSecond()
		e := edit()
		e.Running, e.DecodeTokensPerSecondPerRequest = nil, nil
		// The reported ratio divides by the same gauge; with nothing
		// waiting it is 0 whatever runs.
		e.QueueRunningRatio = nil
		if q := known(e.Queue); q.ok && q.v == 0 {
			e.QueueRunningRatio = ptr(0)
		}
	}
	if out != nil {
		m = out
	}
	ttft, queue := distMean(m.GetTtft()), distMean(m.GetQueueTime())
	if ttft.ok && queue.ok && ttft.v < queue.v {
		c.ttftBelowQueue, c.ttftMean, c.queueMean = true, ttft.v, queue.v
		c.ttftExcludesQueue = queue.v >= ttftExclusionRatio*ttft.v
	}
	return m, c
}

// stuckRunning reports whether running contradicts the generation rate:
// running reads 0 now and at each of the stuckRunningRefreshes refreshes
// before (up, with a generation rate above 0), and the window's generation
// rate rose between two of them. A window's rate rises only when tokens are
// generated, so tokens came out while every reading said nothing ran. A
// node that has just gone idle reads running 0 with a window rate above 0
// too, but its rate only falls or holds; one refresh of zeros is never
// enough. Requests shorter than a refresh under a trickle of traffic can
// still fire it; reading running as unknown costs them nothing, since
// running 0 gives no per-request decode speed either.
func stuckRunning(m *llmdiagv1.NodeMetrics, points []Point) bool {
	running, gen := known(m.Running), known(m.GenerationTokensPerSecond)
	if !running.ok || running.v != 0 || !gen.ok || gen.v <= 0 {
		return false
	}
	rates := []float64{gen.v} // newest first
	ts := m.GetObservedAt()
	for i := len(points) - 1; i >= 0 && len(rates) <= stuckRunningRefreshes; i-- {
		pt := points[i]
		if ts != nil && !pt.At.Before(ts.AsTime()) {
			continue
		}
		r, g := known(pt.Running), known(pt.GenerationRate)
		if !pt.Up || !r.ok || r.v != 0 || !g.ok || g.v <= 0 {
			return false
		}
		rates = append(rates, g.v)
	}
	if len(rates) <= stuckRunningRefreshes {
		return false
	}
	for i := 0; i+1 < len(rates); i++ {
		if rates[i] > rates[i+1]*(1+riseSlack) {
			return true
		}
	}
	return false
}

// fired counts the checks that fired.
func (c consistency) fired() int {
	n := 0
	for _, b := range []bool{len(c.negatives) > 0, c.kvRead > 1, c.runningStuck, c.ttftBelowQueue} {
		if b {
			n++
		}
	}
	return n
}

// firstTokenWait is the mean wait for the first token: the mean TTFT, plus
// the mean queue time where TTFT leaves the queue out.
func (f *facts) firstTokenWait() opt {
	if f.checks.ttftExcludesQueue && f.ttftMean.ok && f.queueTimeMean.ok {
		return opt{v: f.ttftMean.v + f.queueTimeMean.v, ok: true}
	}
	return f.ttftMean
}

// firstTokenStatus grades the wait for the first token: the TTFT P99, and
// where TTFT leaves the queue out, the queue time P99 too (the wait's P99
// is at least either).
func (f *facts) firstTokenStatus() llmdiagv1.Status {
	s := f.ttftStatus()
	if !f.checks.ttftExcludesQueue || f.queueTimeP99 == nil {
		return s
	}
	q := grade(f.queueTimeP99.GetValue(), f.t.TTFTP99Warn.Seconds(), f.t.TTFTP99Crit.Seconds())
	if s == statusUnknown {
		return q
	}
	return worse(s, q)
}

// queueTimeSplit is the evidence line splitting the wait for the first
// token into queue time and the rest.
func (f *facts) queueTimeSplit(p printer) string {
	warn := exactPercent(f.t.QueueTimeShareWarn)
	if f.checks.ttftExcludesQueue {
		return p.f(evQueueTimeSplitExcluded, p.seconds(f.queueTimeMean.v), p.seconds(f.ttftMean.v),
			p.seconds(f.firstTokenWait().v), percent(f.queueTimeShare().v), warn)
	}
	return p.f(evQueueTimeSplit, p.seconds(f.queueTimeMean.v), p.seconds(f.ttftMean.v),
		p.seconds(math.Max(f.ttftMean.v-f.queueTimeMean.v, 0)), warn)
}

// contradiction is one check that fired: its line in the verdict's
// evidence, and the note each affected finding carries.
type contradiction struct {
	evidence string
	notes    map[llmdiagv1.Indicator][]string
}

// contradictions words every check that fired.
func (f *facts) contradictions(p printer) []contradiction {
	c := f.checks
	var out []contradiction
	each := func(line string, inds ...llmdiagv1.Indicator) contradiction {
		x := contradiction{evidence: line, notes: map[llmdiagv1.Indicator][]string{}}
		for _, ind := range inds {
			x.notes[ind] = append(x.notes[ind], line)
		}
		return x
	}
	if len(c.negatives) > 0 {
		x := contradiction{notes: map[llmdiagv1.Indicator][]string{}}
		var items []string
		for _, n := range c.negatives {
			name, v := p.f(n.field.name), strconv.FormatFloat(n.v, 'g', 3, 64)
			items = append(items, name+" "+v)
			for _, ind := range n.field.feeds {
				x.notes[ind] = append(x.notes[ind], p.f(noteNegative, name, v))
			}
		}
		x.evidence = p.f(evNegative, p.join(items))
		out = append(out, x)
	}
	if c.kvRead > 1 {
		id := evKVOverUnknown
		if c.kvClamped {
			id = evKVOverClamped
		}
		out = append(out, each(p.f(id, percent(c.kvRead)), llmdiagv1.Indicator_INDICATOR_KV_PRESSURE))
	}
	if c.runningStuck {
		out = append(out, each(p.f(evRunningStuck, stuckRunningRefreshes, rate(c.genNow)),
			llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE,
			llmdiagv1.Indicator_INDICATOR_DECODE_SPEED))
	}
	if c.ttftBelowQueue {
		id := evTTFTBelowQueue
		if c.ttftExcludesQueue {
			id = evTTFTExcludesQueue
		}
		out = append(out, each(p.f(id, p.seconds(c.ttftMean), p.seconds(c.queueMean)),
			llmdiagv1.Indicator_INDICATOR_QUEUE_TIME, llmdiagv1.Indicator_INDICATOR_TTFT_P99))
	}
	return out
}

// noteContradictions puts each contradiction in the verdict's evidence and
// on the findings it affects, and lowers the confidence (not that of
// NO_DATA, which says nothing can be judged). A finding UNKNOWN only for
// want of the figure a check discarded says so instead of blaming the
// engine.
func (f *facts) noteContradictions(p printer, findings []*llmdiagv1.Finding, v *verdict) {
	cs := f.contradictions(p)
	if len(cs) == 0 {
		return
	}
	generic := f.unknown(p)
	for _, c := range cs {
		v.evidence = append(v.evidence, c.evidence)
		for _, x := range findings {
			notes := c.notes[x.GetIndicator()]
			if len(notes) == 0 {
				continue
			}
			x.Evidence = append(x.Evidence, notes...)
			if x.GetStatus() == statusUnknown && x.GetConclusion() == generic {
				x.Conclusion = p.f(unknownInconsistent, notes[0])
			}
		}
	}
	if v.cause != llmdiagv1.Cause_CAUSE_NO_DATA {
		v.confidence = math.Max(minConfidence, v.confidence-inconsistentWeight*float64(len(cs)))
	}
}
