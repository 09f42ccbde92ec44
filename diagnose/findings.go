package diagnose

import (
	"math"
	"strings"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

const (
	statusOK      = llmdiagv1.Status_STATUS_OK
	statusWarn    = llmdiagv1.Status_STATUS_WARN
	statusCrit    = llmdiagv1.Status_STATUS_CRIT
	statusUnknown = llmdiagv1.Status_STATUS_UNKNOWN
)

// coreIndicators are the six core rows, in order, with their names: the
// table of the worked example in docs/verdict-rules.md.
var coreIndicators = [...]struct {
	ind  llmdiagv1.Indicator
	name msg
}{
	{llmdiagv1.Indicator_INDICATOR_KV_PRESSURE, nameKV},
	{llmdiagv1.Indicator_INDICATOR_QUEUE, nameQueue},
	{llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, nameRatio},
	{llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE, namePrompt},
	{llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, nameGeneration},
	{llmdiagv1.Indicator_INDICATOR_E2E_P99, nameE2EP99},
}

func finding(p printer, ind llmdiagv1.Indicator, name msg, value string, s llmdiagv1.Status, conclusion string, evidence ...string) *llmdiagv1.Finding {
	return &llmdiagv1.Finding{
		Indicator:  ind,
		Name:       p.f(name),
		Value:      value,
		Status:     s,
		Conclusion: conclusion,
		Evidence:   evidence,
	}
}

// unknownFindings is the six core rows, all UNKNOWN for the same reason.
func unknownFindings(p printer, conclusion string) []*llmdiagv1.Finding {
	out := make([]*llmdiagv1.Finding, 0, len(coreIndicators)+1)
	for _, c := range coreIndicators {
		out = append(out, finding(p, c.ind, c.name, "", statusUnknown, conclusion))
	}
	return out
}

// grade compares v with a warn and a crit limit.
func grade(v, warn, crit float64) llmdiagv1.Status {
	switch {
	case v >= crit:
		return statusCrit
	case v >= warn:
		return statusWarn
	}
	return statusOK
}

// elevated reports whether s is WARN or CRIT. Status values are not ordered
// by severity beyond CRIT: UNKNOWN is not elevated.
func elevated(s llmdiagv1.Status) bool { return s == statusWarn || s == statusCrit }

// worse returns the more severe of two OK/WARN/CRIT statuses.
func worse(a, b llmdiagv1.Status) llmdiagv1.Status {
	if b > a && b <= statusCrit {
		return b
	}
	return a
}

// findings returns the six core rows, then the further indicators in a
// fixed order, each UNKNOWN when it cannot be read (per-request decode
// speed, prefill/decode ratio, queue time, inter-token latency, aborts, the
// E2E trend, the data's age), with rows that appear only when they carry
// information in between: TTFT P99 when WARN or CRIT, preemptions when above
// 0, the peer comparison when there are enough peers, scrape errors.
func (f *facts) findings(p printer) []*llmdiagv1.Finding {
	out := []*llmdiagv1.Finding{
		f.kvFinding(p),
		f.queueFinding(p),
		f.ratioFinding(p),
		f.promptFinding(p),
		f.generationFinding(p),
		f.e2eFinding(p),
	}
	if elevated(f.ttftStatus()) {
		out = append(out, f.ttftFinding(p))
	}
	out = append(out,
		f.decodeSpeedFinding(p),
		f.prefillDecodeFinding(p),
		f.queueTimeFinding(p),
		f.interTokenFinding(p),
		f.abortsFinding(p),
	)
	if f.preempt.ok && f.preempt.v > 0 {
		out = append(out, f.preemptionFinding(p))
	}
	if f.stall.on {
		out = append(out, f.progressFinding(p))
	}
	out = append(out, f.trendFinding(p))
	out = append(out, f.effectFindings(p)...)
	if f.peer.peers > 0 {
		out = append(out, f.peersFinding(p))
	}
	out = append(out, f.stalenessFinding(p))
	out = append(out, f.gpuFindings(p)...)
	if len(f.m.GetErrors()) > 0 {
		out = append(out, scrapeFinding(p, f.m, statusWarn, scrapeErrors))
	}
	return f.roleFindings(p, out)
}

// coreKnown counts the core indicators whose value is known.
func (f *facts) coreKnown() int {
	n := 0
	for _, ok := range []bool{f.kv.ok, f.queue.ok, f.ratio.ok, f.prompt.ok, f.gen.ok, f.e2eP99 != nil} {
		if ok {
			n++
		}
	}
	return n
}

// unknown is the conclusion for an indicator whose value is absent.
func (f *facts) unknown(p printer) string {
	if errs := f.m.GetErrors(); len(errs) > 0 {
		return p.f(unknownErrors, quoteErrors(errs))
	}
	if len(f.m.GetWarnings()) > 0 {
		// An exposition's invalid family is left out (engine.Parse).
		return p.f(unknownWarned)
	}
	return p.f(unknownNotExposed)
}

func (f *facts) kvFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_KV_PRESSURE, nameKV
	if !f.kv.ok {
		return finding(p, ind, name, "", statusUnknown, f.unknown(p))
	}
	t, hold := f.t, f.hist.kvHold
	s := grade(f.kv.v, t.KVWarn, t.KVCrit)
	var c msg
	var args []any
	switch {
	case f.offloadByDesign():
		s, c, args = statusOK, kvOffload, []any{f.offloadTier()}
	case hold.rising():
		// At the critical level, not yet for RoutingHold refreshes.
		s, c, args = statusWarn, kvRising, []any{hold.streak, t.RoutingHold}
	case hold.dipping():
		s, c, args = statusCrit, kvHeld, []any{t.RoutingHold}
	case s == statusCrit && f.preempt.ok && f.preempt.v > 0:
		c = kvCritPreempt
	case s == statusCrit:
		c = kvCrit
	case s == statusWarn:
		c = kvWarn
	case f.kv.v >= t.KVSaturated:
		c = kvBusy
	default:
		c = kvOK
	}
	ev := []string{p.f(evKV, percent(f.kv.v), exactPercent(t.KVWarn), exactPercent(t.KVCrit))}
	if f.kvCapacity.ok {
		ev = append(ev, p.f(evKVCapacity, tokens(f.kvCapacity.v)))
	}
	if f.hist.kv.known > 1 {
		ev = append(ev, f.episodeEvidence(p, f.hist.kv, p.f(condKV, exactPercent(t.KVWarn))))
	}
	return finding(p, ind, name, percent(f.kv.v), s, p.f(c, args...), ev...)
}

