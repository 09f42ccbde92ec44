package scenariotest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sim"
)

// Timeline of every run: the scenario's warm-up (sim.SeedWarmup, the
// longest any scenario needs), then refreshes every 5 s for runFor. The
// first refreshes answer from a window not yet covered (llmdiag has just
// started); verdicts are judged once the 5-minute window is covered, from
// judgeFrom on: 85 refreshes over 7 minutes, three and a half burst
// periods.
const (
	runFor    = 12 * time.Minute
	judgeFrom = 5 * time.Minute
	// minShare is the share of judged refreshes that must read the expected
	// cause. A steady scenario should read its cause at every refresh; 90%
	// leaves room for a window edge (a long generation finishing just inside
	// or outside a window) but not for a verdict that comes and goes.
	minShare = 0.9
)

const (
	healthy  = llmdiagv1.Cause_CAUSE_HEALTHY
	decode   = llmdiagv1.Cause_CAUSE_DECODE_BOUND
	kvExh    = llmdiagv1.Cause_CAUSE_KV_EXHAUSTED
	overload = llmdiagv1.Cause_CAUSE_OVERLOADED
	burst    = llmdiagv1.Cause_CAUSE_BURST
	prefill  = llmdiagv1.Cause_CAUSE_PREFILL_BOUND
	down     = llmdiagv1.Cause_CAUSE_TARGET_DOWN

	unexplained = llmdiagv1.Cause_CAUSE_UNEXPLAINED
	stall       = llmdiagv1.Cause_CAUSE_STALLED
	lora        = llmdiagv1.Cause_CAUSE_LORA_CONTENTION
)

type target struct {
	node string
	want llmdiagv1.Cause
	// also are further causes the node may read: it moves between them.
	also []llmdiagv1.Cause
	// phase names the part of the run judged, when it is not all of it
	// from judgeFrom; spans are that part's refreshes (End 0: to the end).
	phase string
	spans []sim.Window
}

// span is a judged part of a run, from and to simulated time after the
// warm-up.
func span(from, to time.Duration) sim.Window { return sim.Window{Start: from, End: to} }

