package diagnose

import (
	"fmt"
	"testing"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// This file exports to the catalog test (claims_test.go, package
// diagnose_test, which shares the rules' fixtures) a diagnosis that records
// the catalog entries it is written from, and the check of their claims.

// ClaimReport is one diagnosis and what its claims came to.
type ClaimReport struct {
	Diagnosis *llmdiagv1.Diagnosis
	// Claiming lists the catalog entries with claims the diagnosis was
	// written from.
	Claiming []int
	// Violations describes every claim that did not hold.
	Violations []string
}

// CheckClaims diagnoses in and checks every claim of every catalog entry
// the diagnosis was written from against the facts the rules read and the
// findings the diagnosis reports: a claim about a figure whose finding is
// UNKNOWN, or that the figure contradicts, is a violation.
func CheckClaims(in Input, t Thresholds, lang llmdiagv1.Language) ClaimReport {
	var rec recorder
	d := diagnose(in, t, lang, &rec)
	r := ClaimReport{Diagnosis: d}
	var f *facts
	if m := in.Metrics; m != nil && !isStale(m, t) && m.GetUp() {
		f = observe(in, t)
	}
	rows := map[llmdiagv1.Indicator]llmdiagv1.Status{}
	for _, x := range d.GetFindings() {
		rows[x.GetIndicator()] = x.GetStatus()
	}
	seen := map[msg]bool{}
	for _, id := range rec.msgs {
		cs := catalogClaims[id]
		if len(cs) == 0 || seen[id] {
			continue
		}
		seen[id] = true
		r.Claiming = append(r.Claiming, int(id))
		for _, c := range cs {
			if why := f.violation(c, rows); why != "" {
				r.Violations = append(r.Violations, fmt.Sprintf("%q claims %v %v, but %s", catalog[id].en, c.about, c.reads, why))
			}
		}
	}
	return r
}

// ClaimingMsgs is every catalog entry with claims, by id, with its English
// text.
func ClaimingMsgs() map[int]string {
	out := map[int]string{}
	for id, cs := range catalogClaims {
		if len(cs) > 0 {
			out[int(id)] = catalog[id].en
		}
	}
	return out
}

// MsgText is catalog entry id's English text.
func MsgText(id int) string { return catalog[id].en }

// violation says why c does not hold, or "" when it does. A nil f (no
// fresh data from a node that answers) holds no claim.
func (f *facts) violation(c claim, rows map[llmdiagv1.Indicator]llmdiagv1.Status) string {
	if f == nil {
		return "the diagnosis read no fresh metrics"
	}
	if ind, ok := c.about.indicator(); ok {
		if s, present := rows[ind]; present {
			if c.reads == isUnknown && s != statusUnknown {
				return fmt.Sprintf("the %v finding is %v", ind, s)
			}
			if c.reads != isUnknown && s == statusUnknown {
				return fmt.Sprintf("the %v finding is UNKNOWN", ind)
			}
		}
	}
	known, v, high := f.figure(c.about)
	ok := false
	switch c.reads {
	case isKnown:
		ok = known
	case isUnknown:
		ok = !known
	case isAbove0:
		ok = known && v > 0
	case isZero:
		ok = known && v == 0
	case isHigh:
		ok = known && high
	case isLow:
		ok = known && !high
	}
	if ok {
		return ""
	}
	if !known {
		return "it is unknown"
	}
	return fmt.Sprintf("it reads %v (high: %v)", v, high)
}

// figure is what the facts say about s: whether it is known, its value
// where it has one, and whether it is high in the subject's sense.
func (f *facts) figure(s subject) (known bool, v float64, high bool) {
	t, h := f.t, f.hist
	o := func(x opt, high bool) (bool, float64, bool) { return x.ok, x.v, x.ok && high }
	switch s {
	case aboutKV:
		return o(f.kv, f.kv.v >= t.KVWarn)
	case aboutKVCapacity:
		return o(f.kvCapacity, false)
	case aboutQueue:
		return o(f.queue, f.queue.v > t.QueueSaturated)
	case aboutQueueing:
		return f.queue.ok || f.ratio.ok, 0, h.now
	case aboutRatio:
		return o(f.ratio, f.ratio.v >= t.QueueRunningRatioWarn)
	case aboutRunning:
		return o(f.running, false)
	case aboutWaiting:
		share := f.queueTimeShare()
		return f.queue.ok || f.ratio.ok || share.ok, 0,
			h.now || (f.queue.ok && f.queue.v > t.QueueSaturated) || (f.ratio.ok && f.ratio.v >= t.QueueRunningRatioWarn) ||
				(share.ok && share.v >= t.QueueTimeShareWarn)
	case aboutPreemptions:
		return o(f.preempt, f.preempt.v > 0)
	case aboutPrompts:
		return o(f.prompt, f.heavyPrompts())
	case aboutGeneration:
		return o(f.gen, f.gen.v > 0)
	case aboutRequests:
		return o(f.rps, f.rps.v > 0)
	case aboutDecode:
		return o(f.perRequest, f.slowDecode())
	case aboutE2E:
		return f.e2eP99 != nil, 0, elevated(f.e2eStatus())
	case aboutTTFT:
		return f.ttftP99 != nil, 0, elevated(f.ttftStatus())
	case aboutLatency:
		return f.e2eP99 != nil || f.ttftP99 != nil, 0, elevated(f.e2eStatus()) || elevated(f.ttftStatus())
	case aboutQueueTime:
		share := f.queueTimeShare()
		return o(share, share.v >= t.QueueTimeShareWarn)
	case aboutInterToken:
		return f.itlP99 != nil, 0, elevated(f.interTokenStatus())
	case aboutAborts:
		return o(f.abortFraction(), elevated(f.abortsStatus()))
	case aboutTrend:
		return h.trend.ok, h.trend.change, h.trend.rising(t)
	case aboutPeers:
		return f.peer.peers > 0, float64(f.peer.peers), f.peer.outlier
	case aboutHistory:
		return !h.noHistory(), float64(h.points), false
	case aboutQueueHold:
		return f.queue.ok, 0, h.queueHold.on
	case aboutKVHold:
		return f.kv.ok, 0, h.kvHold.on
	case aboutSpikes:
		return h.points > 0, float64(h.spikes), h.now || h.spikes > 0
	case aboutFirstToken:
		s := f.firstTokenStatus()
		return s != statusUnknown, 0, elevated(s)
	case aboutAge:
		return o(f.staleness, false)
	case aboutPrefixCache:
		r := f.m.PrefixCacheHitRate
		return r != nil, f.m.GetPrefixCacheHitRate(), r != nil && *r >= prefixHitHigh
	case aboutSpec:
		a, l := f.m.SpecDecodeAcceptanceRate, f.m.SpecDecodeAcceptLength
		return a != nil || l != nil, f.m.GetSpecDecodeAcceptanceRate(), a != nil && *a < specAcceptLow
	case aboutLoRA:
		r, w := f.m.LoraAdaptersRunning, f.m.LoraAdaptersWaiting
		return r != nil || w != nil, f.m.GetLoraAdaptersWaiting(), w != nil && *w > 0
	case aboutLoRASlots:
		l := f.loraSlots()
		return l.exported && l.named && l.max.ok, float64(len(l.running)), l.full()
	case aboutOffload:
		return f.offloadTier() != "", 0, f.offloadByDesign()
	case aboutGPUDRAM:
		d := f.m.GetGpu().DramActive
		return d != nil, f.m.GetGpu().GetDramActive(), d != nil && *d >= gpuDRAMHigh
	case aboutGPUTensor:
		x := f.m.GetGpu().TensorActive
		return x != nil, f.m.GetGpu().GetTensorActive(), x != nil && *x >= gpuTensorHigh
	case aboutGPUStarved:
		shape := f.gpuShape()
		return shape != gpuUnknown, 0, shape == gpuStarved
	case aboutGPUThrottle:
		g := f.m.GetGpu()
		return g.ClockEventMask != nil, float64(len(g.GetThrottledGpus())), f.gpuThrottled()
	case aboutGPUXID:
		g := f.m.GetGpu()
		return g.GetXidRead(), float64(len(g.GetXidErrors())), len(g.GetXidErrors()) > 0
	case aboutGPUXIDFault:
		// Read apart from xid.go: an XID the catalogue says needs a reset
		// or a reboot, seen to occur (not at the first read) within
		// gpu_xid_window.
		g := f.m.GetGpu()
		fault := false
		for _, x := range g.GetXidErrors() {
			at := x.GetOccurredAt()
			fault = fault || xidCatalog[x.GetXid()].severity == xidHardware && at != nil && !x.GetAtFirstRead() &&
				!f.m.GetObservedAt().AsTime().After(at.AsTime().Add(t.GPUXIDWindow))
		}
		return g.GetXidRead() || len(g.GetXidErrors()) > 0, 0, fault
	}
	panic(fmt.Sprintf("subject %d has no figure", s))
}

// indicator is the finding that reports s, where one does.
func (s subject) indicator() (llmdiagv1.Indicator, bool) {
	ind, ok := map[subject]llmdiagv1.Indicator{
		aboutKV:          llmdiagv1.Indicator_INDICATOR_KV_PRESSURE,
		aboutQueue:       llmdiagv1.Indicator_INDICATOR_QUEUE,
		aboutRatio:       llmdiagv1.Indicator_INDICATOR_QUEUE_RUNNING_RATIO,
		aboutPrompts:     llmdiagv1.Indicator_INDICATOR_PROMPT_TOKEN_RATE,
		aboutE2E:         llmdiagv1.Indicator_INDICATOR_E2E_P99,
		aboutTTFT:        llmdiagv1.Indicator_INDICATOR_TTFT_P99,
		aboutDecode:      llmdiagv1.Indicator_INDICATOR_DECODE_SPEED,
		aboutQueueTime:   llmdiagv1.Indicator_INDICATOR_QUEUE_TIME,
		aboutInterToken:  llmdiagv1.Indicator_INDICATOR_INTER_TOKEN,
		aboutAborts:      llmdiagv1.Indicator_INDICATOR_ABORTS,
		aboutTrend:       llmdiagv1.Indicator_INDICATOR_E2E_TREND,
		aboutPeers:       llmdiagv1.Indicator_INDICATOR_PEERS,
		aboutAge:         llmdiagv1.Indicator_INDICATOR_STALENESS,
		aboutPrefixCache: llmdiagv1.Indicator_INDICATOR_PREFIX_CACHE_HIT_RATE,
		aboutSpec:        llmdiagv1.Indicator_INDICATOR_SPEC_DECODE_ACCEPTANCE,
		aboutLoRA:        llmdiagv1.Indicator_INDICATOR_LORA_ADAPTERS,
		aboutGPUStarved:  llmdiagv1.Indicator_INDICATOR_GPU_ACTIVITY,
		aboutGPUThrottle: llmdiagv1.Indicator_INDICATOR_GPU_THROTTLING,
		aboutGPUXID:      llmdiagv1.Indicator_INDICATOR_GPU_XID,
		aboutGPUXIDFault: llmdiagv1.Indicator_INDICATOR_GPU_XID,
	}[s]
	return ind, ok
}

func (s subject) String() string {
	names := []string{"", "KV pressure", "KV capacity", "queue", "queueing", "queue/running", "running", "waiting",
		"preemptions", "prompts", "generation", "finished requests", "per-request decode", "E2E P99", "TTFT P99",
		"latency", "queue-time share", "inter-token P99", "aborts", "E2E trend", "peers", "history", "first-token wait", "queue saturation", "KV saturation", "queue spikes", "data age",
		"prefix-cache hit rate", "speculative decoding", "LoRA adapters", "LoRA adapter slots", "KV offload by design",
		"GPU DRAM active", "GPU tensor active", "GPU starved", "GPU throttling", "GPU XID", "GPU XID fault"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("subject(%d)", int(s))
}

func (r reading) String() string {
	names := []string{"", "known", "unknown", "above 0", "0", "high", "low"}
	if int(r) < len(names) {
		return names[r]
	}
	return fmt.Sprintf("reading(%d)", int(r))
}

// Every catalog entry declares its claims, nil when it asserts nothing
// about the node's figures: a new entry cannot escape the catalog test.
func TestEveryEntryDeclaresItsClaims(t *testing.T) {
	for id := range numMsgs {
		if _, ok := catalogClaims[id]; !ok {
			t.Errorf("catalog entry %d %q declares no claims: add it to catalogClaims (nil when it asserts nothing about the node's figures)", id, catalog[id].en)
		}
	}
	for id := range catalogClaims {
		if id < 0 || id >= numMsgs {
			t.Errorf("catalogClaims declares entry %d, not in the catalog", id)
		}
	}
}

// GPUClaims lists every claim about a GPU figure (DRAM, tensor-pipe and
// overall activity, throttling, XID) of the catalog entries the diagnosis
// of in is written from, each as "subject reading" ("GPU DRAM active
// high", "GPU XID unknown").
func GPUClaims(in Input, t Thresholds, lang llmdiagv1.Language) []string {
	var rec recorder
	diagnose(in, t, lang, &rec)
	var out []string
	for _, id := range rec.msgs {
		for _, c := range catalogClaims[id] {
			switch c.about {
			case aboutGPUDRAM, aboutGPUTensor, aboutGPUStarved, aboutGPUThrottle, aboutGPUXID:
				out = append(out, c.about.String()+" "+c.reads.String())
			}
		}
	}
	return out
}