func (f *facts) queueFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_QUEUE, nameQueue
	if !f.queue.ok {
		return finding(p, ind, name, "", statusUnknown, f.unknown(p))
	}
	t := f.t
	s, c := statusOK, queueOK
	switch {
	case f.hist.queueCritHeld:
		s, c = statusCrit, queueCrit
	case f.queue.v > t.QueueSaturated:
		s, c = statusWarn, queueWarn
	}
	ev := []string{
		p.f(evQueueRunning, count(f.queue.v), f.runningText()),
		p.f(evQueueLimits, count(t.QueueSaturated), count(t.QueueCrit), p.seconds(t.QueueCritFor.Seconds())),
	}
	if !f.hist.noHistory() {
		ev = append(ev, f.historyEvidence(p))
	}
	return finding(p, ind, name, count(f.queue.v), s, p.f(c), ev...)
}

// runningText is the running gauge, or "?" when unknown.
func (f *facts) runningText() string {
	if !f.running.ok {
		return "?"
	}
	return count(f.running.v)
}

func (f *facts) ratioFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO, nameRatio
	if !f.ratio.ok {
		return finding(p, ind, name, "", statusUnknown, f.unknown(p))
	}
	t, h := f.t, f.hist
	s, c := statusOK, ratioOK
	switch {
	case h.sustained(t) && f.loraSlots().full():
		// The backlog is requests waiting for a LoRA adapter slot
		// (cause_lora.go), not more load than the node can take.
		s, c = statusCrit, ratioLoRA
	case h.sustained(t):
		s, c = statusCrit, ratioSustained
	case h.noHistory() && f.ratio.v >= t.QueueRunningRatioWarn:
		s, c = statusWarn, ratioNoHistory
	// A ratio above the limit for one refresh with a handful waiting is
	// one of the occasional spikes a healthy node has; a queue above
	// QueueSaturated, or a ratio that outlasts a refresh, is not.
	case h.surgeNow || (f.ratio.v >= t.QueueRunningRatioWarn && h.ratio.now && h.ratio.cur >= 2):
		s, c = statusWarn, ratioBurst
	case h.spikes > 0 || f.ratio.v >= t.QueueRunningRatioWarn:
		c = ratioOKSpikes
	}
	ev := []string{p.f(evRatio, ratio(f.ratio.v), ratio(t.QueueRunningRatioWarn), ratio(t.QueueRunningRatioCrit))}
	if h.ratio.known > 1 {
		ev = append(ev, f.episodeEvidence(p, h.ratio, p.f(condRatio, ratio(t.QueueRunningRatioWarn))))
	}
	return finding(p, ind, name, ratio(f.ratio.v), s, p.f(c), ev...)
}