// expected is each scenario's verdict per node, as an SRE reads the
// scenario (sim.Scenario's doc comment): the same on every engine schema
// unless deviations says otherwise.
var expected = []struct {
	scenario string
	targets  []target
	// runFor, when set, replaces the default run length.
	runFor time.Duration
	// accept, when set, checks the scenario's acceptance criteria on each
	// engine's run (see timing_test.go).
	accept func(t *testing.T, res *Result)
}{
	{"seed", []target{{"deepseek-v4-0", decode, nil, "", nil}, {"deepseek-v4-1", decode, nil, "", nil}, {"glm-4.6-0", healthy, nil, "", nil}, {"glm-4.6-1", healthy, nil, "", nil}, {"kimi-k2.6-0", healthy, nil, "", nil}}, 0, acceptSeedGPU},
	{"kv-exhausted", []target{{"kimi-k2.6-0", kvExh, nil, "", nil}, {"kimi-k2.6-1", healthy, nil, "", nil}}, 0, nil},
	{"overloaded", []target{{"glm-4.6-0", overload, nil, "", nil}, {"glm-4.6-1", healthy, nil, "", nil}}, 0, nil},
	// Bursts every 2 minutes that drain: the history window (10 minutes)
	// always holds one, so the node reads BURST at every refresh, WARN while
	// queueing and OK once drained.
	// The DeepSeek node is decode-bound and takes bursts of its own (10×
	// for 10 s every 2 min): it reads DECODE_BOUND between bursts, BURST
	// while one queues, and PREFILL_BOUND while a burst's ~23k-token prompts
	// (3k plus the 20k shared prefix) work off their prefill backlog. It is
	// there to move, for `llmdiag watch --model deepseek-v4`; it must never
	// read a load, memory or health cause.
	{"burst", []target{{"kimi-k2.6-0", burst, nil, "", nil}, {"deepseek-v4-0", decode, []llmdiagv1.Cause{burst, prefill}, "", nil}}, 0, nil},
	{"prefill-heavy", []target{{"kimi-k2.6-0", prefill, nil, "", nil}, {"kimi-k2.6-1", healthy, nil, "", nil}}, 0, nil},
	{"down", []target{{"glm-4.6-0", healthy, nil, "", nil}, {"glm-4.6-1", down, nil, "", nil}, {"kimi-k2.6-0", healthy, nil, "", nil}}, 0, nil},
	// Idle for 10 minutes (no series but the gauges), then 16 clients on 4
	// slots for 4 minutes (a queue of 8–12 that never drains), then 2: an
	// idle node is healthy; a saturated one is OVERLOADED, from 30 s into
	// the overload (the time acceptance allows) to its end; once drained,
	// recovering from the overload (OVERLOADED at WARN, routable) while the
	// window holds it, and healthy or a drained burst after that.
	{"idle-then-overload", []target{
		{"qwen3-8b-0", healthy, nil, "idle", []sim.Window{span(judgeFrom, 10*time.Minute)}},
		{"qwen3-8b-0", overload, nil, "overload", []sim.Window{span(10*time.Minute+30*time.Second, 14*time.Minute)}},
		{"qwen3-8b-0", overload, []llmdiagv1.Cause{healthy, burst}, "after", []sim.Window{span(14*time.Minute+30*time.Second, 0)}},
		{"qwen3-8b-1", healthy, nil, "", nil},
	}, 17 * time.Minute, acceptIdleThenOverload},
	// KV-bound from 3 to 6 and from 8 to 11 minutes (KV 0.95–1.0 with
	// single-scrape dips, preemptions the field quirks do not show), light
	// in between and after: KV_EXHAUSTED from 15 s into each KV-bound phase
	// to its end, and once the KV has fallen, healthy or a drained burst.
	{"kv-flap", []target{
		{"qwen3-8b-0", kvExh, nil, "kv-bound", []sim.Window{span(3*time.Minute+15*time.Second, 6*time.Minute), span(8*time.Minute+15*time.Second, 11*time.Minute)}},
		{"qwen3-8b-0", healthy, []llmdiagv1.Cause{burst}, "light", []sim.Window{span(6*time.Minute+30*time.Second, 8*time.Minute), span(11*time.Minute+30*time.Second, 0)}},
	}, 14 * time.Minute, acceptKVFlap},
	// An offload tier keeps GPU KV at ~0.99 by design, with a few requests
	// running, no preemption and no queue: HEALTHY, never KV_EXHAUSTED (the
	// tier shown by vLLM's lmcache: families, declared in the fleet file
	// for the other schemas). TGI and the Dynamo frontend show no KV usage:
	// they read HEALTHY without the question arising.
	{"kv-offload", []target{{"qwen3-8b-0", healthy, nil, "", nil}}, 0, nil},
	// Speculative decoding and LoRA adapters on a light node: the effects
	// are evidence, never a cause: HEALTHY on every schema, whether it
	// exports them (vLLM, SGLang) or not.
	{"spec-decode", []target{{"qwen3-8b-0", healthy, nil, "", nil}}, 0, nil},
	// Three LoRA adapters with room for one (max_lora 1) and clients asking
	// for all three: requests for the unloaded adapters queue while one
	// holds the slot (1–4 waiting, a few running, queue/running around 1).
	// LORA_CONTENTION where the schema exports the adapters (vLLM, through
	// OpenTelemetry too), never OVERLOADED or UNEXPLAINED (acceptLoRA).
	{"lora-contention", []target{{"qwen3-8b-0", lora, nil, "", nil}}, 0, acceptLoRA},
	// A healthy node missing a tight TTFT SLO (99% within 250 ms; slo_test.go):
	// the verdict stays HEALTHY, the SLO finding is CRIT once the 1h window
	// is covered. The run lasts past an hour of scraping for that.
	{"slo-burn", []target{{"kimi-k2.6-0", healthy, nil, "", nil}}, sloBurnRun, acceptSLOBurn},
	// A GPU of glm-4.6-0 thermally throttled (its compute slower, the node
	// still well within bounds): nothing but the throttling is off, which
	// no load cause explains. kimi-k2.6-0 with an XID error: CRIT, the XID
	// named. Their peers are healthy. DCGM data does not depend on the
	// engine schema.
	{"gpu-throttled", []target{{"glm-4.6-0", unexplained, nil, "", nil}, {"glm-4.6-1", healthy, nil, "", nil}}, 0, acceptGPUThrottled},
	// XID 48 at sim.GPUXIDAt (2 minutes), again a minute later: CRIT until
	// gpu_xid_window (gpuXIDWindow, 4 minutes) after the repeat, then WARN
	// and routable; UNEXPLAINED throughout (no load pattern explains a GPU
	// fault). An old XID 31 of the application's drains nothing.
	{"gpu-xid", []target{{"kimi-k2.6-0", unexplained, nil, "", nil}, {"kimi-k2.6-1", healthy, nil, "", nil}}, 0, acceptGPUXID},
	{"gpu-xid-old", []target{{"kimi-k2.6-0", healthy, nil, "", nil}, {"kimi-k2.6-1", healthy, nil, "", nil}}, 0, acceptGPUXIDOld},
	// 1P1D (vllm#22454) over a slow KV path: the prefill worker reads
	// PREFILL_BOUND (heavy prompts, TTFT tail, no queue, its one-token
	// decode not judged); the decode worker's TTFT P99 ~15 s is the KV
	// transfer, never PREFILL_BOUND nor DECODE_BOUND: UNEXPLAINED, its
	// summary naming the slow transfers where the engine times them (the
	// KV transfer time CRIT) and the prefill side where it does not.
	{"disaggregated", []target{
		{"kimi-k2.6-prefill-0", prefill, nil, "", nil},
		{"kimi-k2.6-decode-0", unexplained, nil, "", nil},
	}, 0, acceptDisaggregated},
	// The engine hangs for good at sim.StalledAt (6 minutes), /metrics
	// still answering: healthy before; STALLED from the third refresh of
	// the hang (stalled_refreshes), the first two seeing the counters flat
	// for less than that; the peer healthy throughout. acceptStalled checks
	// that it is never HEALTHY and never routable from then on.
	{"stalled", []target{
		{"qwen3-8b-0", healthy, nil, "before", []sim.Window{span(judgeFrom, sim.StalledAt)}},
		{"qwen3-8b-0", stall, nil, "hung", []sim.Window{span(stalledDue, 0)}},
		{"qwen3-8b-1", healthy, nil, "", nil},
	}, 12 * time.Minute, acceptStalled},
	// A dense 70B on four L40S decoding ~320 long answers at once: ~9 tok/s
	// per request, an E2E tail of minutes, no queue, KV ~0.75, and the
	// GPUs' memory interface ~62% busy (DCGM): DECODE_BOUND at the
	// memory-bandwidth limit, the verdict saying so (acceptGPUBandwidth).
	// The peer, the same deployment with light chat traffic, is healthy.
	{"gpu-bandwidth", []target{{"llama-3.3-70b-0", decode, nil, "", nil}, {"llama-3.3-70b-1", healthy, nil, "", nil}}, 0, acceptGPUBandwidth},
}

