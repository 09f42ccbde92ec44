package diagnose

import (
	"fmt"
	"strconv"
	"strings"
)

// msg names one entry of the message catalog.
type msg int

// f formats catalog entry id in the printer's language. Every entry is a
// fmt format string; Chinese entries index their arguments explicitly where
// the word order differs from English.
func (p printer) f(id msg, args ...any) string {
	e := catalog[id]
	p.rec.add(id)
	format := e.en
	if p.zh {
		format = e.zh
	}
	if len(args) == 0 && !strings.Contains(format, "%") {
		return format // what Sprintf would make of it, without its work
	}
	if s, ok := sprintf(format, args); ok {
		return s
	}
	return fmt.Sprintf(format, detached(args)...)
}

// detached copies args into new interfaces, value by value, for
// fmt.Sprintf: args then do not escape, and a call's boxed arguments stay
// on its stack (a diagnosis passes some two hundred). An argument of a
// type it does not copy (a caller's mistake, which the catalog tests
// catch, as they catch any "%!" in a text) becomes a placeholder that
// Sprintf spells out as a wrong type.
func detached(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = v
		case int:
			out[i] = v
		case int32:
			out[i] = v
		case int64:
			out[i] = v
		case uint32:
			out[i] = v
		case uint64:
			out[i] = v
		case float64:
			out[i] = v
		default:
			out[i] = unsupportedArg(false)
		}
	}
	return out
}

// unsupportedArg stands for an argument detached does not copy; Sprintf
// writes it as "%!s(diagnose.unsupportedArg=false)".
type unsupportedArg bool

// sprintf is fmt.Sprintf for the verbs the catalog uses, %s of a string
// and %d of an integer, their arguments indexed or not, and %%, at a fraction
// of its cost (a diagnosis writes some fifty entries); ok is false for any
// other verb, flag, argument or count of arguments, which the caller then
// leaves to fmt.Sprintf, as it does every error Sprintf would spell out.
func sprintf(format string, args []any) (out string, ok bool) {
	var buf [256]byte
	b := buf[:0]
	argNum, reordered := 0, false
	for i := 0; i < len(format); {
		c := format[i]
		if c != '%' {
			j := strings.IndexByte(format[i:], '%')
			if j < 0 {
				j = len(format) - i
			}
			b = append(b, format[i:i+j]...)
			i += j
			continue
		}
		i++
		if i >= len(format) {
			return "", false
		}
		if format[i] == '%' {
			b = append(b, '%')
			i++
			continue
		}
		if format[i] == '[' {
			// An explicit index, [1] to [9].
			if i+2 >= len(format) || format[i+1] < '1' || format[i+1] > '9' || format[i+2] != ']' {
				return "", false
			}
			argNum, reordered = int(format[i+1]-'1'), true
			i += 3
			if i >= len(format) {
				return "", false
			}
		}
		if argNum >= len(args) {
			return "", false
		}
		switch format[i] {
		case 's':
			v, isString := args[argNum].(string)
			if !isString {
				return "", false
			}
			b = append(b, v...)
		case 'd':
			switch v := args[argNum].(type) {
			case int:
				b = strconv.AppendInt(b, int64(v), 10)
			case int32:
				b = strconv.AppendInt(b, int64(v), 10)
			case int64:
				b = strconv.AppendInt(b, v, 10)
			case uint32: // a profile's parallel degrees
				b = strconv.AppendUint(b, uint64(v), 10)
			case uint64:
				b = strconv.AppendUint(b, v, 10)
			default:
				return "", false
			}
		default:
			return "", false
		}
		argNum++
		i++
	}
	if !reordered && argNum < len(args) {
		return "", false // Sprintf would add %!(EXTRA …)
	}
	return string(b), true
}

// The catalog's entries. Names (name*), finding conclusions (by indicator),
// evidence (ev*), ruled-out causes (ro*), summaries, recommendations (rec*).
const (
	nameKV msg = iota
	nameQueue
	nameRatio
	namePrompt
	nameGeneration
	nameE2EP99
	nameTTFTP99
	namePreemptions
	nameScrape

	unknownNoMetrics
	unknownStale
	unknownStaleFlagged
	unknownDown
	unknownErrors
	unknownWarned
	unknownNotExposed

	summaryNoMetrics
	summaryStale
	summaryStaleFlagged
	summaryUnreadable
	summaryDown
	evStale
	evStaleFlagged
	evUnreadable
	evDown
	evScrapeError
	evSourceWarning
	recNoData
	recNoDataRouting
	recDown
	recDownRouting

	kvOK
	kvBusy
	kvWarn
	kvCrit
	evKV
	evKVCapacity

	queueOK
	queueWarn
	queueCrit
	evQueueRunning
	evQueueLimits

	ratioOK
	ratioOKSpikes
	ratioBurst
	ratioNoHistory
	ratioSustained
	evRatio

	promptOK
	promptIdle
	promptHeavy
	evPrefillGap
	evPromptPerRequest

	genOK
	genIdle
	genPerRequestUnknown
	genSlow
	genSlowModel
	evPerRequestDerived
	evPerRequestTPOT
	evPerRequestITL
	evPerRequest
	evModelLarge
	evModelSmall
	evDataParallel
	evTensorParallel
	evExpertParallel
	evNoProfile

	e2eOK
	e2eTail
	e2eTailQueue
	e2eTailConcurrency
	e2eNoRequests
	evLatencyLimits
	evTail

	ttftWarn
	ttftCrit

	preemptSome
	preemptMany
	evPreemptLimit

	scrapeErrors
	scrapeDown
	valueErrors

	roMemory
	roMemoryNoPreempt
	roQueueing
	roOverload
	roPrefill
	roDecode
	roOutlier
	notMemory
	notQueueing
	causeOnly
	causeAfterNots

	summaryKVFull
	summaryKVFullPreempt
	summaryPreempt
	evPreemptRate
	evE2EHigh
	evTTFTHigh
	recKVShed
	recKVCapacity
	recKVContext

	summaryOverloadedNow
	evQueueHigh
	recShed
	recAddCapacity
	recAdmission

	summaryBurstDrained
	recBurstKeep
	recBurstSmooth

	causePrefill
	heavyRatio
	heavyPerRequest
	evQueueRatio
	recChunkedPrefill
	recPrefixCache
	recDisaggregate

	causeDecode
	causeDecodeStalls
	decodeLockstep
	recSmallerChunks
	decodeConcurrency
	runningPart
	factorSize
	factorCost
	factorDataParallel
	factorConcurrency
	factorConcurrencyUnknown
	theModel
	evTailRatio
	recTensorParallel
	recConcurrency
	recSpeculative
	recClientTimeout
	recProfile

	summaryOutlier
	evOutlier
	evLoadSimilar
	recOutlierDrain
	recOutlierCompare

	summaryHealthy
	summaryUnexplained
	evReading
	recNone
	recWatch

	nameDecodeSpeed
	namePrefillDecode
	nameQueueTime
	nameInterToken
	nameAborts
	nameTrend
	namePeers
	nameStaleness

	condQueue
	condRatio
	condKV
	evEpisodes
	evEpisodesNow
	evEpisodesNone
	evPipelineParallel
	evMoE
	evGPU

	decodeIdle
	decodeUnknown
	valuePerRequest
	decodeOK
	decodeSlow
	decodeSlowModel
	decodeSlowDP
	decodeSlowModelDP

	pdIdle
	pdPhysics
	pdHeavy
	pdHeavyTTFT

	queueTimeNotExposed
	queueTimeNoData
	valueShareOfTTFT
	evQueueTimeSplit
	evQueueTimeP99
	queueTimeOK
	queueTimeShort
	queueTimeWarn

	itlNotExposed
	itlNoData
	itlOK
	itlWarn
	itlCrit
	evITLTail
	evITLPrefill

	abortsNotExposed
	abortsNoRate
	abortsNoRequests
	abortsOK
	abortsWarn
	abortsCrit
	evAborts

	trendUnknown
	trendFlat
	trendRising
	trendFalling
	evTrend
	valueTrend

	peersInLine
	peersOutlier
	peersGroupSlow
	peersFaster
	evPeerMetric
	valuePeers
	evGroupSlow

	stalenessUnknown
	stalenessOK
	stalenessCrit
	stalenessFlagged
	valueStaleFlagged
	evStalenessLimit

	roMemoryNearFull
	roMemoryUnknown
	roQueueUnknown
	roBurstMinor
	restNothing
	roNoBurst
	roBurstNoHistory
	roPrefillUnknown
	roPrefillQueue
	roPrefillLight
	roPrefillSpikes
	roPrefillPeers
	roDecodeUnknown
	roDecodeTail
	roDecodeNoTail
	roDecodeOther
	roNoPeers
	evUnexplainedAlso
	evReadingWhy

	summaryBurstTail
	summaryBurstShort
	recBurstHeadroom
	recOverloadTP
	factorSizeMoE
	decodeGroup
	recTPAlready
	summaryGroupSlow
	recKVWatch
	recGroupSlow
	recLatency
	recITL
	recAborts
	recTrend
	recQueueTime
	recScrape

	// Saturation with hysteresis (saturation.go).
	summaryOverloadedFor
	summaryQueueSaturated
	summaryQueueRising
	summaryKVHeld
	summaryRecovering
	evHeldDip
	evSaturatedSince
	evRecovered
	roOverloadShort
	roOverloadRecovered
	kvRising
	kvHeld

	kvCritPreempt
	summaryKVFullNoPreempt
	recKVShedPreempt
	recPreemptWatch
	summaryHealthyPartial
	e2eTailSlowDecode
	decodeTail
	causePrefillQueueUnknown
	pdHeavyOnly
	queueTimeMostly
	roBurstSmall
	roBurstQueueUnknown
	roMemoryNearFullUnknown
	causeDecodeStallsBare
	roPrefillPromptsUnknown
	roMemoryNotHeld

	nameRunning
	nameKVCapacity
	nameFinished
	evNegative
	noteNegative
	evKVOverClamped
	evKVOverUnknown
	evRunningStuck
	evTTFTExcludesQueue
	evTTFTBelowQueue
	evQueueTimeSplitExcluded
	valueShareOfWait
	unknownInconsistent
	nameSLO
	sloValue
	sloBurnCrit
	sloBurnWarn
	sloOnlyIfMissed
	sloWithin
	sloUnknown
	evSLOWindow
	evSLOWindowEmpty
	evSLOWindowMissing

	namePrefixCache
	nameSpec
	nameLoRA
	prefixHigh
	prefixLow
	prefixSome
	specGain
	specLowGain
	loraWaiting
	loraNoWait
	valueSpec
	valueLoRA
	evPrefixCache
	evSpec
	evSpecLow
	evLoRAWaiting
	recSpecDraft
	kvOffload
	roMemoryOffload
	// LoRA adapter contention (cause_lora.go).
	causeNameLoRAContention
	summaryLoRAContention
	evLoRAContention
	evLoRAQueue
	recLoRAMaxLoras
	recLoRARoute
	roLoRANoWait
	roLoRAUnknown
	roLoRALoaded
	roLoRASlotsFree
	roLoRANoQueue
	ratioLoRA

	causeNameUnspecified
	causeNameNoData
	causeNameTargetDown
	causeNameKVExhausted
	causeNameOverloaded
	causeNameBurst
	causeNamePrefillBound
	causeNameDecodeBound
	causeNameNodeOutlier
	causeNameHealthy
	causeNameUnexplained
	evSLOWindowPartial

	causeNameStalled
	nameProgress
	valueProgressFlat
	progressStalled
	summaryStalled
	summaryStalledWaiting
	evProgressFlat
	evStalledNothingRunning
	evProgressRequestCounters
	evStalledAnswers
	evStalledWindowRates
	recStalledRouting
	recStalledDump
	recStalledRestart
	recStalledProbe
	// Prefill/decode disaggregation (role.go).
	nameRole
	nameKVTransferTime
	nameKVTransferVolume
	nameKVTransferFailures
	valueRolePrefill
	valueRoleDecode
	rolePrefill
	roleDecode
	evRoleSource
	roleNotJudged
	evTTFTTransfer
	evTTFTTransferNoMean
	evTTFTTransferUnknown
	kvTimeOK
	kvTimeSlow
	kvTimeNone
	evKVTransferLimits
	evKVTransfers
	kvVolume
	evKVPerTransfer
	kvFailNone
	kvFailSome
	evKVFailShare
	roDecodeWorkerTTFT
	roPrefillWorkerDecode
	summaryDecodeTransfer
	summaryDecodeTTFT
	recPrefillWorkers
	recKVTransfer
	recKVFailures
	recAddPrefillWorkers

	// GPU figures from DCGM (gpu.go).
	nameGPUActivity
	nameGPUThrottling
	nameGPUXID
	valueGPUSM
	valueGPUDRAM
	valueGPUTensor
	valueGPUUtil
	valueNone
	conGPUBandwidth
	conGPUStarved
	conGPUCompute
	conGPUMixed
	conGPUUtilOnly
	conGPUThrottled
	conGPUNotThrottled
	conGPUXID
	conGPUNoXID
	conGPUXIDApp
	conGPUXIDUnlisted
	conGPUXIDAged
	conGPUXIDFirstRead
	conGPUXIDQuiet
	valueGPUXIDAgo
	valueGPUXIDNew
	valueGPUXIDFirstRead
	evGPUXIDEntry
	evGPUXIDCount
	evGPUXIDWindow
	evGPUCount
	evGPUUtil
	evGPUClock
	evGPUPower
	evGPUTemp
	evGPUFramebuffer
	evGPUReasons
	evGPUDecodeBandwidth
	evGPUDecodeStarved
	evGPUDecodeCompute
	evGPUDecodeMixed
	evGPULockstep
	decodeGPUStarvedUtil
	evGPUDecodeStarvedUtil
	valueGPUThrottled
	decodeGPUBandwidth
	decodeGPUStarved
	decodeGPUCompute
	recGPUBandwidth
	recGPUStarved
	recGPUCPUStalls
	recGPUCompute
	recGPUThrottle
	recGPUXID
	recGPUXIDApp
	recGPUXIDCheck
	xid13
	xid31
	xid43
	xid48
	xid63
	xid64
	xid74
	xid79
	xid92
	xid94
	xid95
	xid119
	evSLOWindowOverBudget

	numMsgs
)