// historyEvidence says how often the node was queueing and how often it
// drained.
func (f *facts) historyEvidence(p printer) string {
	return f.episodeEvidence(p, f.hist.queue, p.f(condQueue, count(f.t.QueueSaturated), ratio(f.t.QueueRunningRatioCrit)))
}

// episodeEvidence quotes how one condition held over the history: "queue >
// 5 (or …) in 3 of the last 60 refreshes over 5 min: 2 episode(s), longest
// 20 s, 1 drained".
func (f *facts) episodeEvidence(p printer, e episodes, cond string) string {
	span := p.seconds(e.span().Seconds())
	if e.above == 0 {
		return p.f(evEpisodesNone, cond, e.known, span)
	}
	longest := p.seconds((time.Duration(e.longest) * f.hist.step).Seconds())
	if e.now {
		return p.f(evEpisodesNow, cond, e.above, e.known, span, e.runs, longest, e.drained)
	}
	return p.f(evEpisodes, cond, e.above, e.known, span, e.runs, longest, e.drained)
}

// heavyPrompts reports whether prompts dominate the work: the prompt token
// rate is PrefillDecodeRatioHigh × the generation rate or more, or prompts
// average HeavyPromptTokens per finished request or more.
func (f *facts) heavyPrompts() bool {
	if !f.prompt.ok || f.prompt.v == 0 {
		return false
	}
	if f.gen.ok && (f.gen.v == 0 || f.prompt.v/f.gen.v >= f.t.PrefillDecodeRatioHigh) {
		return true
	}
	return f.rps.ok && f.rps.v > 0 && f.prompt.v/f.rps.v >= f.t.HeavyPromptTokens
}

// prefillBound reports whether the evidence fits rule 6 (peers aside): a high
// TTFT tail with little queueing and heavy prompts.
//
// Queueing is read three ways: not queueing now; not mostly queue time when
// the engine splits TTFT (QueueTimeShareWarn); and, when it does not, no
// queue spikes in the history, which would account for the tail instead.
func (f *facts) prefillBound() bool {
	// A decode worker's TTFT includes the KV transfer (role.go).
	if f.decodeWorker() || !elevated(f.ttftStatus()) || f.hist.surgeNow || !f.heavyPrompts() {
		return false
	}
	if share := f.queueTimeShare(); share.ok {
		return share.v < f.t.QueueTimeShareWarn
	}
	return f.hist.surges == 0
}

// queueTimeShare is the share of the mean wait for the first token spent
// queued (firstTokenWait).
func (f *facts) queueTimeShare() opt {
	wait := f.firstTokenWait()
	if !f.queueTimeMean.ok || !wait.ok || wait.v <= 0 {
		return opt{}
	}
	return opt{v: math.Min(f.queueTimeMean.v/wait.v, 1), ok: true}
}

func (f *facts) promptFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE, namePrompt
	if !f.prompt.ok {
		return finding(p, ind, name, "", statusUnknown, f.unknown(p))
	}
	s, c := statusOK, promptOK
	switch {
	case f.prompt.v == 0:
		c = promptIdle
	case f.prefillBound():
		s, c = statusWarn, promptHeavy
	}
	var ev []string
	if f.gen.ok && f.gen.v > 0 && f.prompt.v > 0 {
		ev = append(ev, p.f(evPrefillGap, rate(f.prompt.v), rate(f.gen.v), times(f.prompt.v/f.gen.v), times(f.t.PrefillDecodeRatioHigh)))
	}
	if f.rps.ok && f.rps.v > 0 {
		ev = append(ev, p.f(evPromptPerRequest, tokens(f.prompt.v/f.rps.v), tokens(f.t.HeavyPromptTokens)))
	}
	return finding(p, ind, name, rate(f.prompt.v), s, p.f(c), ev...)
}