type caseKey struct {
	scenario string
	engine   sim.Engine
	node     string
	phase    string // target.phase
}

// deviation is an engine whose schema lacks what a cause needs, so the
// cause is legitimately out of reach: the node reads want instead, or, where
// the schema leaves the cause ambiguous, one of want and also.
type deviation struct {
	want   llmdiagv1.Cause
	reason string
	also   []llmdiagv1.Cause
}

// deviationSpans are the judged spans of deviations whose cause is in
// reach only later in the target's phase; they replace the target's.
var deviationSpans = map[caseKey][]sim.Window{
	{"stalled", sim.TRTLLM, "qwen3-8b-0", "hung"}: {span(stalledWholeRequestDue, 0)},
	{"stalled", sim.Triton, "qwen3-8b-0", "hung"}: {span(stalledWholeRequestDue, 0)},
	{"stalled", sim.TGI, "qwen3-8b-0", "hung"}:    {span(stalledWholeRequestDue, 0)},
}

var deviations = map[caseKey]deviation{
	{"seed", sim.Triton, "deepseek-v4-0", ""}:        {healthy, tritonNoDecode, nil},
	{"seed", sim.Triton, "deepseek-v4-1", ""}:        {healthy, tritonNoDecode, nil},
	{"kv-exhausted", sim.TGI, "kimi-k2.6-0", ""}:     {overload, "TGI exposes neither KV usage nor a preemption counter: what shows is a queue held at ~240 (queue/running ~9), which is OVERLOADED", nil},
	{"kv-exhausted", sim.Dynamo, "kimi-k2.6-0", ""}:  {overload, "the Dynamo frontend exposes neither KV usage nor preemptions: what shows is a sustained queue, which is OVERLOADED", nil},
	{"prefill-heavy", sim.Triton, "kimi-k2.6-0", ""}: {healthy, "Triton's TRT-LLM backend has no TTFT histogram and no prompt-token counter: neither the TTFT tail nor heavy prompts are visible, and queue 0–2 with running 1–4 is a lightly loaded node; its mean E2E latency (from the duration and success counters, ~24 requests a window with prompts of very different lengths) swings by half and more, which reads as a rising trend no cause explains: UNEXPLAINED, never a load or memory cause", []llmdiagv1.Cause{llmdiagv1.Cause_CAUSE_UNEXPLAINED}},
	{"prefill-heavy", sim.TRTLLM, "kimi-k2.6-0", ""}: {llmdiagv1.Cause_CAUSE_UNEXPLAINED, "trtllm-serve exposes no prompt-token counter, so heavy prompts cannot be shown; the 35 s TTFT P99 with a low queue is left unexplained", nil},
	{"prefill-heavy", sim.TGI, "kimi-k2.6-0", ""}: {llmdiagv1.Cause_CAUSE_UNEXPLAINED, "TGI exposes no TTFT histogram and its time per token counts prefill, so a long prefill cannot be told from a slow decode: the node reads UNEXPLAINED (slow generation, nothing to pin it on), DECODE_BOUND while generation ÷ running (running includes requests in prefill) dips under 10 tok/s, HEALTHY while the E2E tail stays under 60 s; never a load or memory cause",
		[]llmdiagv1.Cause{decode, healthy}},
	{"disaggregated", sim.TRTLLM, "kimi-k2.6-prefill-0", ""}: {unexplained, "trtllm-serve exposes no prompt-token counter, so the prefill worker's heavy prompts cannot be shown: its ~19 s TTFT P99 with no queue is left unexplained (as in prefill-heavy); never DECODE_BOUND", nil},
	{"disaggregated", sim.Triton, "kimi-k2.6-prefill-0", ""}: {healthy, "Triton's TRT-LLM backend has no TTFT histogram and no prompt-token counter: a prefill worker answering one token at 0.1 request/s, queue 0–1, reads as a lightly loaded node; its mean E2E (from the duration and success counters) swings with the prompt lengths, at times a rising trend no cause explains", []llmdiagv1.Cause{unexplained}},
	{"disaggregated", sim.Triton, "kimi-k2.6-decode-0", ""}:  {healthy, "Triton's TRT-LLM backend has no TTFT histogram: the decode worker's wait for its KV cache does not show, and queue 0 with one request running reads HEALTHY", nil},
	{"disaggregated", sim.TGI, "kimi-k2.6-prefill-0", ""}:    {healthy, "TGI exposes no TTFT histogram and its E2E P99 (~13 s for one token) is within bounds: the prefill worker's heavy prompts show only as a prompt rate, which alone is no cause", []llmdiagv1.Cause{unexplained}},
	{"disaggregated", sim.TGI, "kimi-k2.6-decode-0", ""}:     {healthy, "TGI exposes no TTFT histogram: the decode worker's ~8 s wait for each KV cache shows only in an E2E P99 of ~26 s, within bounds", []llmdiagv1.Cause{unexplained}},
	{"kv-flap", sim.TGI, "qwen3-8b-0", "kv-bound"}:           {burst, noKVBurst, []llmdiagv1.Cause{healthy}},
	{"kv-flap", sim.Dynamo, "qwen3-8b-0", "kv-bound"}:        {burst, noKVBurst, []llmdiagv1.Cause{healthy}},
	{"kv-offload", sim.TRTLLM, "qwen3-8b-0", ""}:             {kvExh, noPreemptOffload, nil},
	{"kv-offload", sim.Triton, "qwen3-8b-0", ""}:             {kvExh, noPreemptOffload, nil},
	{"kv-flap", sim.TGI, "qwen3-8b-0", "kv-bound"}:           {burst, noKVBurst, []llmdiagv1.Cause{healthy}},
	{"kv-flap", sim.Dynamo, "qwen3-8b-0", "kv-bound"}:        {burst, noKVBurst, []llmdiagv1.Cause{healthy}},
	{"kv-offload", sim.TRTLLM, "qwen3-8b-0", ""}:             {kvExh, noPreemptOffload, nil},
	{"kv-offload", sim.Triton, "qwen3-8b-0", ""}:             {kvExh, noPreemptOffload, nil},
	{"stalled", sim.TRTLLM, "qwen3-8b-0", "hung"}:            {stall, wholeRequestStall, nil},
	{"stalled", sim.Triton, "qwen3-8b-0", "hung"}:            {stall, wholeRequestStall, nil},
	{"stalled", sim.TGI, "qwen3-8b-0", "hung"}:               {stall, wholeRequestStall, nil},
	{"lora-contention", sim.SGLang, "qwen3-8b-0", ""}:        {burst, loraQueueTime, nil},
	{"lora-contention", sim.SGLangLegacy, "qwen3-8b-0", ""}:  {burst, loraQueueTime, nil},
	{"lora-contention", sim.TRTLLM, "qwen3-8b-0", ""}:        {burst, loraQueueTime, nil},
	{"lora-contention", sim.Triton, "qwen3-8b-0", ""}:        {unexplained, loraQueueOnly, []llmdiagv1.Cause{healthy}},
	{"lora-contention", sim.TGI, "qwen3-8b-0", ""}:           {unexplained, loraQueueOnly, []llmdiagv1.Cause{healthy}},
	{"lora-contention", sim.Dynamo, "qwen3-8b-0", ""}:        {unexplained, loraQueueOnly, nil},
	{"gpu-bandwidth", sim.Triton, "llama-3.3-70b-0", ""}:     {healthy, "Triton's TRT-LLM backend has no token counters and no latency histograms: neither per-request decode speed nor the E2E tail is visible, so DECODE_BOUND is out of reach, GPUs at the memory-bandwidth limit or not (its DCGM row still reads DRAM ~62%); KV ~0.75 and no queue read HEALTHY", nil},
}

