package diagnose

// Claims: what a catalog message asserts about the node.
//
// A summary, conclusion, evidence line, ruled-out line or recommendation
// may only assert what the figures say: never that requests are preempted
// when preemptions are unknown, never that latency collapses when the tails
// are within bounds or unknown. Each catalog entry that asserts something
// about an indicator declares it here, and the catalog test
// (claims_test.go) diagnoses every variant of every rule with each
// indicator knocked out in turn, in both languages, and checks every claim
// of every entry a diagnosis was written from against what llmdiag knew.
// Every entry must be declared, nil when it asserts nothing (names,
// thresholds, profile facts, advice that presumes nothing), so that a new
// entry cannot escape the check.

// subject is what a claim is about: an indicator, or a figure several
// indicators share (running requests, the history).
type subject int

const (
	aboutKV         subject = iota + 1 // KV-cache pressure
	aboutKVCapacity                    // KV-cache capacity in tokens
	aboutQueue                         // the queue gauge
	aboutQueueing                      // queueing now (queue, or queue/running)
	aboutRatio                         // queue/running ratio
	aboutRunning                       // running requests
	aboutWaiting                       // requests waiting: queueing now, a queue above saturation, or TTFT mostly queue time
	aboutPreemptions
	aboutPrompts    // prompt token rate: above 0 is prompts arriving, high is heavy prompts
	aboutGeneration // generation token rate: above 0 is tokens being generated
	aboutRequests   // finished requests per second
	aboutDecode     // per-request decode speed: high is slow
	aboutE2E        // E2E P99
	aboutTTFT       // TTFT P99
	aboutLatency    // E2E or TTFT P99
	aboutQueueTime  // the share of the wait for the first token spent queued
	aboutInterToken // inter-token latency P99
	aboutAborts     // aborted ÷ finished requests
	aboutTrend      // the mean E2E trend: high is rising
	aboutPeers      // the peer comparison: high is an outlier
	aboutHistory    // earlier refreshes with a known queue
	aboutFirstToken // the wait for the first token (firstTokenStatus): high is at its warn level or past
	aboutQueueHold  // the queue half of saturation, with hysteresis (saturation.go): high is on
	aboutKVHold     // the KV half of saturation, with hysteresis: high is on
	aboutSpikes     // queue spikes: high is queueing now or spikes drained in the history
	aboutAge        // the data's age
	// The cache and decoding effects (effects.go, offload.go).
	aboutPrefixCache // prefix-cache hit rate: high is at prefixHitHigh or above
	aboutSpec        // speculative decoding: high is acceptance below specAcceptLow
	aboutLoRA        // LoRA adapters: high is some adapter waited for
	aboutLoRASlots   // LoRA adapter slots (cause_lora.go): high is every adapter waited for unloaded and max_lora held by others (loraSlots.full)
	aboutOffload     // a GPU KV cache full by design (offloadByDesign): high is so
	// GPU figures from DCGM (gpu.go).
	aboutGPUDRAM     // mean DRAM active: high is at gpuDRAMHigh or more
	aboutGPUTensor   // mean tensor-pipe activity: high is at gpuTensorHigh or more
	aboutGPUStarved  // GPU activity: high is starved (gpuShape)
	aboutGPUThrottle // clock-event reasons: high is a thermal or power limit on some GPU
	aboutGPUXID      // XID errors: high is some GPU reporting an XID
	aboutGPUXIDFault // XID errors: high is a current one that drains the node (xidDrains)
)

// reading is what a claim says about its subject.
type reading int

const (
	isKnown   reading = iota + 1
	isUnknown         // the message says the figure is not known
	isAbove0          // known and above 0
	isZero            // known and 0
	isHigh            // known and at or past its warn level (the subject's own sense)
	isLow             // known and below it
)

// claim is one assertion of a catalog message.
type claim struct {
	about subject
	reads reading
}