// slowDecode reports whether one request decodes slower than
// DecodeTokensPerRequestLow.
func (f *facts) slowDecode() bool {
	return f.perRequest.below(f.t.DecodeTokensPerRequestLow) && !(f.gen.ok && f.gen.v == 0)
}

// largeModel reports whether the profile names a model large enough to
// explain slow decode; dataParallelOnly whether it is served data-parallel
// without tensor parallelism.
func (f *facts) largeModel() bool {
	return f.profile.GetActiveParamsBillions() >= f.t.LargeModelActiveParamsBillions
}

func (f *facts) dataParallelOnly() bool {
	return f.profile.GetDataParallel() > 1 && f.profile.GetTensorParallel() <= 1
}

func (f *facts) generationFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_GENERATION_TOKEN_RATE, nameGeneration
	if !f.gen.ok {
		return finding(p, ind, name, "", statusUnknown, f.unknown(p))
	}
	value := rate(f.gen.v)
	switch {
	case f.gen.v == 0:
		return finding(p, ind, name, value, statusOK, p.f(genIdle))
	case !f.perRequest.ok:
		return finding(p, ind, name, value, statusUnknown, p.f(genPerRequestUnknown))
	}
	ev := []string{f.perRequestEvidence(p)}
	if !f.slowDecode() {
		return finding(p, ind, name, value, statusOK, p.f(genOK), ev...)
	}
	c := genSlow
	if f.largeModel() || f.dataParallelOnly() {
		c = genSlowModel
	}
	return finding(p, ind, name, value, statusWarn, p.f(c), append(ev, f.profileEvidence(p)...)...)
}

// perRequestEvidence says how fast one request decodes and how that is known.
func (f *facts) perRequestEvidence(p printer) string {
	low := rate(f.t.DecodeTokensPerRequestLow)
	v := rate(f.perRequest.v)
	switch {
	case f.gen.ok && f.running.ok && f.running.v > 0:
		return p.f(evPerRequestDerived, rate(f.gen.v), count(f.running.v), v, low)
	case f.perRequestFrom == perRequestTPOT:
		return p.f(evPerRequestTPOT, p.seconds(1/f.perRequest.v), v, low)
	case f.perRequestFrom == perRequestITL:
		return p.f(evPerRequestITL, p.seconds(1/f.perRequest.v), v, low)
	}
	return p.f(evPerRequest, v, low)
}

// profileEvidence says what the deployment profile tells about decode speed.
func (f *facts) profileEvidence(p printer) []string {
	pr := f.profile
	var ev []string
	if a := pr.GetActiveParamsBillions(); a > 0 {
		if f.largeModel() {
			ev = append(ev, p.f(evModelLarge, billions(a), billions(f.t.LargeModelActiveParamsBillions)))
		} else {
			ev = append(ev, p.f(evModelSmall, billions(a), billions(f.t.LargeModelActiveParamsBillions)))
		}
	}
	if dp := pr.GetDataParallel(); dp > 1 {
		ev = append(ev, p.f(evDataParallel, dp))
	}
	if tp := pr.GetTensorParallel(); tp > 1 {
		ev = append(ev, p.f(evTensorParallel, tp))
	}
	if ep := pr.GetExpertParallel(); ep > 1 {
		ev = append(ev, p.f(evExpertParallel, ep))
	}
	if pp := pr.GetPipelineParallel(); pp > 1 {
		ev = append(ev, p.f(evPipelineParallel, pp))
	}
	if tot, a := pr.GetTotalParamsBillions(), pr.GetActiveParamsBillions(); tot > 0 && a > 0 && tot > a {
		ev = append(ev, p.f(evMoE, billions(a), billions(tot)))
	}
	if g := pr.GetGpu(); g != "" {
		ev = append(ev, p.f(evGPU, quote(g)))
	}
	if len(ev) == 0 {
		ev = append(ev, p.f(evNoProfile))
	}
	return ev
}