const loraQueueTime = "no LoRA adapters in this schema (vLLM's lora_requests_info): what shows is a queue of 1–4 below saturation whose requests spend most of their wait for the first token queued, which reads as short bursts (BURST, rule 4′); never OVERLOADED"

const loraQueueOnly = "no LoRA adapters and no queue time in this schema: a queue/running ratio sustained around 1 with the queue below saturation is a backlog no cause explains (UNEXPLAINED; HEALTHY at a refresh that finds the queue empty); never OVERLOADED"

const wholeRequestStall = "no inter-token histogram in this schema: its counters move only as requests start or end, so flat counters read STALLED only once they have been flat for stalled_request_counters_for (2m) as well, lest one long generation read as a hang; judged from 2 minutes into the hang, before which it reads OVERLOADED or BURST as the queue builds (acceptStalled checks never HEALTHY and never routable from the third refresh on)"

// stalledDue is the first refresh by which the stalled scenario's node must
// read STALLED: the third from the hang's start (stalled_refreshes), the
// hang starting on a refresh; stalledWholeRequestDue is the first at which
// its counters have been flat for stalled_request_counters_for.
var (
	stalledDue             = sim.StalledAt + time.Duration(diagnose.DefaultThresholds().StalledRefreshes-1)*refreshEvery
	stalledWholeRequestDue = sim.StalledAt + diagnose.DefaultThresholds().StalledRequestCountersFor
)