// catalog holds every human-readable text Diagnose writes, in English and
// Chinese. The Chinese keeps the terms Chinese-speaking SREs read off their
// dashboards (KV Cache, Queue, Prefill, Decode) in English.
var catalog = [numMsgs]struct{ en, zh string }{
	nameKV:          {"KV cache pressure", "KV Cache 压力"},
	nameQueue:       {"Queue", "Queue 积压"},
	nameRatio:       {"Queue/Running ratio", "Queue/Running Ratio"},
	namePrompt:      {"Prompt token rate", "Prompt Token Rate"},
	nameGeneration:  {"Generation token rate", "Generation Token Rate"},
	nameE2EP99:      {"E2E P99", "E2E P99"},
	nameTTFTP99:     {"TTFT P99", "TTFT P99"},
	namePreemptions: {"Preemptions", "抢占"},
	nameScrape:      {"Scrape", "指标采集"},

	unknownNoMetrics:    {"No metrics for this node yet", "尚无该节点的指标"},
	unknownStale:        {"No fresh data: the last read is %s old", "没有新数据：最近一次读取在 %s 前"},
	unknownStaleFlagged: {"No fresh data: the source marks it stale", "没有新数据：数据源标记为过期"},
	unknownDown:         {"The metrics endpoint does not answer", "指标端点无响应"},
	unknownErrors:       {"The engine does not expose it, or it could not be read: %s", "引擎未暴露该指标，或读取失败：%s"},
	unknownWarned:       {"Unknown: the engine does not expose it, or the source left it out for a problem its warnings name (see the evidence)", "未知：引擎未暴露该指标，或数据源因其警告所述的问题将其剔除（见证据）"},
	unknownNotExposed:   {"Unknown: the engine does not expose it, or the window holds too little data yet", "未知：引擎未暴露该指标，或窗口内数据尚不足"},

	summaryNoMetrics: {
		"No metrics for this node yet, so llmdiag cannot tell its state.",
		"尚无该节点的指标，无法判断其状态。"},
	summaryStale: {
		"No fresh data: the last read is %s old (limit %s), so llmdiag cannot tell the node's state; stale data is never reported healthy.",
		"没有新数据：最近一次读取在 %s 前（上限 %s），无法判断节点状态；过期数据不会被判为健康。"},
	summaryStaleFlagged: {
		"No fresh data: the source marks these metrics stale, so llmdiag cannot tell the node's state; stale data is never reported healthy.",
		"没有新数据：数据源将这些指标标记为过期，无法判断节点状态；过期数据不会被判为健康。"},
	summaryUnreadable: {
		"The node answers, but none of the indicators could be read, so llmdiag cannot tell its state.",
		"节点有响应，但所有指标都无法读取，无法判断其状态。"},
	summaryDown: {
		"The metrics endpoint does not answer: the node is down or unreachable.",
		"指标端点无响应：节点宕机或不可达。"},
	evStale:        {"last read %s ago", "最近一次读取在 %s 前"},
	evStaleFlagged: {"metrics marked stale by their source", "数据源将指标标记为过期"},
	evUnreadable: {
		"none of KV pressure, queue, queue/running, prompt rate, generation rate, E2E P99 could be read",
		"KV 压力、排队、排队比、Prompt 速率、生成速率、E2E P99 均无法读取"},
	evDown:          {"the last scrape did not reach the node (up = 0)", "最近一次采集未能连上节点（up = 0）"},
	evScrapeError:   {"error: %s", "错误：%s"},
	evSourceWarning: {"source warning: %s", "数据源警告：%s"},
	recNoData: {
		"Check the metrics pipeline: the node's /metrics endpoint, Prometheus, and llmdiag's refresh.",
		"检查指标链路：节点的 /metrics 端点、Prometheus 以及 llmdiag 的刷新。"},
	recNoDataRouting: {
		"Routers should not count on this node until fresh data arrives.",
		"在拿到新数据之前，路由不应依赖该节点。"},
	recDown: {
		"Check the inference process and its /metrics endpoint (process alive, port, network policy).",
		"检查推理进程及其 /metrics 端点（进程是否存活、端口、网络策略）。"},
	recDownRouting: {
		"Do not route traffic here until the endpoint answers.",
		"端点恢复响应前，不要向该节点路由流量。"},

	kvOK:         {"Memory is not the bottleneck", "显存不是瓶颈"},
	kvBusy:       {"Memory is busy but not yet the bottleneck", "显存占用偏高，但还不是瓶颈"},
	kvWarn:       {"The KV cache is filling up; preemption is near", "KV Cache 接近占满，即将触发抢占"},
	kvCrit:       {"The KV cache is nearly full: new requests will wait for room or preempt running ones", "KV Cache 几乎占满：新请求将等待空间，或抢占运行中的请求"},
	evKV:         {"KV pressure %s (warn %s, crit %s)", "KV 压力 %s（警告 %s，严重 %s）"},
	evKVCapacity: {"KV capacity %s tokens", "KV 容量 %s Token"},

	queueOK:        {"No significant queueing", "不存在大量排队"},
	queueWarn:      {"Requests are waiting to be scheduled", "请求开始排队"},
	queueCrit:      {"Requests pile up: the node is overloaded", "请求严重积压，系统已过载"},
	evQueueRunning: {"queue %s, running %s", "排队 %s，运行中 %s"},
	evQueueLimits:  {"saturated above %s waiting; critical above %s for %s", "排队 > %[1]s 视为饱和；持续 %[3]s > %[2]s 为严重"},

	ratioOK:        {"Healthy: next to no backlog", "系统健康，几乎没有积压"},
	ratioOKSpikes:  {"Healthy; occasional spikes are normal", "系统健康，偶发尖刺正常"},
	ratioBurst:     {"Backlog now, but history shows it drains", "当前有积压，但历史上很快消化"},
	ratioNoHistory: {"Backlog now; no history to tell a burst from overload", "当前有积压；缺少历史数据，无法区分尖刺与过载"},
	ratioSustained: {"Sustained backlog: the node is overloaded", "排队比持续偏高，系统长期过载"},
	evRatio:        {"queue/running %s (warn %s, crit %s)", "排队比 %s（警告 %s，严重 %s）"},

	promptOK:    {"Prefill is normal", "Prefill 阶段正常"},
	promptIdle:  {"No prompts in the window", "窗口内没有新的 Prompt"},
	promptHeavy: {"Heavy prompts: prefill holds back the first token", "Prompt 过重，Prefill 拖慢首 Token"},
	evPrefillGap: {
		"prefill %s vs decode %s: %s (heavy at ≥ %s); prefill runs in parallel, decode one token at a time",
		"Prefill %s 对比 Decode %s：相差 %s（≥ %s 为过重）；Prefill 并行计算，Decode 逐 Token 串行"},
	evPromptPerRequest: {
		"%s prompt tokens per finished request (heavy at ≥ %s)",
		"每个完成的请求 %s 个 Prompt Token（≥ %s 为过重）"},

	genOK:                {"Decode speed is normal", "Decode 速度正常"},
	genIdle:              {"No tokens generated in the window", "窗口内没有生成 Token"},
	genPerRequestUnknown: {"Per-request decode speed unknown: running requests are unknown or 0, and no time-per-output-token or inter-token histogram", "无法得出单请求 Decode 速度：运行中请求数未知或为 0，且没有每输出 Token 耗时或 Token 间隔直方图"},
	genSlow:              {"Decode is slow per request", "单请求 Decode 慢"},
	genSlowModel:         {"Decode is slow, but consistent with the model", "Decode 慢，但符合模型特性"},
	evPerRequestDerived: {
		"%s ÷ %s running ≈ %s per request (slow below %s)",
		"%s ÷ %s 个运行中请求 ≈ 每请求 %s（低于 %s 为慢）"},
	evPerRequestTPOT: {
		"P50 time per output token %s ≈ %s per request (slow below %s)",
		"每输出 Token 耗时 P50 %s ≈ 每请求 %s（低于 %s 为慢）"},
	evPerRequestITL: {
		"P50 inter-token latency %s ≈ %s per request (slow below %s)",
		"Token 间隔 P50 %s ≈ 每请求 %s（低于 %s 为慢）"},
	evPerRequest: {"%s per request (slow below %s)", "每请求 %s（低于 %s 为慢）"},
	evModelLarge: {
		"%s active parameters per token: a large model (≥ %s)",
		"每 Token 激活 %s 参数：大模型（≥ %s）"},
	evModelSmall: {
		"%s active parameters per token: not a large model (< %s)",
		"每 Token 激活 %s 参数：非大模型（< %s）"},
	evDataParallel: {
		"data parallel ×%d: raises throughput, not single-request speed",
		"数据并行 ×%d：提升整体吞吐，不加速单个请求"},
	evTensorParallel: {
		"tensor parallel ×%d: speeds a single request but lowers concurrency",
		"张量并行 ×%d：加速单个请求，但减少可并发数"},
	evExpertParallel: {"expert parallel ×%d (MoE)", "专家并行 ×%d（MoE）"},
	evNoProfile: {
		"no deployment profile: model size and parallel strategy unknown",
		"未配置部署 profile：模型体量与并行策略未知"},

	e2eOK:              {"Tail latency is within bounds", "长尾延迟正常"},
	e2eTail:            {"Long tail latency", "长尾延迟明显"},
	e2eTailQueue:       {"Long tail: requests wait in the queue", "长尾延迟明显：请求在排队"},
	e2eTailConcurrency: {"Long tail under high concurrency", "高并发时长尾延迟明显"},
	e2eNoRequests:      {"No requests finished in the window", "窗口内没有完成的请求"},
	evLatencyLimits:    {"warn ≥ %s, crit ≥ %s", "警告 ≥ %s，严重 ≥ %s"},
	evTail:             {"P50 %s, P95 %s: P99 is %s the median", "P50 %s，P95 %s：P99 是中位数的 %s"},

	ttftWarn: {"The unluckiest 1%% wait long for the first token", "最倒霉的 1%% 用户等首 Token 过久"},
	ttftCrit: {"The unluckiest 1%% stare at a blank screen: as good as frozen", "最倒霉的 1%% 用户盯着空白屏幕，基本等同于系统卡死"},

	preemptSome:    {"Occasional preemptions: the KV cache is tight", "偶有抢占：KV Cache 偏紧"},
	preemptMany:    {"Requests are being preempted: the KV cache is exhausted", "请求频繁被抢占：KV Cache 不足"},
	evPreemptLimit: {"KV_EXHAUSTED above %s", "超过 %s 判为 KV 耗尽"},

	scrapeErrors: {"Some metrics could not be read; the indicators they feed are UNKNOWN", "部分指标读取失败，受影响的指标记为未知"},
	scrapeDown:   {"The metrics endpoint does not answer", "指标端点无响应"},
	valueErrors:  {"%d error(s)", "%d 个错误"},

	roMemory:          {"not memory: KV pressure %s < %s", "不是显存不够：KV 压力 %s < %s"},
	roMemoryNoPreempt: {"not memory: KV pressure %s < %s, no preemptions", "不是显存不够：KV 压力 %s < %s，无抢占"},
	roQueueing:        {"not queueing: queue %s, queue/running %s", "不是请求排队：排队 %s，排队比 %s"},
	roOverload: {
		"not overloaded: the queue is not saturated (queue %s, queue/running %s; saturated above %s)",
		"不是过载：队列未饱和（排队 %s，排队比 %s；超过 %s 为饱和）"},
	roPrefill: {"not prefill: TTFT P99 %s < %s", "不是 Prefill 瓶颈：TTFT P99 %s < %s"},
	roDecode:  {"not decode speed: %s per request ≥ %s", "不是 Decode 慢：每请求 %s ≥ %s"},
	roOutlier: {
		"not this node alone: %s is %s the median of %d peers",
		"不是单节点异常：%[1]s 是 %[3]d 个同伴中位数的 %[2]s"},
	notMemory:      {"not memory", "不是显存不够"},
	notQueueing:    {"not queueing", "不是请求排队"},
	causeOnly:      {"The cause is %s.", "%s。"},
	causeAfterNots: {"%s, but %s.", "%s，而是 %s。"},

	summaryKVFull: {
		"Memory-bound: the KV cache is nearly full (%s ≥ %s). Whether requests are being preempted is not known; new requests will wait for room or preempt running ones.",
		"显存瓶颈：KV Cache 几乎占满（%s ≥ %s）。是否已有请求被抢占未知；新请求将等待空间，或抢占运行中的请求。"},
	summaryKVFullPreempt: {
		"Memory-bound: the KV cache is nearly full (%s ≥ %s) and requests are being preempted (%s); preempted work is recomputed, so those requests take longer.",
		"显存瓶颈：KV Cache 几乎占满（%s ≥ %s），请求正被抢占（%s）；被抢占的请求需要重算，耗时更长。"},
	summaryPreempt: {
		"Memory-bound: requests are being preempted (%s) because the KV cache cannot hold all running requests; preempted work is recomputed.",
		"显存瓶颈：请求正被抢占（%s），KV Cache 装不下所有运行中的请求，被抢占的请求需要重算。"},
	evPreemptRate: {"preemptions %s (KV_EXHAUSTED above %s)", "抢占 %s（超过 %s 判为 KV 耗尽）"},
	evE2EHigh:     {"E2E P99 %s ≥ %s (warn)", "E2E P99 %s ≥ %s（警告线）"},
	evTTFTHigh:    {"TTFT P99 %s ≥ %s (warn)", "TTFT P99 %s ≥ %s（警告线）"},
	recKVShed: {
		"Steer new and long requests away from this node until KV pressure falls below the warn level.",
		"在 KV 压力回落到警告线以下之前，把新的和长的请求引到其他节点。"},
	recKVCapacity: {
		"Give the KV cache more room: raise gpu_memory_utilization, use an FP8 KV cache, or add tensor-parallel GPUs.",
		"扩大 KV Cache：提高 gpu_memory_utilization、使用 FP8 KV Cache，或增加张量并行的 GPU。"},
	recKVContext: {
		"Or admit less: lower max_num_seqs or max_model_len, and enable prefix caching to share repeated prompt prefixes.",
		"或减少准入：调低 max_num_seqs 或 max_model_len，并开启前缀缓存以复用重复的 Prompt 前缀。"},

	summaryOverloadedNow: {
		"Overloaded: requests are queueing (queue %s, queue/running %s); with no history, this rests on the current window alone.",
		"过载：请求正在积压（排队 %s，排队比 %s）；缺少历史数据，仅依据当前窗口判断。"},
	evQueueHigh: {
		"queue %s (saturated above %s), queue/running %s, running %s",
		"排队 %s（超过 %s 视为饱和），排队比 %s，运行中 %s"},
	recShed: {
		"Shift traffic to other replicas; do not route here until the queue drains.",
		"把流量转到其他副本；队列消化之前不要再向该节点路由。"},
	recAddCapacity: {
		"Add replicas (data parallel) for this model: more replicas raise throughput, which is what an overloaded node lacks; more tensor parallel per replica would not.",
		"为该模型增加副本（数据并行）：副本越多整体吞吐越高，正是过载所缺的；单副本加张量并行并不能解决。"},
	recAdmission: {
		"Apply admission control upstream (rate limits, concurrent requests per tenant) so queues cannot grow without bound.",
		"在上游做准入控制（限流、按租户限制并发），避免队列无限增长。"},

	summaryBurstDrained: {
		"Healthy: %d queue spike(s) in %d refreshes over %s drained (longest %s); bursts are absorbed and nothing else needs explaining.",
		"系统健康：%[3]s内 %[2]d 次刷新中的 %[1]d 次排队尖刺都已消化（最长 %[4]s），偶发尖刺正常，没有其他异常。"},
	recBurstKeep: {
		"No action needed while bursts stay short; keep routing to this node.",
		"尖刺保持短暂即无需处理，可继续向该节点路由。"},
	recBurstSmooth: {
		"If bursts grow or recur, smooth arrivals (client retry jitter, rate limits) or keep more headroom.",
		"若尖刺变大或频繁出现，平滑请求到达（客户端重试加抖动、限流）或预留更多余量。"},

	causePrefill: {
		"heavy prompts (%s), which make prefill the bottleneck: the unluckiest 1%% wait %s for the first token (TTFT P99) while the queue stays low",
		"Prompt 过重（%s）导致 Prefill 成为瓶颈：排队很少，最倒霉的 1%% 用户却要等 %s 才见到首 Token（TTFT P99）"},
	heavyRatio:      {"prompt tokens at %s the generated tokens", "Prompt Token 是生成 Token 的 %s"},
	heavyPerRequest: {"%s prompt tokens per request", "每请求 %s 个 Prompt Token"},
	evQueueRatio:    {"queue %s, queue/running %s", "排队 %s，排队比 %s"},
	recChunkedPrefill: {
		"Enable chunked prefill so long prompts do not stall the decode of running requests.",
		"开启 Chunked Prefill，避免长 Prompt 阻塞正在 Decode 的请求。"},
	recPrefixCache: {
		"Enable prefix caching so repeated prefixes (system prompts, RAG context) are not recomputed.",
		"开启前缀缓存，避免重复前缀（系统提示词、RAG 上下文）被反复计算。"},
	recDisaggregate: {
		"For prompt-heavy traffic, consider separate prefill workers (disaggregated prefill) or routing long prompts to dedicated nodes.",
		"对 Prompt 重的流量，考虑 Prefill/Decode 分离部署，或把长 Prompt 路由到专用节点。"},

	causeDecodeStalls: {
		"decode stalls: the slowest 1%% of gaps between output tokens last %s (inter-token P99, median %s), as prefills take the engine's steps from the decode batch%s",
		"Decode 卡顿：最慢 1%% 的 Token 间隔长达 %[1]s（Token 间隔 P99，中位数 %[2]s），因为 Prefill 占用了 Decode 批次的步骤%[3]s"},
	decodeLockstep: {
		"; with data-parallel attention and expert parallelism (DP %d, EP %d) the ranks step together, so one rank's prefill stalls them all",
		"；数据并行注意力加专家并行（DP %[1]d，EP %[2]d）下各 rank 同步推进，一个 rank 的 Prefill 会让所有 rank 一起停顿"},
	recSmallerChunks: {
		"Lower the prefill chunk (max_num_batched_tokens) so each step spends less time on prefill, or move prefill to separate workers (disaggregated prefill).",
		"调小 Prefill 分块（max_num_batched_tokens），让每步花在 Prefill 上的时间更少，或把 Prefill 放到独立节点（Prefill/Decode 分离）。"},
	causeDecode: {
		"%s, which keeps single-request decode slow (~%s per request)",
		"%s导致单请求 Decode 速度有限（每请求 ~%s）"},
	decodeConcurrency: {
		" Under high concurrency%s requests contend for decode compute, and the long tail rises markedly (E2E P99 %s).",
		"高并发时%s多请求争抢 Decode 算力，长尾延迟显著上升（E2E P99 %s）。"},
	runningPart:              {" (%s running)", "（%s 个请求在跑）"},
	factorSize:               {"%s's size (%s active parameters per token)", "%s 体量大（每 Token 激活 %s 参数）"},
	factorCost:               {"%s's per-token cost (the profile gives no model size)", "%s 的单 Token 计算量（profile 未给出模型体量）"},
	factorDataParallel:       {"its data-parallel strategy (DP %d)", "数据并行策略（DP %d）"},
	factorConcurrency:        {"concurrency (%s requests decoding at once)", "高并发（%s 个请求同时 Decode）"},
	factorConcurrencyUnknown: {"a cause other than the model's size", "模型体量以外的原因"},
	theModel:                 {"the model", "该模型"},
	evTailRatio: {
		"E2E P99 is %s the median (P50 %s): a long tail",
		"E2E P99 是中位数（P50 %[2]s）的 %[1]s：长尾明显"},
	recTensorParallel: {
		"For latency-sensitive traffic, trade concurrency for speed: a tensor-parallel deployment (fewer replicas than today's DP %d, more GPUs each) decodes each request faster.",
		"对延迟敏感的流量，用并发换速度：张量并行部署（副本数少于当前的 DP %d，每副本更多 GPU）能加快单请求 Decode。"},
	recConcurrency: {
		"Cap concurrent requests per replica (max_num_seqs) or add replicas, so fewer requests share decode compute.",
		"限制单副本并发（max_num_seqs）或增加副本，减少争抢 Decode 算力的请求数。"},
	recSpeculative: {
		"Consider speculative decoding (a draft model, or MTP where the model has it) to raise per-request decode speed.",
		"考虑投机解码（草稿模型，或模型自带的 MTP），提高单请求 Decode 速度。"},
	recClientTimeout: {
		"Keep responses streaming, cap max_tokens where you can, and set client timeouts above the E2E P99 (%s).",
		"保持流式输出，尽量限制 max_tokens，客户端超时设在 E2E P99（%s）之上。"},
	recProfile: {
		"Add this node's deployment profile (active parameters, parallel strategy) to the fleet file, so llmdiag can tell model cost from faults.",
		"在 fleet 文件中补充该节点的部署 profile（激活参数量、并行策略），以便区分模型本身的开销与故障。"},

	summaryOutlier: {
		"This node is markedly slower than its %d peers serving %s under similar load: %s %s is %s their median (%s). The cause is local to the node.",
		"该节点明显慢于服务 %[2]s 的 %[1]d 个同伴（负载相近）：%[3]s 为 %[4]s，是同伴中位数（%[6]s）的 %[5]s。问题出在节点本身。"},
	evOutlier: {
		"%s %s vs peer median %s: %s (%d peers; outlier at ≥ %s)",
		"%[1]s %[2]s，同伴中位数 %[3]s：%[4]s（%[5]d 个同伴；≥ %[6]s 为异常）"},
	evLoadSimilar: {
		"load score %s vs peer median %s (similar within +%s)",
		"负载分 %s，同伴中位数 %s（差值 +%s 以内视为相近）"},
	recOutlierDrain: {
		"Drain the node and inspect it: GPU health (ECC errors, throttling, clocks), interconnect (NVLink, PCIe), noisy neighbours.",
		"摘除该节点并检查：GPU 健康（ECC 错误、降频、时钟）、互联（NVLink、PCIe）、同机干扰。"},
	recOutlierCompare: {
		"Compare its engine version, flags and deployment profile with its peers'.",
		"对比它与同伴的引擎版本、启动参数和部署 profile。"},

	summaryHealthy:     {"Healthy: every indicator read is within bounds; nothing needs explaining.", "系统健康：读取到的各项指标均在正常范围内。"},
	summaryUnexplained: {"No known cause explains %s; it needs a closer look.", "没有已知原因能解释：%s；需要进一步排查。"},
	evReading:          {"%s: %s", "%s：%s"},
	recNone:            {"No action needed.", "无需处理。"},
	recWatch: {
		"Keep watching these indicators; if they persist, compare the node with its peers and check the engine logs.",
		"持续关注这些指标；若持续存在，与同伴节点对比并检查引擎日志。"},
	nameDecodeSpeed:   {"Per-request decode speed", "单请求 Decode 速度"},
	namePrefillDecode: {"Prefill/decode ratio", "Prefill/Decode 速度比"},
	nameQueueTime:     {"TTFT spent queued", "TTFT 中的排队时间"},
	nameInterToken:    {"Inter-token latency P99", "Token 间隔 P99"},
	nameAborts:        {"Aborted requests", "中止请求"},
	nameTrend:         {"Mean E2E trend", "平均 E2E 延迟趋势"},
	namePeers:         {"Peers (same model)", "同模型同伴"},
	nameStaleness:     {"Data age", "数据时效"},

	condQueue: {"queueing (queue > %s or queue/running ≥ %s)", "积压（排队 > %s 或排队比 ≥ %s）"},
	condRatio: {"queue/running ≥ %s", "排队比 ≥ %s"},
	condKV:    {"KV ≥ %s", "KV ≥ %s"},
	evEpisodes: {
		"%s in %d of the last %d refreshes over %s: %d episode(s), longest %s, %d drained",
		"最近 %[3]d 次刷新（%[4]s）中 %[2]d 次%[1]s：%[5]d 段，最长 %[6]s，%[7]d 段已消化"},
	evEpisodesNow: {
		"%s in %d of the last %d refreshes over %s: %d episode(s), longest %s, %d drained, one ongoing now",
		"最近 %[3]d 次刷新（%[4]s）中 %[2]d 次%[1]s：%[5]d 段，最长 %[6]s，%[7]d 段已消化，当前仍在持续"},
	evEpisodesNone: {
		"%s in none of the last %d refreshes over %s",
		"最近 %[2]d 次刷新（%[3]s）中从未%[1]s"},
	evPipelineParallel: {
		"pipeline parallel ×%d: fits a larger model across GPUs, but every token passes each stage, so it does not speed a single request",
		"流水线并行 ×%d：让更大的模型跨卡放下，但每个 Token 都要依次经过各级，不加速单个请求"},
	evMoE: {
		"MoE: %s of %s parameters active per token; decode cost follows the active parameters, memory the total",
		"MoE：每 Token 激活 %s / 共 %s 参数；Decode 开销取决于激活参数，显存占用取决于总参数"},
	evGPU: {"GPU %s", "GPU %s"},

	decodeIdle:      {"Nothing decoding in the window", "窗口内没有请求在 Decode"},
	decodeUnknown:   {"Unknown: needs the generation rate and running requests, or a time-per-output-token histogram", "未知：需要生成速率与运行中请求数，或每输出 Token 耗时直方图"},
	valuePerRequest: {"%s per request", "每请求 %s"},
	decodeOK:        {"Each request decodes at a readable pace", "单请求 Decode 速度正常"},
	decodeSlow:      {"Each request decodes slowly", "单请求 Decode 慢"},
	decodeSlowModel: {"Slow per request, as a large model's decode is", "单请求慢，符合大模型的 Decode 特性"},
	decodeSlowDP:    {"Slow per request: data parallel adds throughput, not single-request speed", "单请求慢：数据并行只提升吞吐，不加速单个请求"},
	decodeSlowModelDP: {
		"Slow per request: a large model served data-parallel, which adds throughput, not single-request speed",
		"单请求慢：大模型 + 数据并行，只提升吞吐，不加速单个请求"},

	pdIdle:      {"No prompts in the window", "窗口内没有新的 Prompt"},
	pdPhysics:   {"A gap of this size is physics, not a fault: prefill is parallel, decode serial", "这种差距是物理特性而非故障：Prefill 并行，Decode 串行"},
	pdHeavy:     {"Prompts dominate the work, but the first token is not late", "Prompt 占了主要工作量，但首 Token 并不慢"},
	pdHeavyTTFT: {"Prompts dominate the work and hold back the first token", "Prompt 占了主要工作量，拖慢首 Token"},

	queueTimeNotExposed: {"Unknown: the engine exposes no queue-time histogram, so TTFT cannot be split", "未知：引擎未暴露排队时间直方图，无法拆分 TTFT"},
	queueTimeNoData:     {"Unknown: no mean TTFT or queue time in the window", "未知：窗口内没有 TTFT 或排队时间的均值"},
	valueShareOfTTFT:    {"%s of TTFT", "占 TTFT %s"},
	evQueueTimeSplit: {
		"mean queue time %s of mean TTFT %s; prefill and the rest %s (mostly waiting at ≥ %s)",
		"平均排队 %s，平均 TTFT %s；Prefill 及其余 %s（≥ %s 视为主要在等）"},
	evQueueTimeP99: {"queue time P99 %s", "排队时间 P99 %s"},
	queueTimeOK:    {"The first token waits on prefill, not the queue", "首 Token 主要花在 Prefill，而不是排队"},
	queueTimeShort: {"Mostly queue time, but TTFT is short", "主要是排队时间，但 TTFT 很短"},
	queueTimeWarn:  {"The first token is late because requests wait in the queue", "首 Token 慢是因为请求在排队"},

	itlNotExposed: {"Unknown: the engine exposes no inter-token latency histogram", "未知：引擎未暴露 Token 间隔直方图"},
	itlNoData:     {"Unknown: no tokens in the window", "未知：窗口内没有输出 Token"},
	itlOK:         {"Streaming is smooth", "流式输出顺畅"},
	itlWarn:       {"Readers see pauses between tokens", "用户能感到 Token 之间的停顿"},
	itlCrit:       {"Output stalls for a second or more between tokens", "Token 之间卡顿一秒以上"},
	evITLTail:     {"P50 %s: P99 is %s the median", "P50 %s：P99 是中位数的 %s"},
	evITLPrefill: {
		"heavy prompts: long prefills scheduled with decode steps stall the tokens of running requests",
		"Prompt 偏重：长 Prefill 与 Decode 同批调度，会卡住运行中请求的 Token"},

	abortsNotExposed: {"Unknown: the engine does not tell aborted requests apart", "未知：引擎未区分中止的请求"},
	abortsNoRate:     {"Unknown: finished requests per second not known, so no share", "未知：缺少完成请求速率，无法得出占比"},
	abortsNoRequests: {"Unknown: no requests finished in the window", "未知：窗口内没有完成的请求"},
	abortsOK:         {"Few requests are given up on", "极少请求被中止"},
	abortsWarn:       {"A noticeable share of requests end aborted or in error", "相当比例的请求被中止或出错"},
	abortsCrit:       {"Many requests end aborted or in error: as clients see it, an outage", "大量请求被中止或出错：在客户端看来等同于故障"},
	evAborts: {
		"%s aborted of %s finished: %s (warn ≥ %s, crit ≥ %s)",
		"完成 %[2]s 中中止 %[1]s：%[3]s（警告 ≥ %[4]s，严重 ≥ %[5]s）"},

	trendUnknown: {"Unknown: %d refresh(es) with a mean E2E latency, %d needed for a trend", "未知：仅 %d 次刷新有平均 E2E 延迟，趋势至少需要 %d 次"},
	trendFlat:    {"Mean latency is steady", "平均延迟平稳"},
	trendRising:  {"Mean latency is rising: the node is getting strained", "平均延迟持续上涨，系统开始吃力"},
	trendFalling: {"Mean latency is falling: the node is recovering", "平均延迟在下降，系统在恢复"},
	evTrend: {
		"fitted mean E2E %s → %s (%s) over %d refreshes in %s, Theil–Sen slope (rising at ≥ +%s)",
		"拟合平均 E2E 延迟 %[1]s → %[2]s（%[3]s），%[5]s内 %[4]d 次刷新，Theil–Sen 斜率（上涨 ≥ +%[6]s 为上升）"},
	valueTrend: {"%s over %s", "%[2]s内 %[1]s"},

	peersInLine:    {"In line with the other nodes serving the model", "与同模型的其他节点相当"},
	peersOutlier:   {"Markedly worse than its peers under similar load", "负载相近，却明显差于同伴"},
	peersGroupSlow: {"The whole group is slow: a characteristic of the model or deployment, not of this node", "整组都慢：是模型或部署的特性，而不是该节点的问题"},
	peersFaster:    {"Faster than its peers", "快于同伴"},
	evPeerMetric: {
		"%s: this node %s vs peer median %s (%s, %d peers); group median %s over %d nodes",
		"%[1]s：本节点 %[2]s，同伴中位数 %[3]s（%[4]s，%[5]d 个同伴）；全组 %[7]d 个节点中位数 %[6]s"},
	valuePeers: {"%s the median of %d", "%[2]d 个同伴中位数的 %[1]s"},
	evGroupSlow: {
		"all %d nodes serving %s are slow: median %s %s (warn ≥ %s)",
		"服务 %[2]s 的 %[1]d 个节点都慢：%[3]s 中位数 %[4]s（警告 ≥ %[5]s）"},

	stalenessUnknown:  {"Unknown: the source does not report the data's age", "未知：数据源未报告数据时效"},
	stalenessOK:       {"Fresh", "数据新鲜"},
	stalenessCrit:     {"Too old to judge the node", "数据过旧，无法判断节点"},
	stalenessFlagged:  {"Marked stale by its source", "数据源标记为过期"},
	valueStaleFlagged: {"stale", "过期"},
	evStalenessLimit:  {"stale after %s", "超过 %s 视为过期"},

	roMemoryNearFull: {"not memory yet: KV pressure %s < %s, no preemptions above the limit", "还不是显存耗尽：KV 压力 %s < %s，抢占未超限"},
	roMemoryUnknown:  {"memory not checked: KV pressure unknown", "无法检查显存：KV 压力未知"},
	roQueueUnknown:   {"queueing not checked: queue unknown", "无法检查排队：排队数未知"},
	roBurstMinor: {
		"not bursts: queueing in %d of %d refreshes, drained; bursts do not explain %s",
		"不是突发流量：%[2]d 次刷新中 %[1]d 次积压且已消化；突发解释不了 %[3]s"},
	restNothing:      {"the verdict's figures", "当前结论所依据的指标"},
	roNoBurst:        {"not bursts: no queueing in %d refreshes over %s", "不是突发流量：%[2]s内 %[1]d 次刷新均无积压"},
	roBurstNoHistory: {"not bursts: no queueing now, and no history to show earlier spikes", "不是突发流量：当前无积压，也没有历史数据显示尖刺"},
	roPrefillUnknown: {"prefill not checked: TTFT unknown", "无法检查 Prefill：TTFT 未知"},
	roPrefillQueue: {
		"not prefill: TTFT P99 %s is high, but %s of the wait for the first token is queue time",
		"不是 Prefill 瓶颈：TTFT P99 %s 偏高，但首 Token 等待中 %s 是排队时间"},
	roPrefillLight: {
		"not prefill: TTFT P99 %s is high, but prompts are not heavy",
		"不是 Prefill 瓶颈：TTFT P99 %s 偏高，但 Prompt 并不重"},
	roPrefillSpikes: {
		"not prefill: TTFT P99 %s is high, but the queue spiked in the window",
		"不是 Prefill 瓶颈：TTFT P99 %s 偏高，但窗口内排队出现尖刺"},
	roPrefillPeers:  {"not prefill: peers serving the same model are several times faster", "不是 Prefill 瓶颈：同模型的同伴快数倍"},
	roDecodeUnknown: {"decode speed not checked: per-request decode speed unknown", "无法检查 Decode 速度：单请求 Decode 速度未知"},
	roDecodeTail: {
		"not decode-bound: %s per request is slow, but E2E P99 %s is within bounds",
		"不是 Decode 瓶颈：每请求 %s 偏慢，但 E2E P99 %s 在正常范围内"},
	roDecodeNoTail: {
		"decode-bound not checked: %s per request is slow, but E2E P99 unknown",
		"无法判断 Decode 瓶颈：每请求 %s 偏慢，但 E2E P99 未知"},
	roDecodeOther: {
		"not decode-bound alone: %s per request is slow, but queueing, KV or peers say otherwise",
		"不只是 Decode 瓶颈：每请求 %s 偏慢，但排队、KV 或同伴另有说明"},
	roNoPeers: {
		"not compared with peers: fewer than %d other fresh nodes serve %s",
		"未与同伴比较：服务 %[2]s 的其他新鲜节点少于 %[1]d 个"},
	evUnexplainedAlso: {"not explained by this cause: %s", "该原因解释不了：%s"},
	evReadingWhy:      {"%s: %s — %s", "%s：%s — %s"},

	summaryBurstTail: {
		"Bursts: %d queue spike(s) in %d refreshes over %s drained (longest %s), and they explain the tail (%s); nothing else needs explaining. The node keeps taking traffic.",
		"突发流量：%[3]s内 %[2]d 次刷新中的 %[1]d 次排队尖刺都已消化（最长 %[4]s），长尾（%[5]s）由此而来，没有其他异常。节点仍可接收流量。"},
	summaryBurstShort: {
		"Short waits in the queue: %s of the wait for the first token is queue time, which explains %s, though no refresh caught a queue surge. The node keeps taking traffic.",
		"短暂排队：首 Token 等待中 %[1]s 是排队时间，这解释了 %[2]s，但没有一次刷新捕捉到排队激增。节点仍可接收流量。"},
	recBurstHeadroom: {
		"If the tail during bursts matters, keep headroom: add a replica, or let the router steer away while the queue is above its saturation point.",
		"若突发期间的长尾不可接受，预留余量：增加副本，或让路由在排队超过饱和点时绕开该节点。"},
	recOverloadTP: {
		"With tensor parallel ×%d per replica, consider more, smaller replicas (data parallel): that raises throughput, which is what an overloaded node lacks.",
		"当前每副本张量并行 ×%d，可考虑更多、更小的副本（数据并行）：提升整体吞吐，正是过载节点所缺的。"},
	factorSizeMoE: {"%s's size (MoE, %s of %s parameters active per token)", "%s 体量大（MoE，每 Token 激活 %s / 共 %s 参数）"},
	decodeGroup: {
		" All %d nodes serving %s show it (median %s %s): a characteristic of the model and deployment, not of this node.",
		"服务 %[2]s 的 %[1]d 个节点都如此（%[3]s 中位数 %[4]s）：这是模型与部署的特性，而不是该节点的问题。"},
	recTPAlready: {
		"It already runs tensor parallel ×%d: for more single-request speed use faster GPUs or speculative decoding; add replicas for throughput.",
		"已使用张量并行 ×%d：要进一步加快单请求，换更快的 GPU 或用投机解码；要提升吞吐则增加副本。"},
	summaryGroupSlow: {
		" All %d nodes serving %s are slow (median %s %s): a characteristic of the model or deployment rather than this node.",
		"服务 %[2]s 的 %[1]d 个节点都慢（%[3]s 中位数 %[4]s）：这是模型或部署的特性，而不是该节点的问题。"},
	recKVWatch: {
		"The KV cache is close to preempting: lower max_num_seqs, or enable prefix caching, before it does.",
		"KV Cache 接近触发抢占：在此之前调低 max_num_seqs 或开启前缀缓存。"},
	recGroupSlow: {
		"Change the deployment, not this node: tensor parallel for single-request latency, more replicas for throughput.",
		"调整部署而不是该节点：要单请求延迟用张量并行，要吞吐则增加副本。"},
	recLatency: {
		"Compare this node with its peers and check the engine logs for what holds requests back.",
		"与同伴节点对比，并查看引擎日志，找出拖慢请求的原因。"},
	recITL: {
		"Long gaps between tokens: enable chunked prefill so prompts do not stall decode, or lower max_num_seqs.",
		"Token 间隔过长：开启 Chunked Prefill 避免 Prompt 卡住 Decode，或调低 max_num_seqs。"},
	recAborts: {
		"Find why requests abort: client timeouts below the E2E P99, engine errors in the logs, prompts over max_model_len.",
		"查明请求被中止的原因：客户端超时低于 E2E P99、引擎日志中的错误、Prompt 超过 max_model_len。"},
	recTrend: {
		"Latency is climbing: watch queue and KV pressure, and add a replica before it turns into overload.",
		"延迟在攀升：关注排队与 KV 压力，在演变成过载之前增加副本。"},
	recQueueTime: {
		"Requests wait before they are scheduled: add a replica, or raise max_num_seqs if the KV cache has room.",
		"请求在调度前等待：增加副本，或在 KV Cache 有余量时调高 max_num_seqs。"},
	recScrape: {
		"Fix the scrape errors so the indicators they feed can be read.",
		"修复指标采集错误，让受影响的指标可以读取。"},

	summaryOverloadedFor: {
		"Overloaded: more load than capacity. The queue has not drained for %s (queue %s, queue/running %s; OVERLOADED after %s), and the node takes no traffic until it does.",
		"过载：负载超过容量。队列已 %[1]s 未消化（排队 %[2]s，排队比 %[3]s；超过 %[4]s 判为过载），消化之前节点不再接收流量。"},
	summaryQueueSaturated: {
		"A burst so far: the queue has been saturated for %s (queue %s, queue/running %s), OVERLOADED if it has not drained after %s. The node takes no traffic until the queue drains.",
		"目前是突发：队列已饱和 %[1]s（排队 %[2]s，排队比 %[3]s），若 %[4]s 后仍未消化则判为过载。队列消化之前节点不再接收流量。"},
	summaryQueueRising: {
		"A burst: requests queue now (queue %s, queue/running %s). Transient so far; the node keeps taking traffic unless the queue stays saturated.",
		"突发流量：当前有请求排队（排队 %s，排队比 %s）。目前是瞬时现象；除非队列持续饱和，节点仍可接收流量。"},
	summaryKVHeld: {
		"Memory-bound: the KV cache has been at or above %s for %s; it reads %s now, below for %d refresh(es), not yet enough to call it relieved.",
		"显存瓶颈：KV Cache 已 %[2]s 处于 %[1]s 及以上；当前为 %[3]s，仅 %[4]d 次刷新低于该值，尚不足以认为已缓解。"},
	summaryRecovering: {
		"Recovering from an overload: the queue stayed saturated for %s and drained %s ago; the window's latency still includes it. The node takes traffic again.",
		"正在从过载中恢复：队列饱和持续了 %[1]s，已于 %[2]s 前消化；窗口内的延迟仍包含这段时间。节点已恢复接收流量。"},
	evHeldDip: {
		"%s now, below the limit for %d refresh(es): the saturation holds until %d in a row (routing_hold)",
		"当前 %[1]s，已 %[2]d 次刷新低于阈值：连续 %[3]d 次才解除饱和（routing_hold）"},
	evSaturatedSince: {
		"saturated for %s (%d episode(s) in the history, longest %s); OVERLOADED after %s without draining",
		"已饱和 %[1]s（历史中 %[2]d 段，最长 %[3]s）；持续 %[4]s 未消化即判为过载"},
	evRecovered: {
		"last overload: the queue stayed saturated for %s and drained %s ago (%d episode(s) in the history)",
		"上次过载：队列饱和持续 %[1]s，于 %[2]s 前消化（历史中 %[3]d 段）"},
	roOverloadShort: {
		"not overloaded yet: the queue has been saturated for %s, less than %s",
		"尚未判为过载：队列饱和 %s，未超过 %s"},
	roOverloadRecovered: {
		"not overloaded now: the queue drained %s ago after %s saturated",
		"当前未过载：队列在饱和 %[2]s 后已于 %[1]s 前消化"},
	kvRising: {"At the critical level for %d refresh(es): saturated once it holds for %d", "已 %d 次刷新达到严重阈值：连续 %d 次即判为饱和"},
	kvHeld:   {"Saturated until it stays below the critical level for %d refreshes in a row", "连续 %d 次刷新低于严重阈值才解除饱和"},

	kvCritPreempt: {"The KV cache is nearly full and requests are being preempted", "KV Cache 几乎占满，请求正被抢占"},
	summaryKVFullNoPreempt: {
		"Memory-bound: the KV cache is nearly full (%s ≥ %s), though no request has been preempted yet; new requests will wait for room or preempt running ones.",
		"显存瓶颈：KV Cache 几乎占满（%s ≥ %s），虽然尚无请求被抢占；新请求将等待空间，或抢占运行中的请求。"},
	recKVShedPreempt: {
		"Steer new and long requests away from this node until the preemptions stop.",
		"在抢占停止之前，把新的和长的请求引到其他节点。"},
	recPreemptWatch: {
		"Requests are already being preempted: lower max_num_seqs, or enable prefix caching, to give the KV cache room.",
		"已有请求被抢占：调低 max_num_seqs 或开启前缀缓存，为 KV Cache 腾出空间。"},
	summaryHealthyPartial: {
		"Healthy as far as llmdiag can tell: every indicator read is within bounds, but these are unknown: %s.",
		"就现有数据而言系统健康：读取到的各项指标均在正常范围内，但以下指标未知：%s。"},
	e2eTailSlowDecode: {"Long tail: each request decodes slowly", "长尾延迟明显：单请求 Decode 慢"},
	decodeTail:        {" The long tail rises markedly (E2E P99 %s).", "长尾延迟显著上升（E2E P99 %s）。"},
	causePrefillQueueUnknown: {
		"heavy prompts (%s), which make prefill the bottleneck: the unluckiest 1%% wait %s for the first token (TTFT P99)",
		"Prompt 过重（%s）导致 Prefill 成为瓶颈：最倒霉的 1%% 用户要等 %s 才见到首 Token（TTFT P99）"},
	pdHeavyOnly:     {"Prompts dominate the work", "Prompt 占了主要工作量"},
	queueTimeMostly: {"Mostly queue time", "主要是排队时间"},
	roBurstSmall: {
		"not bursts: queueing now, but %s waiting is no surge (a burst is above %s), and no earlier spike drained",
		"不是突发流量：当前有排队，但 %s 个等待算不上激增（突发需超过 %s），也没有已消化的尖刺"},
	roBurstQueueUnknown: {
		"bursts not checked: queue/running says requests are queueing, but the queue gauge that would show a surge is unknown",
		"无法检查突发流量：排队比显示有请求在排队，但能显示激增的排队数未知"},
	roMemoryNearFullUnknown: {
		"not memory yet: KV pressure %s < %s; preemptions are not known",
		"还不是显存耗尽：KV 压力 %s < %s；抢占情况未知"},
	causeDecodeStallsBare: {
		"decode stalls: the slowest 1%% of gaps between output tokens last %s (inter-token P99, median %s)%s",
		"Decode 卡顿：最慢 1%% 的 Token 间隔长达 %[1]s（Token 间隔 P99，中位数 %[2]s）%[3]s"},
	roPrefillPromptsUnknown: {
		"prefill not checked: TTFT P99 %s is high, but the prompt token rate is unknown",
		"无法检查 Prefill：TTFT P99 %s 偏高，但 Prompt 速率未知"},
	roMemoryNotHeld: {
		"not memory yet: KV pressure %s has been at or above %s for %d refresh(es), saturated once it holds for %d",
		"还不是显存耗尽：KV 压力 %[1]s 已 %[3]d 次刷新达到 %[2]s 及以上，连续 %[4]d 次即判为饱和"},

	nameRunning:    {"Running requests", "运行中请求数"},
	nameKVCapacity: {"KV capacity", "KV 容量"},
	nameFinished:   {"Finished requests", "完成请求"},
	evNegative: {
		"negative readings, read as unknown: %s (a rate taken across a counter reset, or a broken gauge)",
		"读数为负，按未知处理：%s（跨计数器重置计算的速率，或有问题的仪表）"},
	noteNegative: {"%s read %s, below 0: read as unknown", "%s 读数为 %s，小于 0：按未知处理"},
	evKVOverClamped: {
		"KV pressure read %s, above 100%%: read as 100%%",
		"KV 压力读数为 %s，超过 100%%：按 100%% 处理"},
	evKVOverUnknown: {
		"KV pressure read %s, far above 100%%: not a share of the cache (a sum over ranks, or a percentage?), so read as unknown",
		"KV 压力读数为 %s，远超 100%%：不是缓存占用比例（可能是多个 rank 之和，或百分数），按未知处理"},
	evRunningStuck: {
		"running reads 0 now and at the %d refreshes before, yet the generation rate (%s now) rose between them: tokens came out while nothing read as running (a broken gauge, or requests shorter than a refresh), so running is read as unknown",
		"运行中请求数在当前及之前 %d 次刷新中均为 0，但生成速率（当前 %s）在此期间上升：有 Token 产出却没有请求显示在运行（仪表有问题，或请求短于刷新间隔），运行中请求数按未知处理"},
	evTTFTExcludesQueue: {
		"mean TTFT %s is below the mean queue time %s: this engine's TTFT leaves the queue out, so the wait for the first token is read as queue time + TTFT",
		"平均 TTFT %s 低于平均排队时间 %s：该引擎的 TTFT 不含排队，首 Token 等待按排队时间 + TTFT 计算"},
	evTTFTBelowQueue: {
		"mean TTFT %s is below the mean queue time %s, which TTFT includes: the two histograms count different requests (TTFT at the first token, queue time at the end?), so queue time is read as all of TTFT",
		"平均 TTFT %s 低于其所包含的平均排队时间 %s：两个直方图统计的请求不同（TTFT 在首 Token 时记录，排队时间在结束时？），排队时间按占满 TTFT 处理"},
	evQueueTimeSplitExcluded: {
		"mean queue time %s, then a mean TTFT %s that leaves the queue out: the first token came %s after arrival, %s of it queued (mostly waiting at ≥ %s)",
		"平均排队 %s，之后平均 TTFT %s（不含排队）：首 Token 在到达后 %s 出现，其中 %s 在排队（≥ %s 视为主要在等）"},
	valueShareOfWait:    {"%s of the wait", "占等待 %s"},
	unknownInconsistent: {"Unknown: %s", "未知：%s"},
	nameSLO:             {"SLO", "SLO"},
	sloValue:            {"%s within %s (%s)", "%[3]s 内 %[1]s 在 %[2]s 以内"},
	sloBurnCrit: {
		"Error budget burning fast: the burn rate is at or above %[3]s× over both %[1]s and %[2]s (%[4]s of the %[5]s budget within %[1]s)",
		"错误预算快速消耗：%[1]s 和 %[2]s 内的消耗速率均达到 %[3]s× 及以上（%[1]s 内耗掉 %[5]s 预算的 %[4]s）"},
	sloBurnWarn: {
		"Error budget burning steadily: the burn rate is at or above %[3]s× over both %[1]s and %[2]s (%[4]s of the %[5]s budget within %[1]s)",
		"错误预算持续消耗：%[1]s 和 %[2]s 内的消耗速率均达到 %[3]s× 及以上（%[1]s 内耗掉 %[5]s 预算的 %[4]s）"},
	sloOnlyIfMissed: {
		"; only if the requests of the bucket around the target missed it (%s is not a bucket bound)",
		"；前提是目标所在桶内的请求都超标（%s 不是桶边界）"},
	sloWithin: {
		"Within budget: the burn rate is below %s× over %s or %s, and below %s× over %s or %s",
		"预算之内：消耗速率在 %[2]s 或 %[3]s 内低于 %[1]s×，且在 %[5]s 或 %[6]s 内低于 %[4]s×"},
	sloUnknown: {
		"Unknown: a window the burn alerts read was not read or not fully covered, or the engine does not export this latency histogram",
		"未知：消耗告警所需的窗口未读取或未完整覆盖，或引擎未导出该延迟直方图"},
	evSLOWindow: {
		"%s: %s of %s requests within %s, burn rate %s",
		"%[1]s：%[3]s 个请求中 %[2]s 在 %[4]s 以内，消耗速率 %[5]s"},
	evSLOWindowEmpty:   {"%s: no requests, no burn", "%s：无请求，无消耗"},
	evSLOWindowMissing: {"%s: not read", "%s：未读取"},

	namePrefixCache: {"Prefix-cache hit rate", "前缀缓存命中率"},
	nameSpec:        {"Speculative decoding", "投机解码"},
	nameLoRA:        {"LoRA adapters", "LoRA 适配器"},
	prefixHigh: {
		"Most prompt tokens come from the prefix cache: prefill is cheaper than the prompt rate suggests",
		"大部分 Prompt Token 命中前缀缓存：Prefill 开销低于 Prompt 速率所示"},
	prefixLow:  {"Few prompt tokens hit the prefix cache: prompts are prefilled in full", "前缀缓存命中很少：Prompt 基本全量 Prefill"},
	prefixSome: {"Some prompt tokens come from the prefix cache", "部分 Prompt Token 命中前缀缓存"},
	specGain: {
		"Speculative decoding emits several tokens per step: decode is faster than one token per step",
		"投机解码每步产出多个 Token：Decode 快于每步一个 Token"},
	specLowGain: {
		"Speculative decoding gains little: most draft tokens are rejected, and decode may be slower for it",
		"投机解码收益很小：大部分草稿 Token 被拒绝，Decode 可能因此更慢"},
	loraWaiting: {"Requests wait for %s LoRA adapter(s) to be loaded", "有请求在等待 %s 个 LoRA 适配器加载"},
	loraNoWait:  {"No request waits for a LoRA adapter", "没有请求在等待 LoRA 适配器"},
	valueSpec:   {"%s accepted, %s tok/step", "接受 %s，每步 %s Token"},
	valueLoRA:   {"%s running, %s waiting", "运行 %s，等待 %s"},
	evPrefixCache: {
		"prefix cache: %s of prompt tokens found in the cache over the window (hits ÷ queries)",
		"前缀缓存：窗口内 %s 的 Prompt Token 命中缓存（命中 ÷ 查询）"},
	evSpec: {
		"speculative decoding: %s of draft tokens accepted, %s tokens per step and request: decode is that much faster than the step rate",
		"投机解码：草稿 Token 接受率 %s，每请求每步 %s 个 Token：Decode 相应快于步速"},
	evSpecLow: {
		"speculative decoding: only %s of draft tokens accepted (%s tokens per step and request, below %s acceptance): the draft model's work is mostly wasted and slows each step",
		"投机解码：草稿 Token 接受率仅 %s（每请求每步 %s 个 Token，低于 %s）：草稿模型的计算大多浪费，反而拖慢每一步"},
	evLoRAWaiting: {
		"requests wait for LoRA adapters: %s adapter(s) waited for, %s running (vLLM lora_requests_info): the queue holds requests whose adapter is not loaded",
		"请求在等待 LoRA 适配器：%s 个适配器被等待，%s 个在运行（vLLM lora_requests_info）：队列中有请求的适配器尚未加载"},
	recSpecDraft: {
		"Check the draft model or lower num_speculative_tokens: acceptance is %s.",
		"检查草稿模型，或调低 num_speculative_tokens：接受率仅 %s。"},
	kvOffload: {
		"GPU KV full by design: offload tier (%s) keeps the GPU cache full, with no preemptions and no queue",
		"GPU KV 按设计占满：卸载层（%s）让 GPU 缓存保持满载，无抢占、无排队"},
	roMemoryOffload: {
		"not memory: GPU KV full by design: offload tier (%s); KV pressure %s with no preemptions and no queue",
		"不是显存耗尽：GPU KV 按设计占满：卸载层（%s）；KV 压力 %s，无抢占、无排队"},
	// LoRA adapter contention (cause_lora.go).
	causeNameLoRAContention: {"LoRA adapter contention", "LoRA 适配器争用"},
	summaryLoRAContention: {
		"Requests queue for LoRA adapter(s) %[1]s, which are not loaded: all %[2]s adapter slot(s) (max_lora) are held by %[3]s. The queue (%[4]s waiting, %[5]s running) is those requests waiting for a slot.",
		"请求在排队等待未加载的 LoRA 适配器 %[1]s：全部 %[2]s 个适配器槽位（max_lora）被 %[3]s 占用。队列（等待 %[4]s，运行中 %[5]s）就是这些等待槽位的请求。"},
	evLoRAContention: {
		"LoRA adapters: %[1]s waited for and not loaded; %[2]s hold the slots (max_lora %[3]s) (vLLM lora_requests_info)",
		"LoRA 适配器：%[1]s 被等待且未加载；%[2]s 占用全部槽位（max_lora %[3]s）（vLLM lora_requests_info）"},
	evLoRAQueue: {
		"queue %[1]s, running %[2]s (queue/running %[3]s): every adapter the waiting requests name (%[4]s) is one no running request holds, so the queue is made of requests waiting for an adapter slot as far as the metrics tell",
		"排队 %[1]s，运行中 %[2]s（排队/运行 %[3]s）：等待中的请求所指定的适配器（%[4]s）均未被运行中的请求占用，就指标所见，队列由等待适配器槽位的请求组成"},
	recLoRAMaxLoras: {
		"Raise max_loras (vLLM --max-loras, now %[1]s) so that the running batch can hold the %[2]d adapters in use; each slot takes GPU memory for an adapter's weights (set by --max-lora-rank).",
		"调高 max_loras（vLLM --max-loras，当前 %[1]s），使运行批次能同时容纳正在使用的 %[2]d 个适配器；每个槽位都要占用适配器权重的显存（由 --max-lora-rank 决定）。"},
	recLoRARoute: {
		"Route each adapter's requests to the nodes that have it loaded (adapter-aware routing), or give the waiting adapter(s) %s nodes of their own.",
		"按适配器路由请求，发往已加载该适配器的节点（适配器感知路由），或为等待中的适配器 %s 单独分配节点。"},
	roLoRANoWait: {
		"not LoRA adapters: no request waits for an adapter",
		"不是 LoRA 适配器争用：没有请求在等待适配器"},
	roLoRAUnknown: {
		"not known whether LoRA adapters explain it: requests wait for %s adapter(s), but the engine does not say which adapters hold the slots or max_lora",
		"无法判断是否为 LoRA 适配器争用：有请求在等待 %s 个适配器，但引擎未给出占用槽位的适配器或 max_lora"},
	roLoRALoaded: {
		"not LoRA adapters: some adapters waited for (%s) are loaded, so requests wait for more than an adapter slot",
		"不是 LoRA 适配器争用：被等待的适配器（%s）中有已加载的，请求等待的不只是适配器槽位"},
	roLoRASlotsFree: {
		"not LoRA adapters: %d of %s adapter slots (max_lora) are held, so an adapter waited for can be loaded",
		"不是 LoRA 适配器争用：%[2]s 个适配器槽位（max_lora）只占用了 %[1]d 个，被等待的适配器可以加载"},
	roLoRANoQueue: {
		"not LoRA adapters: adapter(s) %s wait for a slot, but the queue reads %s",
		"不是 LoRA 适配器争用：适配器 %s 在等待槽位，但队列读数为 %s"},
	ratioLoRA: {
		"Sustained backlog: requests wait for a LoRA adapter slot, not for capacity",
		"排队比持续偏高：请求在等待 LoRA 适配器槽位，而非算力不足"},
	causeNameUnspecified:  {"Undetermined", "未判定"},
	causeNameNoData:       {"No data", "无数据"},
	causeNameTargetDown:   {"Target down", "目标宕机"},
	causeNameKVExhausted:  {"KV cache exhausted", "KV Cache 耗尽"},
	causeNameOverloaded:   {"Overloaded", "过载"},
	causeNameBurst:        {"Burst", "突发流量"},
	causeNamePrefillBound: {"Prefill-bound", "Prefill 瓶颈"},
	causeNameDecodeBound:  {"Decode-bound", "Decode 瓶颈"},
	causeNameNodeOutlier:  {"Node outlier", "节点异常"},
	causeNameHealthy:      {"Healthy", "健康"},
	causeNameUnexplained:  {"Unexplained", "原因不明"},

	causeNameStalled:  {"Stalled", "引擎停滞"},
	nameProgress:      {"Progress", "推进"},
	valueProgressFlat: {"flat for %s", "%s 未变"},
	progressStalled: {
		"the progress counters read the same at %d refreshes in a row (STALLED from %d) with requests running or waiting: the engine completes no step",
		"进度计数器连续 %d 次刷新读数相同（%d 次即判停滞），期间有请求在运行或等待：引擎没有完成任何一步"},
	summaryStalled: {
		"Stalled: %s running and %s waiting, yet the engine has made no progress for %s (%d refreshes): no token generated, no prompt processed, no request finished. /metrics still answers; the engine loop does not.",
		"引擎停滞：%s 个请求在运行、%s 个在等待，但引擎已连续 %s 没有任何推进（%d 次刷新）：没有生成 Token，没有处理 Prompt，没有请求完成。/metrics 仍有响应，引擎主循环已不工作。"},
	summaryStalledWaiting: {
		"Stalled: %s requests waiting and none running, and the engine has made no progress for %s (%d refreshes): the scheduler admits nothing. /metrics still answers; the engine loop does not.",
		"引擎停滞：%s 个请求在等待、没有请求在运行，引擎已连续 %s 没有任何推进（%d 次刷新）：调度器不再接纳请求。/metrics 仍有响应，引擎主循环已不工作。"},
	evProgressFlat: {
		"progress counters (prompt and generation tokens, finished requests, first-token and inter-token counts) summed to %s at each of the last %d refreshes, over %s",
		"进度计数器（Prompt 与生成 Token、完成请求数、首 Token 与 Token 间隔计数）之和在最近 %[2]d 次刷新中均为 %[1]s，持续 %[3]s"},
	evStalledNothingRunning: {
		"running reads 0 while %s wait: nothing is admitted (a hung engine loop can leave running at 0, as one reported vLLM hang did)",
		"运行中为 0 而有 %s 个请求在等待：没有请求被接纳（引擎主循环卡住时运行中可能读数为 0，已有 vLLM 卡死报告如此）"},
	evProgressRequestCounters: {
		"this engine counts only whole requests (no inter-token histogram), so the counters were required to stay flat for %s as well: longer than one long generation",
		"该引擎只按整条请求计数（没有 Token 间隔直方图），因此另要求计数器持续 %s 不变：长于一次长生成"},
	evStalledAnswers: {
		"the metrics endpoint answers, so the process is up: this is a hang, not TARGET_DOWN",
		"指标端点有响应，进程仍在：这是卡死，不是目标宕机"},
	evStalledWindowRates: {
		"the window's rates (%s generated over %s) average the work done before the stall: they say nothing of now",
		"窗口内的速率（%[2]s 窗口内生成 %[1]s）是卡住之前工作的平均值，不代表当前"},
	recStalledRouting: {
		"Take the node out of routing now: requests sent to it wait without end, and the ones it holds will time out.",
		"立即将该节点移出路由：发往它的请求会无限等待，已在其中的请求将超时。"},
	recStalledDump: {
		"Before restarting, capture where the engine is stuck: a stack dump of every engine process (py-spy dump --pid <pid>, or the engine's own dump), with the GPU state (nvidia-smi) and the last lines of its log (NCCL timeouts, CUDA errors).",
		"重启前先记录引擎卡在哪里：对每个引擎进程做栈转储（py-spy dump --pid <pid>，或引擎自带的转储），并保存 GPU 状态（nvidia-smi）和日志末尾（NCCL 超时、CUDA 错误）。"},
	recStalledRestart: {
		"Drain and restart the engine: a hung engine loop (a stuck collective, a GPU fault, a deadlocked scheduler) does not recover by itself.",
		"排空并重启引擎：卡住的引擎主循环（集合通信卡住、GPU 故障、调度器死锁）不会自行恢复。"},
	recStalledProbe: {
		"Check the engine's health endpoint against its progress: a /health that answers 200 while no token comes out is no liveness check. Probe forward progress instead (a decode health check where the engine has one, as proposed for vLLM, or this progress finding), so that the orchestrator restarts a hung engine.",
		"核对引擎的健康检查与实际推进：没有 Token 产出时仍返回 200 的 /health 不能作为存活检查。应改为探测前向推进（引擎若有 decode 健康检查则用之，vLLM 已有此提案；或使用本项推进指标），让编排系统能重启卡死的引擎。"},
	evSLOWindowPartial: {
		"%s: only the last %s covered, not judged",
		"%s：仅覆盖最近 %s，不予判定"},

	nameGPUActivity:   {"GPU activity", "GPU 活跃度"},
	nameGPUThrottling: {"GPU throttling", "GPU 降频"},
	nameGPUXID:        {"GPU XID errors", "GPU XID 错误"},
	valueGPUSM:        {"SM %s", "SM %s"},
	valueGPUDRAM:      {"DRAM %s", "DRAM %s"},
	valueGPUTensor:    {"tensor %s", "Tensor %s"},
	valueGPUUtil:      {"util %s", "利用率 %s"},
	valueNone:         {"none", "无"},
	valueGPUThrottled: {"GPU %s: %s", "GPU %s：%s"},
	conGPUBandwidth: {
		"Memory interface near its limit: memory-bandwidth-bound",
		"显存接口接近上限：受显存带宽限制"},
	conGPUStarved: {
		"GPUs mostly wait: their memory interface and tensor pipes are little used",
		"GPU 大多在等待：显存接口和 Tensor 管线利用很少"},
	conGPUCompute: {
		"Tensor pipes busy, memory interface not: compute-bound",
		"Tensor 管线繁忙而显存接口不忙：受算力限制"},
	conGPUMixed: {
		"Neither the memory interface nor the tensor pipes at their limit",
		"显存接口和 Tensor 管线均未到上限"},
	conGPUUtilOnly: {
		"Only GPU utilisation is exported (no DCGM profiling fields): it says a kernel ran, not how busy the GPU was",
		"仅导出了 GPU 利用率（无 DCGM profiling 指标）：它只说明有 kernel 在运行，不说明 GPU 有多忙"},
	conGPUThrottled: {
		"Clocks held down by %s on GPU %s: the GPUs run slower than they can",
		"GPU %[2]s 的时钟被 %[1]s 压低：GPU 未以应有速度运行"},
	conGPUNotThrottled: {"No thermal or power throttling", "无温度或功耗降频"},
	conGPUXID: {
		"GPU fault: XID %s needs a GPU reset or a reboot (NVIDIA's XID catalogue): drain the node",
		"GPU 故障：XID %s 需要重置 GPU 或重启（NVIDIA XID 目录）：请摘除该节点"},
	conGPUNoXID: {"No XID error", "无 XID 错误"},
	conGPUXIDApp: {
		"XID %s comes from the application's own GPU work, not a GPU fault (NVIDIA's XID catalogue): the node stays routable",
		"XID %s 来自应用自身的 GPU 工作，并非 GPU 故障（NVIDIA XID 目录）：该节点仍可路由"},
	conGPUXIDUnlisted: {
		"XID %s is not in NVIDIA's XID catalogue as llmdiag knows it: the node stays routable until it is read in the kernel log",
		"XID %s 不在 llmdiag 所知的 NVIDIA XID 目录中：在内核日志中查明之前，该节点仍可路由"},
	conGPUXIDAged: {
		"XID %s occurred %s ago and has not repeated within gpu_xid_window: the node is routable again, though the GPU may still need a reset",
		"XID %s 发生于 %s 前，且在 gpu_xid_window 内未再出现：该节点重新可路由，但 GPU 可能仍需重置"},
	conGPUXIDFirstRead: {
		"XID %s was already reported when llmdiag first read the GPUs and may be old: the node is not drained for it",
		"llmdiag 首次读取 GPU 时 XID %s 已存在，可能是旧的：不因此摘除该节点"},
	conGPUXIDQuiet: {
		"No current GPU fault: XID %s is informational, old, or from the application",
		"当前无 GPU 故障：XID %s 属于提示性、已过时或来自应用"},
	valueGPUXIDAgo:       {"GPU %s: XID %d, %s ago", "GPU %s：XID %d，%s 前"},
	valueGPUXIDNew:       {"GPU %s: XID %d, new", "GPU %s：XID %d，新出现"},
	valueGPUXIDFirstRead: {"GPU %s: XID %d, at first read", "GPU %s：XID %d，首次读取时已存在"},
	evGPUXIDEntry: {
		"XID %d on GPU %s: %s; the catalogue's action: %s",
		"GPU %[2]s 上的 XID %[1]d：%[3]s；目录建议的处理：%[4]s"},
	evGPUXIDCount: {
		"XID %d on GPU %s: %s times since the exporter started",
		"GPU %[2]s 上的 XID %[1]d：exporter 启动以来 %[3]s 次"},
	evGPUXIDWindow: {
		"an XID counts as current for gpu_xid_window (%s) after it last occurred",
		"XID 最后一次出现后的 gpu_xid_window（%s）内视为当前故障"},
	evGPUCount: {"%d GPUs (%s)", "%d 块 GPU（%s）"},
	evGPUUtil: {
		"GPU utilisation %s (the time any kernel ran, not how much of the GPU it used)",
		"GPU 利用率 %s（有 kernel 运行的时间占比，不代表 GPU 被用满）"},
	evGPUClock:       {"SM clock %s MHz (lowest GPU %s MHz)", "SM 时钟 %s MHz（最低的 GPU %s MHz）"},
	evGPUPower:       {"power %s W in all", "总功耗 %s W"},
	evGPUTemp:        {"hottest GPU %s °C", "最热 GPU %s °C"},
	evGPUFramebuffer: {"framebuffer up to %s used", "显存占用最高 %s"},
	evGPUReasons:     {"clock-event reasons set: %s", "时钟事件原因：%s"},
	evGPUDecodeBandwidth: {
		"GPUs at the memory-bandwidth limit of decode: DRAM active %s (≥ %s) with SM active %s: every step reads the weights and the KV cache of every running request, so kernel tuning will not make a step faster; fewer requests per step, or fewer bytes per token, will",
		"GPU 处于 Decode 的显存带宽上限：DRAM 活跃度 %s（≥ %s），SM 活跃度 %s：每一步都要读取权重和所有运行中请求的 KV Cache，kernel 调优无法让每一步变快；减少每步的请求数或每个 Token 的字节数才行"},
	evGPUDecodeStarved: {
		"GPUs starved while decode is slow: DRAM active %s (< %s), tensor pipes %s, SM active %s: the GPUs wait more than they work, for the scheduler, the CPU or each other",
		"Decode 慢的同时 GPU 吃不饱：DRAM 活跃度 %s（< %s），Tensor 管线 %s，SM 活跃度 %s：GPU 等待多于工作，在等调度、CPU 或彼此"},
	evGPUDecodeStarvedUtil: {
		"GPUs starved while decode is slow: a kernel runs only %s of the time (< %s; DCGM profiling fields not exported)",
		"Decode 慢的同时 GPU 吃不饱：仅 %s 的时间有 kernel 在运行（< %s；未导出 DCGM profiling 指标）"},
	evGPUDecodeCompute: {
		"GPUs compute-bound: tensor pipes active %s (≥ %s), SM active %s, DRAM active %s: the steps are spent computing (attention over long contexts, prefill chunks)",
		"GPU 受算力限制：Tensor 管线活跃度 %s（≥ %s），SM 活跃度 %s，DRAM 活跃度 %s：时间花在计算上（长上下文的 Attention、Prefill 分块）"},
	evGPULockstep: {
		"the %d data-parallel ranks step in lockstep (EP %d): while one rank computes its prefill the others wait, so the GPUs' memory interface is busy only %s of cycles, GPU by GPU",
		"%[1]d 个数据并行 rank 同步推进（EP %[2]d）：一个 rank 计算 Prefill 时其他 rank 都在等待，各 GPU 显存接口仅有 %[3]s 的周期在忙"},
	evGPUDecodeMixed: {
		"GPU activity SM %s, DRAM %s: neither the memory interface nor the tensor pipes at their limit",
		"GPU 活跃度 SM %s、DRAM %s：显存接口和 Tensor 管线均未到上限"},
	decodeGPUBandwidth: {
		" The GPUs confirm it: their memory interface is %s busy, the memory-bandwidth limit of decode.",
		"GPU 指标印证了这一点：显存接口繁忙度 %s，已到 Decode 的显存带宽上限。"},
	decodeGPUStarved: {
		" Yet the GPUs mostly wait (DRAM active %s, tensor pipes %s): batching or scheduling starves them.",
		"但 GPU 大多在等待（DRAM 活跃度 %s，Tensor 管线 %s）：批处理或调度让 GPU 吃不饱。"},
	decodeGPUStarvedUtil: {
		" Yet the GPUs run a kernel only %s of the time: batching or scheduling starves them.",
		"但 GPU 仅 %s 的时间有 kernel 在运行：批处理或调度让 GPU 吃不饱。"},
	decodeGPUCompute: {
		" The GPUs are compute-bound (tensor pipes active %s, SM active %s).",
		"GPU 受算力限制（Tensor 管线活跃度 %s，SM 活跃度 %s）。"},
	recGPUBandwidth: {
		"Add replicas, or serve a smaller or quantised model: decode is at the GPUs' memory-bandwidth limit, which tuning does not move.",
		"增加副本，或换用更小/量化的模型：Decode 已到 GPU 显存带宽上限，调参无法突破。"},
	recGPUStarved: {
		"Raise max_num_seqs (SGLang: max_running_requests): requests wait while the GPUs do, and more of them could share each step.",
		"调大 max_num_seqs（SGLang：max_running_requests）：请求在排队而 GPU 在空等，每一步本可处理更多请求。"},
	recGPUCPUStalls: {
		"Check CPU-side stalls: tokenisation, scheduling, sampling, host-to-device copies, a CPU too small for the GPUs.",
		"排查 CPU 侧阻塞：分词、调度、采样、主机到设备拷贝，或 CPU 配置不足。"},
	recGPUCompute: {
		"Add replicas or faster GPUs: the GPUs are at their compute limit.",
		"增加副本或换用更快的 GPU：GPU 已到算力上限。"},
	recGPUThrottle: {
		"Check cooling and power limits of the throttled GPUs (nvidia-smi -q -d PERFORMANCE) and move load off them until fixed.",
		"检查降频 GPU 的散热与功耗上限（nvidia-smi -q -d PERFORMANCE），修复前将负载移走。"},
	recGPUXID: {
		"Drain the node, read the XID in the kernel log (dmesg) and reset or replace the GPU.",
		"摘除该节点，在内核日志（dmesg）中查看 XID，重置或更换 GPU。"},
	recGPUXIDApp: {
		"Read the engine's log for the kernel that raised the XID; the GPU needs no action unless the XID repeats.",
		"在引擎日志中查找引发该 XID 的 kernel；除非该 XID 再次出现，GPU 无需处理。"},
	recGPUXIDCheck: {
		"Read the XID in the kernel log (dmesg) to tell when it occurred, and do what NVIDIA's XID catalogue says of it at the next maintenance window.",
		"在内核日志（dmesg）中查看该 XID 发生的时间，并在下一个维护窗口按 NVIDIA XID 目录的建议处理。"},
	xid13:                  {"graphics engine exception (often the application)", "图形引擎异常（多为应用问题）"},
	xid31:                  {"GPU memory page fault (often the application)", "GPU 内存页错误（多为应用问题）"},
	xid43:                  {"GPU stopped processing", "GPU 停止处理"},
	xid48:                  {"double-bit ECC error", "双比特 ECC 错误"},
	xid63:                  {"row remapping: an ECC page retirement was recorded", "行重映射：记录了 ECC 页面退役"},
	xid64:                  {"row remapping failed", "行重映射失败"},
	xid74:                  {"NVLink error", "NVLink 错误"},
	xid79:                  {"GPU has fallen off the bus", "GPU 已从总线掉线"},
	xid92:                  {"high single-bit ECC error rate", "单比特 ECC 错误率过高"},
	xid94:                  {"contained ECC error", "已隔离的 ECC 错误"},
	xid95:                  {"uncontained ECC error", "未隔离的 ECC 错误"},
	xid119:                 {"GSP RPC timeout", "GSP RPC 超时"},
	nameRole:               {"Role", "角色"},
	nameKVTransferTime:     {"KV transfer time", "KV 传输耗时"},
	nameKVTransferVolume:   {"KV transfer volume", "KV 传输量"},
	nameKVTransferFailures: {"KV transfer failures", "KV 传输失败"},
	valueRolePrefill:       {"prefill worker", "Prefill 节点"},
	valueRoleDecode:        {"decode worker", "Decode 节点"},
	rolePrefill: {
		"Prefill worker: it computes the prompts and hands their KV cache to decode workers, so its decode speed is not judged",
		"Prefill 节点：计算 Prompt 并把 KV Cache 交给 Decode 节点，因此不评判其 Decode 速度"},
	roleDecode: {
		"Decode worker: it receives each request's KV cache from a prefill worker, so its TTFT includes the transfer and is no evidence of a prefill bottleneck here",
		"Decode 节点：每个请求的 KV Cache 由 Prefill 节点传来，其 TTFT 包含传输时间，不能作为本节点 Prefill 瓶颈的证据"},
	evRoleSource: {"role from %s", "角色来自 %s"},
	roleNotJudged: {
		"Not judged: a prefill worker produces only the first token of each request",
		"不评判：Prefill 节点只产出每个请求的首 Token"},
	evTTFTTransfer: {
		"TTFT on a decode worker includes the KV transfer from the prefill worker: %s per transfer on average, %s of the mean TTFT %s",
		"Decode 节点的 TTFT 包含从 Prefill 节点传输 KV 的时间：平均每次 %s，占平均 TTFT %[3]s 的 %[2]s"},
	evTTFTTransferNoMean: {
		"TTFT on a decode worker includes the KV transfer from the prefill worker: %s per transfer on average",
		"Decode 节点的 TTFT 包含从 Prefill 节点传输 KV 的时间：平均每次 %s"},
	evTTFTTransferUnknown: {
		"TTFT on a decode worker includes the KV transfer from the prefill worker, which this engine does not time",
		"Decode 节点的 TTFT 包含从 Prefill 节点传输 KV 的时间，该引擎不统计此时间"},
	kvTimeOK:   {"KV caches move between workers quickly", "KV Cache 在节点间传输迅速"},
	kvTimeSlow: {"KV transfers are slow: the first token on the decode worker waits for them", "KV 传输偏慢：Decode 节点的首 Token 要等待传输完成"},
	kvTimeNone: {"No KV transfer in the window", "窗口内没有 KV 传输"},
	evKVTransferLimits: {
		"warn at %s per transfer on average, crit at %s",
		"平均每次传输 %s 告警，%s 严重"},
	evKVTransfers:   {"transfers: %s", "传输次数：%s"},
	kvVolume:        {"KV cache bytes moved between prefill and decode workers", "Prefill 与 Decode 节点间传输的 KV Cache 字节数"},
	evKVPerTransfer: {"%s per transfer", "每次 %s"},
	kvFailNone:      {"No KV transfer failed", "没有 KV 传输失败"},
	kvFailSome: {
		"KV transfers fail: those requests are recomputed or aborted",
		"KV 传输失败：这些请求会重新计算或被中止"},
	evKVFailShare: {"%s of transfers failed (crit at %s)", "%s 的传输失败（%s 为严重）"},
	roDecodeWorkerTTFT: {
		"not prefill: TTFT P99 %s is high, but this is a decode worker, whose TTFT includes the KV transfer and the prefill worker's queue and prefill",
		"不是 Prefill 瓶颈：TTFT P99 %s 偏高，但这是 Decode 节点，其 TTFT 包含 KV 传输以及 Prefill 节点的排队与 Prefill"},
	roPrefillWorkerDecode: {
		"not decode: this is a prefill worker, which is not judged on decode speed",
		"不是 Decode 瓶颈：这是 Prefill 节点，不评判其 Decode 速度"},
	summaryDecodeTransfer: {
		"TTFT P99 %s on this decode worker waits for slow KV transfers (%s each on average): the transfer path between prefill and decode workers sets it, not this node's prefill.",
		"该 Decode 节点的 TTFT P99 %s 受 KV 传输拖慢（平均每次 %s）：瓶颈在 Prefill 与 Decode 节点之间的传输路径，而非本节点的 Prefill。"},
	summaryDecodeTTFT: {
		"TTFT P99 %s on this decode worker includes the prefill worker's queue and prefill and the KV transfer: look at the prefill workers.",
		"该 Decode 节点的 TTFT P99 %s 包含 Prefill 节点的排队与 Prefill 以及 KV 传输：请检查 Prefill 节点。"},
	recPrefillWorkers: {
		"Look at the prefill workers (their queue and TTFT): with few prefill workers per decode worker, long prompts wait for prefill there; add prefill workers.",
		"检查 Prefill 节点（排队与 TTFT）：每个 Decode 节点配的 Prefill 节点过少时，长 Prompt 会在那里等待 Prefill；增加 Prefill 节点。"},
	recKVTransfer: {
		"Check the KV-transfer path between prefill and decode workers: the transport the connector chose (RDMA rather than TCP), GPU–NIC affinity, and the link's bandwidth.",
		"检查 Prefill 与 Decode 节点间的 KV 传输路径：连接器选用的传输方式（应为 RDMA 而非 TCP）、GPU 与网卡的亲和性、链路带宽。"},
	recKVFailures: {
		"Read the transfer errors in both workers' logs: a failed transfer is recomputed or aborted.",
		"查看两端节点日志中的传输错误：传输失败的请求会重新计算或被中止。"},
	recAddPrefillWorkers: {
		"Prefill is already disaggregated and this prefill worker is the bottleneck: add prefill workers (more prefill per decode worker).",
		"Prefill 已分离部署，瓶颈正是该 Prefill 节点：增加 Prefill 节点（提高 Prefill 与 Decode 节点的配比）。"},
	evSLOWindowOverBudget: {"%s: not read, over the request's query budget", "%s：未读取，超出本次请求的查询预算"},
}