func (f *facts) e2eStatus() llmdiagv1.Status {
	if f.e2eP99 == nil {
		return statusUnknown
	}
	return grade(f.e2eP99.GetValue(), f.t.E2EP99Warn.Seconds(), f.t.E2EP99Crit.Seconds())
}

func (f *facts) ttftStatus() llmdiagv1.Status {
	if f.ttftP99 == nil {
		return statusUnknown
	}
	return grade(f.ttftP99.GetValue(), f.t.TTFTP99Warn.Seconds(), f.t.TTFTP99Crit.Seconds())
}

func (f *facts) e2eFinding(p printer) *llmdiagv1.Finding {
	ind, name := llmdiagv1.Indicator_INDICATOR_E2E_P99, nameE2EP99
	if f.e2eP99 == nil {
		c := f.unknown(p)
		if f.m.GetE2E() != nil {
			c = p.f(e2eNoRequests)
		}
		return finding(p, ind, name, "", statusUnknown, c)
	}
	s := f.e2eStatus()
	c := e2eOK
	if elevated(s) {
		switch {
		case f.hist.now:
			c = e2eTailQueue
		case f.slowDecode() && f.running.ok && f.running.v > 0:
			c = e2eTailConcurrency
		case f.slowDecode():
			c = e2eTailSlowDecode
		default:
			c = e2eTail
		}
	}
	ev := []string{p.f(evLatencyLimits, p.seconds(f.t.E2EP99Warn.Seconds()), p.seconds(f.t.E2EP99Crit.Seconds()))}
	if f.e2eP50 != nil && f.e2eP50.GetValue() > 0 {
		p95 := "?"
		if f.e2eP95 != nil {
			p95 = p.seconds(f.e2eP95.GetValue())
		}
		ev = append(ev, p.f(evTail, p.seconds(f.e2eP50.GetValue()), p95, times(f.e2eP99.GetValue()/f.e2eP50.GetValue())))
	}
	return finding(p, ind, name, p.percentile(f.e2eP99), s, p.f(c), ev...)
}

func (f *facts) ttftFinding(p printer) *llmdiagv1.Finding {
	s := f.ttftStatus()
	c := ttftWarn
	if s == statusCrit {
		c = ttftCrit
	}
	ev := []string{p.f(evLatencyLimits, p.seconds(f.t.TTFTP99Warn.Seconds()), p.seconds(f.t.TTFTP99Crit.Seconds()))}
	return finding(p, llmdiagv1.Indicator_INDICATOR_TTFT_P99, nameTTFTP99, p.percentile(f.ttftP99), s, p.f(c), ev...)
}

func (f *facts) preemptionFinding(p printer) *llmdiagv1.Finding {
	s, c := statusWarn, preemptSome
	if f.preempt.v > f.t.PreemptionsPerSecond {
		s, c = statusCrit, preemptMany
	}
	ev := []string{p.f(evPreemptLimit, perSecond(f.t.PreemptionsPerSecond))}
	return finding(p, llmdiagv1.Indicator_INDICATOR_PREEMPTIONS, namePreemptions, perSecond(f.preempt.v), s, p.f(c), ev...)
}

// scrapeFinding reports problems reading the node, quoting each error.
func scrapeFinding(p printer, m *llmdiagv1.NodeMetrics, s llmdiagv1.Status, c msg) *llmdiagv1.Finding {
	return finding(p, llmdiagv1.Indicator_INDICATOR_SCRAPE, nameScrape, p.f(valueErrors, len(m.GetErrors())), s, p.f(c), errorEvidence(p, m)...)
}

// maxQuoted bounds one quoted error; errors come from outside.
const maxQuoted = 200

// quote returns an outside error message fit to quote: one line, bounded.
func quote(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxQuoted {
		s = string(r[:maxQuoted]) + "…"
	}
	return "“" + s + "”"
}

// quoteErrors quotes every error, separated by semicolons.
func quoteErrors(errs []string) string {
	q := make([]string, len(errs))
	for i, e := range errs {
		q[i] = quote(e)
	}
	return strings.Join(q, "; ")
}