// refreshEvery is the interval of every run (Options' default).
const refreshEvery = 5 * time.Second

const noPreemptOffload = "no preemption counter in this schema: KV 0.99 with the offload tier declared cannot be told from a cache that is preempting requests, and \"full by design\" needs no preemptions shown (diagnose/offload.go), so the node reads KV_EXHAUSTED, its summary saying preemptions are not known"

const noKVBurst = "no KV usage in this schema (and the field quirks hide the preemptions): what shows of a KV-bound node is a queue of 0–11 that keeps draining as requests are preempted and readmitted, which is BURST (HEALTHY once the last spike has left the history)"

const tritonNoDecode = "Triton's TRT-LLM backend has no token counters and no latency histograms: neither per-request decode speed nor the E2E tail is visible, so DECODE_BOUND is out of reach; KV 0.3 and no queue read HEALTHY"

type outcome struct {
	key    caseKey
	want   llmdiagv1.Cause
	also   []llmdiagv1.Cause // also accepted
	counts map[llmdiagv1.Cause]int
	judged int
	pass   bool
	wall   time.Duration
}

func (o outcome) share() float64 {
	if o.judged == 0 {
		return 0
	}
	n := o.counts[o.want]
	for _, c := range o.also {
		n += o.counts[c]
	}
	return float64(n) / float64(o.judged)
}