// catalogClaims declares, for every catalog entry, what it asserts about
// the node's figures: nil for entries that assert nothing. It is
// read-only.
var catalogClaims = map[msg][]claim{
	summaryUnreadable: {{aboutKV, isUnknown}, {aboutQueue, isUnknown}, {aboutRatio, isUnknown}, {aboutPrompts, isUnknown}, {aboutGeneration, isUnknown}, {aboutE2E, isUnknown}},
	evUnreadable:      {{aboutKV, isUnknown}, {aboutQueue, isUnknown}, {aboutRatio, isUnknown}, {aboutPrompts, isUnknown}, {aboutGeneration, isUnknown}, {aboutE2E, isUnknown}},

	kvOK:         {{aboutKV, isLow}},
	kvBusy:       {{aboutKV, isKnown}},
	kvWarn:       {{aboutKV, isHigh}},
	kvCrit:       {{aboutKV, isHigh}},
	evKV:         {{aboutKV, isKnown}},
	evKVCapacity: {{aboutKVCapacity, isKnown}},

	queueOK:        {{aboutQueue, isLow}},
	queueWarn:      {{aboutQueue, isHigh}},
	queueCrit:      {{aboutQueue, isHigh}},
	evQueueRunning: {{aboutQueue, isKnown}},

	ratioOK:        {{aboutRatio, isKnown}},
	ratioOKSpikes:  {{aboutRatio, isKnown}},
	ratioBurst:     {{aboutRatio, isKnown}, {aboutHistory, isKnown}},
	ratioNoHistory: {{aboutRatio, isKnown}, {aboutHistory, isUnknown}},
	ratioSustained: {{aboutRatio, isKnown}, {aboutQueueing, isHigh}},
	evRatio:        {{aboutRatio, isKnown}},

	promptOK:           {{aboutPrompts, isAbove0}},
	promptIdle:         {{aboutPrompts, isZero}},
	promptHeavy:        {{aboutPrompts, isHigh}, {aboutTTFT, isHigh}},
	evPrefillGap:       {{aboutPrompts, isAbove0}, {aboutGeneration, isAbove0}},
	evPromptPerRequest: {{aboutPrompts, isKnown}, {aboutRequests, isAbove0}},

	genOK:                {{aboutGeneration, isAbove0}, {aboutDecode, isLow}},
	genIdle:              {{aboutGeneration, isZero}},
	genPerRequestUnknown: {{aboutGeneration, isAbove0}, {aboutDecode, isUnknown}},
	genSlow:              {{aboutGeneration, isAbove0}, {aboutDecode, isHigh}},
	genSlowModel:         {{aboutGeneration, isAbove0}, {aboutDecode, isHigh}},
	evPerRequestDerived:  {{aboutGeneration, isAbove0}, {aboutRunning, isAbove0}, {aboutDecode, isKnown}},
	evPerRequestTPOT:     {{aboutDecode, isKnown}},
	evPerRequestITL:      {{aboutDecode, isKnown}},
	evPerRequest:         {{aboutDecode, isKnown}},

	e2eOK:              {{aboutE2E, isLow}},
	e2eTail:            {{aboutE2E, isHigh}},
	e2eTailQueue:       {{aboutE2E, isHigh}, {aboutQueueing, isHigh}},
	e2eTailConcurrency: {{aboutE2E, isHigh}, {aboutDecode, isHigh}, {aboutRunning, isAbove0}},
	e2eNoRequests:      {{aboutE2E, isUnknown}},
	evTail:             {{aboutE2E, isKnown}},

	ttftWarn: {{aboutTTFT, isHigh}},
	ttftCrit: {{aboutTTFT, isHigh}},

	preemptSome: {{aboutPreemptions, isAbove0}},
	preemptMany: {{aboutPreemptions, isAbove0}},

	roMemory:          {{aboutKV, isLow}},
	roMemoryNoPreempt: {{aboutKV, isLow}, {aboutPreemptions, isZero}},
	roQueueing:        {{aboutQueue, isKnown}, {aboutQueueing, isLow}},
	roOverload:        {{aboutQueue, isKnown}, {aboutQueueHold, isLow}},
	roPrefill:         {{aboutTTFT, isLow}},
	roDecode:          {{aboutDecode, isLow}},
	roOutlier:         {{aboutPeers, isKnown}},
	notMemory:         {{aboutKV, isLow}},
	notQueueing:       {{aboutQueueing, isLow}},

	summaryKVFull:        {{aboutKV, isHigh}, {aboutPreemptions, isUnknown}},
	summaryKVFullPreempt: {{aboutKV, isHigh}, {aboutPreemptions, isAbove0}},
	summaryPreempt:       {{aboutPreemptions, isAbove0}},
	evPreemptRate:        {{aboutPreemptions, isAbove0}},
	evE2EHigh:            {{aboutE2E, isHigh}},
	evTTFTHigh:           {{aboutTTFT, isHigh}},
	recKVShed:            {{aboutKV, isHigh}},

	summaryOverloadedNow: {{aboutQueueing, isHigh}, {aboutHistory, isUnknown}},
	recShed:              {{aboutQueueing, isHigh}},
	recOverloadTP:        {{aboutQueueing, isHigh}},

	summaryBurstDrained: {{aboutHistory, isKnown}},

	causePrefill:    {{aboutPrompts, isHigh}, {aboutTTFT, isHigh}, {aboutQueue, isLow}},
	heavyRatio:      {{aboutPrompts, isAbove0}, {aboutGeneration, isKnown}},
	heavyPerRequest: {{aboutPrompts, isAbove0}, {aboutRequests, isAbove0}},
	evQueueRatio:    {{aboutQueue, isKnown}},

	causeDecode:       {{aboutDecode, isHigh}},
	causeDecodeStalls: {{aboutInterToken, isHigh}, {aboutPrompts, isAbove0}},
	decodeConcurrency: {{aboutRunning, isAbove0}, {aboutE2E, isHigh}},
	runningPart:       {{aboutRunning, isKnown}},
	factorConcurrency: {{aboutRunning, isAbove0}},
	evTailRatio:       {{aboutE2E, isKnown}},
	recClientTimeout:  {{aboutE2E, isKnown}},

	summaryOutlier: {{aboutPeers, isHigh}},
	evOutlier:      {{aboutPeers, isHigh}},
	evLoadSimilar:  {{aboutPeers, isKnown}},

	summaryHealthy: {{aboutKV, isKnown}, {aboutQueue, isKnown}, {aboutRatio, isKnown}, {aboutPrompts, isKnown}, {aboutGeneration, isKnown}, {aboutE2E, isKnown}},

	evEpisodes:     {{aboutHistory, isKnown}},
	evEpisodesNow:  {{aboutHistory, isKnown}},
	evEpisodesNone: {{aboutHistory, isKnown}},

	decodeIdle:        {{aboutGeneration, isZero}},
	decodeUnknown:     {{aboutDecode, isUnknown}},
	valuePerRequest:   {{aboutDecode, isKnown}},
	decodeOK:          {{aboutDecode, isLow}},
	decodeSlow:        {{aboutDecode, isHigh}},
	decodeSlowModel:   {{aboutDecode, isHigh}},
	decodeSlowDP:      {{aboutDecode, isHigh}},
	decodeSlowModelDP: {{aboutDecode, isHigh}},

	pdIdle:      {{aboutPrompts, isZero}},
	pdPhysics:   {{aboutPrompts, isAbove0}, {aboutGeneration, isKnown}},
	pdHeavy:     {{aboutPrompts, isHigh}, {aboutTTFT, isLow}},
	pdHeavyTTFT: {{aboutPrompts, isHigh}, {aboutTTFT, isHigh}},

	queueTimeNotExposed: {{aboutQueueTime, isUnknown}},
	queueTimeNoData:     {{aboutQueueTime, isUnknown}},
	valueShareOfTTFT:    {{aboutQueueTime, isKnown}},
	evQueueTimeSplit:    {{aboutQueueTime, isKnown}},
	queueTimeOK:         {{aboutQueueTime, isLow}},
	queueTimeShort:      {{aboutQueueTime, isHigh}, {aboutTTFT, isLow}},
	queueTimeWarn:       {{aboutQueueTime, isHigh}, {aboutFirstToken, isHigh}},

	itlNotExposed: {{aboutInterToken, isUnknown}},
	itlNoData:     {{aboutInterToken, isUnknown}},
	itlOK:         {{aboutInterToken, isLow}},
	itlWarn:       {{aboutInterToken, isHigh}},
	itlCrit:       {{aboutInterToken, isHigh}},
	evITLTail:     {{aboutInterToken, isKnown}},
	evITLPrefill:  {{aboutPrompts, isHigh}, {aboutInterToken, isHigh}},

	abortsNotExposed: {{aboutAborts, isUnknown}},
	abortsNoRate:     {{aboutRequests, isUnknown}},
	abortsNoRequests: {{aboutRequests, isZero}},
	abortsOK:         {{aboutAborts, isLow}},
	abortsWarn:       {{aboutAborts, isHigh}},
	abortsCrit:       {{aboutAborts, isHigh}},
	evAborts:         {{aboutAborts, isKnown}},

	trendUnknown: {{aboutTrend, isUnknown}},
	trendFlat:    {{aboutTrend, isKnown}},
	trendRising:  {{aboutTrend, isHigh}},
	trendFalling: {{aboutTrend, isLow}},
	evTrend:      {{aboutTrend, isKnown}},
	valueTrend:   {{aboutTrend, isKnown}},

	peersInLine:    {{aboutPeers, isKnown}},
	peersOutlier:   {{aboutPeers, isHigh}},
	peersGroupSlow: {{aboutPeers, isKnown}},
	peersFaster:    {{aboutPeers, isKnown}},
	evPeerMetric:   {{aboutPeers, isKnown}},
	valuePeers:     {{aboutPeers, isKnown}},
	evGroupSlow:    {{aboutPeers, isKnown}},

	stalenessUnknown: {{aboutAge, isUnknown}},
	stalenessOK:      {{aboutAge, isKnown}},

	roMemoryNearFull: {{aboutKV, isHigh}, {aboutPreemptions, isKnown}},
	roMemoryUnknown:  {{aboutKV, isUnknown}},
	roQueueUnknown:   {{aboutQueue, isUnknown}},
	roBurstMinor:     {{aboutHistory, isKnown}},
	roNoBurst:        {{aboutHistory, isKnown}},
	roBurstNoHistory: {{aboutQueueing, isLow}, {aboutHistory, isUnknown}},
	roPrefillUnknown: {{aboutTTFT, isUnknown}},
	roPrefillQueue:   {{aboutTTFT, isHigh}, {aboutQueueTime, isHigh}},
	roPrefillLight:   {{aboutTTFT, isHigh}, {aboutPrompts, isLow}},
	roPrefillSpikes:  {{aboutTTFT, isHigh}, {aboutSpikes, isHigh}},
	roPrefillPeers:   {{aboutPeers, isHigh}},
	roDecodeUnknown:  {{aboutDecode, isUnknown}},
	roDecodeTail:     {{aboutDecode, isHigh}, {aboutE2E, isLow}},
	roDecodeNoTail:   {{aboutDecode, isHigh}, {aboutE2E, isUnknown}},
	roDecodeOther:    {{aboutDecode, isHigh}},
	roNoPeers:        {{aboutPeers, isUnknown}},

	summaryBurstTail:  {{aboutHistory, isKnown}},
	summaryBurstShort: {{aboutQueueTime, isHigh}},
	decodeGroup:       {{aboutPeers, isKnown}},
	summaryGroupSlow:  {{aboutPeers, isKnown}},
	recKVWatch:        {{aboutKV, isHigh}},
	recGroupSlow:      {{aboutPeers, isKnown}},
	recITL:            {{aboutInterToken, isHigh}},
	recTrend:          {{aboutTrend, isHigh}},
	recQueueTime:      {{aboutWaiting, isHigh}},

	kvCritPreempt:            {{aboutKV, isHigh}, {aboutPreemptions, isAbove0}},
	summaryKVFullNoPreempt:   {{aboutKV, isHigh}, {aboutPreemptions, isZero}},
	recKVShedPreempt:         {{aboutPreemptions, isAbove0}},
	recPreemptWatch:          {{aboutPreemptions, isAbove0}},
	e2eTailSlowDecode:        {{aboutE2E, isHigh}, {aboutDecode, isHigh}},
	decodeTail:               {{aboutE2E, isHigh}},
	causePrefillQueueUnknown: {{aboutPrompts, isHigh}, {aboutTTFT, isHigh}, {aboutQueue, isUnknown}},
	pdHeavyOnly:              {{aboutPrompts, isHigh}},
	queueTimeMostly:          {{aboutQueueTime, isHigh}},
	roBurstSmall:             {{aboutQueueing, isHigh}, {aboutQueue, isKnown}},
	roBurstQueueUnknown:      {{aboutQueueing, isHigh}, {aboutQueue, isUnknown}},
	roMemoryNearFullUnknown:  {{aboutKV, isHigh}, {aboutPreemptions, isUnknown}},
	roMemoryNotHeld:          {{aboutKV, isHigh}, {aboutKVHold, isLow}},

	// Saturation with hysteresis (saturation.go).
	summaryOverloadedFor:     {{aboutQueueHold, isHigh}, {aboutHistory, isKnown}},
	summaryQueueSaturated:    {{aboutQueueHold, isHigh}},
	summaryQueueRising:       {{aboutQueue, isHigh}},
	summaryKVHeld:            {{aboutKVHold, isHigh}, {aboutKV, isKnown}},
	summaryRecovering:        {{aboutHistory, isKnown}},
	evSaturatedSince:         {{aboutQueueHold, isHigh}, {aboutHistory, isKnown}},
	evRecovered:              {{aboutHistory, isKnown}},
	roOverloadShort:          {{aboutQueueHold, isHigh}},
	roOverloadRecovered:      {{aboutHistory, isKnown}},
	kvRising:                 {{aboutKV, isHigh}, {aboutKVHold, isLow}},
	kvHeld:                   {{aboutKVHold, isHigh}},
	causeDecodeStallsBare:    {{aboutInterToken, isHigh}},
	roPrefillPromptsUnknown:  {{aboutTTFT, isHigh}, {aboutPrompts, isUnknown}},
	evKVOverClamped:          {{aboutKV, isKnown}},
	evRunningStuck:           {{aboutGeneration, isAbove0}, {aboutRunning, isUnknown}},
	evTTFTExcludesQueue:      {{aboutQueueTime, isKnown}},
	evTTFTBelowQueue:         {{aboutQueueTime, isKnown}},
	evQueueTimeSplitExcluded: {{aboutQueueTime, isKnown}},
	valueShareOfWait:         {{aboutQueueTime, isKnown}},
	// GPU figures from DCGM (gpu.go).
	conGPUBandwidth:        {{aboutGPUDRAM, isHigh}},
	conGPUStarved:          {{aboutGPUStarved, isHigh}},
	conGPUCompute:          {{aboutGPUTensor, isHigh}},
	conGPUMixed:            {{aboutGPUStarved, isLow}},
	conGPUUtilOnly:         {{aboutGPUTensor, isUnknown}, {aboutGPUDRAM, isUnknown}},
	conGPUThrottled:        {{aboutGPUThrottle, isHigh}},
	conGPUNotThrottled:     {{aboutGPUThrottle, isLow}},
	conGPUXID:              {{aboutGPUXIDFault, isHigh}},
	conGPUNoXID:            {{aboutGPUXID, isLow}},
	conGPUXIDApp:           {{aboutGPUXID, isHigh}, {aboutGPUXIDFault, isLow}},
	conGPUXIDUnlisted:      {{aboutGPUXID, isHigh}, {aboutGPUXIDFault, isLow}},
	conGPUXIDAged:          {{aboutGPUXID, isHigh}, {aboutGPUXIDFault, isLow}},
	conGPUXIDFirstRead:     {{aboutGPUXID, isHigh}, {aboutGPUXIDFault, isLow}},
	conGPUXIDQuiet:         {{aboutGPUXID, isHigh}, {aboutGPUXIDFault, isLow}},
	valueGPUXIDAgo:         {{aboutGPUXID, isHigh}},
	valueGPUXIDNew:         {{aboutGPUXID, isHigh}},
	valueGPUXIDFirstRead:   {{aboutGPUXID, isHigh}},
	evGPUXIDEntry:          {{aboutGPUXID, isHigh}},
	evGPUXIDCount:          {{aboutGPUXID, isHigh}},
	evGPUXIDWindow:         {{aboutGPUXID, isHigh}},
	recGPUXIDApp:           {{aboutGPUXID, isHigh}, {aboutGPUXIDFault, isLow}},
	recGPUXIDCheck:         {{aboutGPUXID, isHigh}, {aboutGPUXIDFault, isLow}},
	valueGPUThrottled:      {{aboutGPUThrottle, isHigh}},
	evGPUDecodeBandwidth:   {{aboutGPUDRAM, isHigh}},
	evGPUDecodeStarved:     {{aboutGPUStarved, isHigh}},
	evGPUDecodeCompute:     {{aboutGPUTensor, isHigh}},
	evGPUDecodeMixed:       {{aboutGPUStarved, isLow}},
	evGPULockstep:          {{aboutGPUStarved, isHigh}},
	decodeGPUBandwidth:     {{aboutGPUDRAM, isHigh}},
	decodeGPUStarved:       {{aboutGPUStarved, isHigh}},
	decodeGPUCompute:       {{aboutGPUTensor, isHigh}},
	recGPUBandwidth:        {{aboutGPUDRAM, isHigh}},
	recGPUStarved:          {{aboutGPUStarved, isHigh}, {aboutQueue, isAbove0}},
	decodeGPUStarvedUtil:   {{aboutGPUStarved, isHigh}},
	evGPUDecodeStarvedUtil: {{aboutGPUStarved, isHigh}},
	recGPUCPUStalls:        {{aboutGPUStarved, isHigh}},
	recGPUCompute:          {{aboutGPUTensor, isHigh}},
	recGPUThrottle:         {{aboutGPUThrottle, isHigh}},
	recGPUXID:              {{aboutGPUXIDFault, isHigh}},
	// Names, figures quoted as read, and what an XID code means.
	nameGPUActivity:   nil,
	nameGPUThrottling: nil,
	nameGPUXID:        nil,
	valueGPUSM:        nil,
	valueGPUDRAM:      nil,
	valueGPUTensor:    nil,
	valueGPUUtil:      nil,
	valueNone:         nil,
	evGPUCount:        nil,
	evGPUUtil:         nil,
	evGPUClock:        nil,
	evGPUPower:        nil,
	evGPUTemp:         nil,
	evGPUFramebuffer:  nil,
	evGPUReasons:      nil,
	xid13:             nil,
	xid31:             nil,
	xid43:             nil,
	xid48:             nil,
	xid63:             nil,
	xid64:             nil,
	xid74:             nil,
	xid79:             nil,
	xid92:             nil,
	xid94:             nil,
	xid95:             nil,
	xid119:            nil,
	// Entries that assert nothing about the node's figures.

	// Finding names.
	nameRunning:       nil,
	nameKVCapacity:    nil,
	nameFinished:      nil,
	nameKV:            nil,
	nameQueue:         nil,
	nameRatio:         nil,
	namePrompt:        nil,
	nameGeneration:    nil,
	nameE2EP99:        nil,
	nameTTFTP99:       nil,
	namePreemptions:   nil,
	nameScrape:        nil,
	nameDecodeSpeed:   nil,
	namePrefillDecode: nil,
	nameQueueTime:     nil,
	nameInterToken:    nil,
	nameAborts:        nil,
	nameTrend:         nil,
	namePeers:         nil,
	nameStaleness:     nil,

	// Cause names, as reports title them (CauseName).
	causeNameUnspecified:  nil,
	causeNameNoData:       nil,
	causeNameTargetDown:   nil,
	causeNameKVExhausted:  nil,
	causeNameOverloaded:   nil,
	causeNameBurst:        nil,
	causeNamePrefillBound: nil,
	causeNameDecodeBound:  nil,
	causeNameNodeOutlier:  nil,
	causeNameHealthy:      nil,
	causeNameUnexplained:  nil,

	causeNameStalled:          nil,
	nameProgress:              nil,
	valueProgressFlat:         nil,
	progressStalled:           nil,
	summaryStalled:            nil,
	summaryStalledWaiting:     {{aboutQueue, isAbove0}, {aboutRunning, isZero}},
	evProgressFlat:            nil,
	evStalledNothingRunning:   {{aboutQueue, isAbove0}, {aboutRunning, isZero}},
	evProgressRequestCounters: nil,
	evStalledAnswers:          nil,
	evStalledWindowRates:      {{aboutGeneration, isAbove0}},
	recStalledRouting:         nil,
	recStalledDump:            nil,
	recStalledRestart:         nil,
	recStalledProbe:           nil,

	// Why a finding is UNKNOWN.
	unknownNoMetrics:    nil,
	unknownStale:        nil,
	unknownStaleFlagged: nil,
	unknownDown:         nil,
	unknownErrors:       nil,
	unknownWarned:       nil,
	unknownNotExposed:   nil,
	unknownInconsistent: nil,

	// No fresh data, target down: there are no figures to claim.
	summaryNoMetrics:    nil,
	summaryStale:        nil,
	summaryStaleFlagged: nil,
	summaryDown:         nil,
	evStale:             nil,
	evStaleFlagged:      nil,
	evDown:              nil,
	evScrapeError:       nil,
	evSourceWarning:     nil,
	stalenessCrit:       nil,
	stalenessFlagged:    nil,
	valueStaleFlagged:   nil,
	evStalenessLimit:    nil,

	// Scrape errors, quoted.
	scrapeErrors: nil,
	// Readings the consistency checks discarded, quoted.
	evNegative:      nil,
	noteNegative:    nil,
	evKVOverUnknown: nil,
	scrapeDown:      nil,
	valueErrors:     nil,

	// Limits quoted.
	evQueueLimits:   nil,
	evLatencyLimits: nil,
	evPreemptLimit:  nil,
	condQueue:       nil,
	condRatio:       nil,
	condKV:          nil,

	// The deployment profile, which is configuration.
	evModelLarge:             nil,
	evModelSmall:             nil,
	evDataParallel:           nil,
	evTensorParallel:         nil,
	evExpertParallel:         nil,
	evPipelineParallel:       nil,
	evMoE:                    nil,
	evGPU:                    nil,
	evNoProfile:              nil,
	decodeLockstep:           nil,
	factorSize:               nil,
	factorSizeMoE:            nil,
	factorCost:               nil,
	factorDataParallel:       nil,
	factorConcurrencyUnknown: nil,
	theModel:                 nil,

	// Sentence frames; lists of the findings themselves; quotes with "?" for an unknown figure.
	causeOnly:             nil,
	causeAfterNots:        nil,
	summaryUnexplained:    nil,
	evReading:             nil,
	evReadingWhy:          nil,
	evUnexplainedAlso:     nil,
	restNothing:           nil,
	summaryHealthyPartial: nil,
	evQueueHigh:           nil,
	evHeldDip:             nil, // the held gauge now, queue or KV: a hold is on only while its gauge is known
	evQueueTimeP99:        nil,

	// Advice that presumes nothing about the figures.
	recNoData:         nil,
	recNoDataRouting:  nil,
	recDown:           nil,
	recDownRouting:    nil,
	recKVCapacity:     nil,
	recKVContext:      nil,
	recAddCapacity:    nil, // general: also after an overload has drained (summaryRecovering)
	recAdmission:      nil,
	recBurstKeep:      nil,
	recBurstSmooth:    nil,
	recBurstHeadroom:  nil,
	recChunkedPrefill: nil,
	recPrefixCache:    nil,
	recDisaggregate:   nil,
	recSmallerChunks:  nil,
	recTensorParallel: nil,
	recTPAlready:      nil,
	recConcurrency:    nil,
	recSpeculative:    nil,
	recProfile:        nil,
	recOutlierDrain:   nil,
	recOutlierCompare: nil,
	recNone:           nil,
	recWatch:          nil,
	recLatency:        nil,
	recAborts:         nil,
	recScrape:         nil,

	// SLO burn: the SLO's own figures (attainment, burn rate per window),
	// which no other indicator's claims cover; the finding sits beside the
	// verdict and the verdict's texts do not quote it.
	nameSLO:            nil,
	sloValue:           nil,
	sloBurnCrit:        nil,
	sloBurnWarn:        nil,
	sloOnlyIfMissed:    nil,
	sloWithin:          nil,
	sloUnknown:         nil,
	evSLOWindow:        nil,
	evSLOWindowEmpty:   nil,
	evSLOWindowMissing: nil,
	namePrefixCache:    nil,
	nameSpec:           nil,
	nameLoRA:           nil,
	prefixHigh:         {{aboutPrefixCache, isHigh}},
	prefixLow:          {{aboutPrefixCache, isLow}},
	prefixSome:         {{aboutPrefixCache, isLow}},
	evPrefixCache:      {{aboutPrefixCache, isKnown}},
	specGain:           {{aboutSpec, isLow}},
	specLowGain:        {{aboutSpec, isHigh}},
	valueSpec:          {{aboutSpec, isKnown}},
	evSpec:             {{aboutSpec, isLow}},
	evSpecLow:          {{aboutSpec, isHigh}},
	recSpecDraft:       {{aboutSpec, isHigh}},
	loraWaiting:        {{aboutLoRA, isHigh}},
	loraNoWait:         {{aboutLoRA, isLow}},
	valueLoRA:          {{aboutLoRA, isKnown}},
	evLoRAWaiting:      {{aboutLoRA, isHigh}, {aboutQueue, isAbove0}},
	kvOffload:          {{aboutOffload, isHigh}, {aboutKV, isHigh}, {aboutPreemptions, isZero}, {aboutQueueing, isLow}},
	roMemoryOffload:    {{aboutOffload, isHigh}, {aboutKV, isHigh}, {aboutPreemptions, isZero}, {aboutQueueing, isLow}},
	// LoRA adapter contention (cause_lora.go).
	causeNameLoRAContention: nil,
	summaryLoRAContention:   {{aboutLoRASlots, isHigh}, {aboutQueue, isAbove0}},
	evLoRAContention:        {{aboutLoRASlots, isHigh}},
	evLoRAQueue:             {{aboutLoRASlots, isHigh}, {aboutQueue, isAbove0}},
	recLoRAMaxLoras:         {{aboutLoRASlots, isHigh}},
	recLoRARoute:            {{aboutLoRASlots, isHigh}},
	roLoRANoWait:            {{aboutLoRA, isLow}},
	roLoRAUnknown:           {{aboutLoRA, isHigh}, {aboutLoRASlots, isUnknown}},
	roLoRALoaded:            {{aboutLoRA, isHigh}, {aboutLoRASlots, isLow}},
	roLoRASlotsFree:         {{aboutLoRASlots, isLow}},
	roLoRANoQueue:           {{aboutLoRASlots, isHigh}},
	ratioLoRA:               {{aboutRatio, isKnown}, {aboutQueueing, isHigh}, {aboutLoRASlots, isHigh}},
	evSLOWindowPartial:      nil,
	// role.go
	nameRole: nil, nameKVTransferTime: nil, nameKVTransferVolume: nil, nameKVTransferFailures: nil,
	valueRolePrefill: nil, valueRoleDecode: nil, rolePrefill: nil, roleDecode: nil, evRoleSource: nil,
	roleNotJudged:         nil,
	evTTFTTransfer:        nil,
	evTTFTTransferNoMean:  nil,
	evTTFTTransferUnknown: nil,
	kvTimeOK:              nil, kvTimeSlow: nil, kvTimeNone: nil, evKVTransferLimits: nil, evKVTransfers: nil,
	kvVolume: nil, evKVPerTransfer: nil, kvFailNone: nil, kvFailSome: nil, evKVFailShare: nil,
	roDecodeWorkerTTFT:    {{aboutTTFT, isHigh}},
	roPrefillWorkerDecode: nil,
	summaryDecodeTransfer: {{aboutTTFT, isHigh}},
	summaryDecodeTTFT:     {{aboutTTFT, isHigh}},
	recPrefillWorkers:     nil, recKVTransfer: nil, recKVFailures: nil, recAddPrefillWorkers: nil,
	// slo.go, on-demand diagnoses
	evSLOWindowOverBudget: nil,
}

// recorder collects the catalog entries one diagnosis is written from, for
// the catalog test. Each call of Diagnose owns its own (or none), so
// Diagnose stays pure and safe to call from many goroutines.
type recorder struct{ msgs []msg }

// add records id; a nil recorder records nothing.
func (r *recorder) add(id msg) {
	if r != nil {
		r.msgs = append(r.msgs, id)
	}
}

// queueText is the queue gauge, or "?" when unknown: a text quoting the
// queue must not read an unknown one as 0.
func (f *facts) queueText() string {
	if !f.queue.ok {
		return "?"
	}
	return count(f.queue.v)
}

// healthySummary says the node is healthy. "Every indicator is within
// bounds" would claim the core indicators llmdiag could not read, so those
// are named instead.
func (f *facts) healthySummary(p printer) string {
	var unknown []string
	for i, ok := range []bool{f.kv.ok, f.queue.ok, f.ratio.ok, f.prompt.ok, f.gen.ok, f.e2eP99 != nil} {
		if !ok {
			unknown = append(unknown, p.f(coreIndicators[i].name))
		}
	}
	if len(unknown) == 0 {
		return p.f(summaryHealthy)
	}
	return p.f(summaryHealthyPartial, p.join(unknown))
}