// TestMatrix runs every scenario on every engine schema through the real
// pipeline and checks each node's verdict, and the acceptance criteria of
// the scenarios that have some; it logs the matrix, every node's flips and
// the time-to-verdict figures.
func TestMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the scenario matrix, about a minute")
	}
	start := time.Now()
	var (
		mu       sync.Mutex
		outcomes = map[caseKey]outcome{}
		fl       = map[caseKey]flips{}
		timing   = map[caseKey]string{}
	)
	t.Run("run", func(t *testing.T) {
		for _, sc := range expected {
			for _, eng := range sim.Engines() {
				t.Run(sc.scenario+"/"+string(eng), func(t *testing.T) {
					t.Parallel()
					d := runFor
					if sc.runFor > 0 {
						d = sc.runFor
					}
					res, err := Run(context.Background(), Options{Scenario: sc.scenario, Engine: eng, Duration: d, Thresholds: scenarioThresholds[sc.scenario]})
					if err != nil {
						t.Fatal(err)
					}
					for _, tg := range sc.targets {
						k := caseKey{sc.scenario, eng, tg.node, tg.phase}
						want, also, spans := tg.want, tg.also, tg.spans
						if d, ok := deviations[k]; ok {
							want, also = d.want, d.also
							if ds, ok := deviationSpans[k]; ok {
								spans = ds
							}
						}
						o := judge(res, k, want, also, spans)
						mu.Lock()
						outcomes[k] = o
						mu.Unlock()
						if !o.pass {
							t.Errorf("%s/%s: %s%s reads %v at %d/%d refreshes (want ≥ %.0f%%); causes %s\n%s", sc.scenario, eng, tg.node, phaseSuffix(tg.phase), want, o.counts[want], o.judged, 100*minShare, causeCounts(o.counts), evidence(res, tg.node, want, spans, 4))
						}
					}
					mu.Lock()
					for _, id := range res.Nodes {
						fl[caseKey{sc.scenario, eng, id, ""}] = flipsOf(res.Readings[id])
					}
					switch sc.scenario {
					case "idle-then-overload":
						timing[caseKey{sc.scenario, eng, "", ""}] = timeOverload(res).summary(res.Readings[overloadedNode])
					case "kv-flap":
						timing[caseKey{sc.scenario, eng, "", ""}] = flapOf(res.Readings["qwen3-8b-0"]).summary()
					case "stalled":
						timing[caseKey{sc.scenario, eng, "", ""}] = timeStall(res).summary()
					}
					mu.Unlock()
					if sc.accept != nil {
						sc.accept(t, res)
					}
					t.Logf("wall %v", res.Wall.Round(time.Millisecond))
				})
			}
		}
	})
	t.Logf("matrix: %d runs in %v", len(expected)*len(sim.Engines()), time.Since(start).Round(time.Millisecond))
	t.Log("\n" + table(outcomes) + "\n" + timingTables(fl, timing))
}

func testingVerbose() bool { return testing.Verbose() }

// judged reports whether a reading at is judged: in one of spans, or from
// judgeFrom on when there are none.
func judged(at time.Duration, spans []sim.Window) bool {
	if len(spans) == 0 {
		return at >= judgeFrom
	}
	for _, s := range spans {
		if at >= s.Start && (s.End == 0 || at < s.End) {
			return true
		}
	}
	return false
}

func phaseSuffix(phase string) string {
	if phase == "" {
		return ""
	}
	return " (" + phase + ")"
}

// judge counts the causes a node read at the judged refreshes.
func judge(res *Result, k caseKey, want llmdiagv1.Cause, also []llmdiagv1.Cause, spans []sim.Window) outcome {
	o := outcome{key: k, want: want, also: also, counts: map[llmdiagv1.Cause]int{}, wall: res.Wall}
	for _, r := range res.Readings[k.node] {
		if !judged(r.At, spans) {
			continue
		}
		o.judged++
		o.counts[r.Cause]++
	}
	o.pass = o.judged > 0 && o.share() >= minShare
	return o
}

func short(c llmdiagv1.Cause) string {
	return strings.TrimPrefix(c.String(), "CAUSE_")
}

func causeCounts(m map[llmdiagv1.Cause]int) string {
	type kv struct {
		c llmdiagv1.Cause
		n int
	}
	var s []kv
	for c, n := range m {
		s = append(s, kv{c, n})
	}
	sort.Slice(s, func(i, j int) bool { return s[i].n > s[j].n || s[i].n == s[j].n && s[i].c < s[j].c })
	var parts []string
	for _, x := range s {
		parts = append(parts, fmt.Sprintf("%s %d", short(x.c), x.n))
	}
	return strings.Join(parts, ", ")
}

// table renders the scenario × engine matrix: per target node, the cause
// read most often over the judged refreshes and how many read it; a mark
// says whether that meets the expectation.
func table(outcomes map[caseKey]outcome) string {
	var b strings.Builder
	engines := sim.Engines()
	fmt.Fprintf(&b, "%-20s %-23s %-14s", "scenario", "node", "expected")
	for _, e := range engines {
		fmt.Fprintf(&b, " | %-22s", e)
	}
	b.WriteString("\n")
	for _, sc := range expected {
		for _, tg := range sc.targets {
			fmt.Fprintf(&b, "%-20s %-23s %-14s", sc.scenario, tg.node+phaseSuffix(tg.phase), short(tg.want))
			for _, e := range engines {
				k := caseKey{sc.scenario, e, tg.node, tg.phase}
				o, ok := outcomes[k]
				if !ok {
					fmt.Fprintf(&b, " | %-22s", "-")
					continue
				}
				top, n := healthy, -1
				for c, m := range o.counts {
					if m > n || m == n && c < top {
						top, n = c, m
					}
				}
				mark := "ok"
				_, isDev := deviations[k]
				switch {
				case !o.pass:
					mark = "FAIL"
				case isDev:
					mark = "dev"
				}
				cell := fmt.Sprintf("%s %d/%d %s", short(top), n, o.judged, mark)
				if top != o.want && !slices.Contains(o.also, top) {
					cell = fmt.Sprintf("%s %d/%d [%s %d] %s", short(top), n, o.judged, short(o.want), o.counts[o.want], mark)
				}
				fmt.Fprintf(&b, " | %-22s", cell)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("cells: the cause read most often at the judged refreshes (from " + judgeFrom.String() + " on, or in the named phase), how many read it;\n" +
		"[expected n] when that is not the expected cause; ok / dev (an engine deviation, see deviations) / FAIL\n")
	return b.String()
}

// evidence shows, for up to n judged refreshes that did not read want, what
// the rules saw: the indicators, the queue history and the verdict.
func evidence(res *Result, node string, want llmdiagv1.Cause, spans []sim.Window, n int) string {
	var b strings.Builder
	rs := res.Readings[node]
	shown := 0
	for i, r := range rs {
		if !judged(r.At, spans) || r.Cause == want {
			continue
		}
		if shown == n {
			break
		}
		shown++
		fmt.Fprintf(&b, "    at %v: %s %s — %s\n      %s\n      %s\n", r.At, short(r.Cause), strings.TrimPrefix(r.Status.String(), "STATUS_"),
			r.Diagnosis.GetSummary(), indicators(r.Metrics), historyOf(res, node, i))
	}
	return b.String()
}

func indicators(m *llmdiagv1.NodeMetrics) string {
	f := func(p *float64) string {
		if p == nil || math.IsNaN(*p) {
			return "-"
		}
		return fmt.Sprintf("%.3g", *p)
	}
	p99 := func(d *llmdiagv1.Distribution) string {
		for _, p := range d.GetPercentiles() {
			if p.GetQuantile() == 0.99 {
				return fmt.Sprintf("%.3gs", p.GetValue())
			}
		}
		return "-"
	}
	mean := func(d *llmdiagv1.Distribution) string {
		if d == nil {
			return "-"
		}
		return fmt.Sprintf("%.3gs", d.GetMean())
	}
	return fmt.Sprintf("queue %s running %s KV %s preempt/s %s prompt %s tok/s gen %s tok/s req/s %s per-request %s tok/s TTFT P99 %s E2E P99 %s mean %s",
		f(m.Queue), f(m.Running), f(m.KvPressure), f(m.PreemptionsPerSecond), f(m.PromptTokensPerSecond), f(m.GenerationTokensPerSecond),
		f(m.RequestsPerSecond), f(m.DecodeTokensPerSecondPerRequest), p99(m.GetTtft()), p99(m.GetE2E()), mean(m.GetE2E()))
}

// historyOf summarises the queue history the rules read at reading i:
// how many refreshes queued (queue > 5, or ≥ 1 waiting and queue/running
// ≥ 1, the default thresholds) out of how many.
func historyOf(res *Result, node string, i int) string {
	h := res.History(node, i)
	queueing, points := 0, 0
	var qs []string
	for _, p := range h {
		if !p.Up || p.Queue == nil {
			continue
		}
		points++
		q, r := *p.Queue, 0.0
		if p.Running != nil {
			r = *p.Running
		}
		if q > 5 || (q >= 1 && (r == 0 || q/r >= 1)) {
			queueing++
		}
		if q > 0 {
			qs = append(qs, fmt.Sprintf("%.0f/%.0f", q, r))
		}
	}
	if len(qs) > 12 {
		qs = append(qs[:6], append([]string{"…"}, qs[len(qs)-6:]...)...)
	}
	return fmt.Sprintf("history: %d of %d refreshes queueing; non-zero queue/running: %s", queueing, points, strings.Join(qs, " "))
}
