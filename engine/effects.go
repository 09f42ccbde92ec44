package engine

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/llmdiag/llmdiag/sample"
)

// sources returns the sources of c: from Mapping.Effects for the cache and
// decoding effects, else from Mapping.Concepts.
func (m *Mapping) sources(c Concept) []Source {
	if c >= PrefixCacheQueries && c < numConcepts { // the disaggregation concepts (disagg.go) read Concepts
		return m.Effects[c]
	}
	return m.Concepts[c]
}

// effects reads the cache and decoding effects (Mapping.Effects, LoRAInfo,
// Offload). A gauge that reads 0 where 0 means "not in use" (the
// speculative gauges of an engine without speculative decoding) is left
// nil, as is everything the engine does not export.
func (x *extractor) effects() sample.Effects {
	e := sample.Effects{
		PrefixCacheQueries: x.value(PrefixCacheQueries),
		PrefixCacheHits:    x.value(PrefixCacheHits),
		PrefixCacheHitRate: x.value(PrefixCacheHitRate),
		SpecDrafts:         x.value(SpecDrafts),
		SpecDraftTokens:    x.value(SpecDraftTokens),
		SpecAcceptedTokens: x.value(SpecAcceptedTokens),
		SpecAcceptRate:     x.value(SpecAcceptRate),
		SpecAcceptLength:   x.value(SpecAcceptLength),
	}
	e = CleanEffects(e)
	e.LoRAAdaptersRunning, e.LoRAAdaptersWaiting, e.LoRARunning, e.LoRAWaiting, e.LoRAMax = x.lora()
	e.KVOffload = x.offload()
	return e
}

// CleanEffects returns e with the engines' gauges read as Extract reads
// them: a hit rate above 1 as a percentage (SGLang of 2024), and the
// speculative gauges of an engine without speculative decoding (SGLang
// exports 0 for both) absent. The Prometheus source, which aggregates the
// same gauges in PromQL, cleans them here too.
func CleanEffects(e sample.Effects) sample.Effects {
	if r := e.PrefixCacheHitRate; r != nil && *r > 1 {
		// SGLang of 2024 reported a percentage.
		e.PrefixCacheHitRate = sample.F(math.Min(*r/100, 1))
	}
	// An accept length is at least 1 with speculative decoding on; SGLang
	// exports 0 for both gauges without it.
	if l := e.SpecAcceptLength; l != nil && *l <= 0 {
		e.SpecAcceptLength, e.SpecAcceptRate = nil, nil
	}
	if r := e.SpecAcceptRate; r != nil && *r <= 0 && e.SpecAcceptLength == nil {
		e.SpecAcceptRate = nil
	}
	return e
}

// lora counts the distinct LoRA adapters with requests running and waiting
// from the first present family of Mapping.LoRAInfo. vLLM sets the gauge
// to the time of the change on a new series (labels running_lora_adapters
// and waiting_lora_adapters, each a comma-separated list of names) and
// keeps the old ones, so per engine core only the series with the largest
// value, the newest, is read; names are then counted once over cores, and
// also returned by name with the max_lora label (ReadLoRA).
func (x *extractor) lora() (running, waiting *float64, runNames, waitNames []string, maxLoRA *float64) {
	for _, name := range x.m.LoRAInfo {
		mf := x.families[name]
		if len(mf.GetMetric()) == 0 {
			continue
		}
		if err := checkType(Gauge, mf.GetType()); err != nil {
			x.errs = append(x.errs, name+" (lora_adapters): "+err.Error())
			return nil, nil, nil, nil, nil
		}
		newest := map[string]series{}
		newestAt := map[string]float64{}
		for _, m := range mf.GetMetric() {
			s := series{labels: m.GetLabel(), metric: m}
			v, err := scalar(Source{Kind: Gauge}, s)
			if err != nil {
				continue
			}
			key := x.replicaKey(s.labels)
			if at, seen := newestAt[key]; !seen || v > at {
				newest[key], newestAt[key] = s, v
			}
		}
		if len(newest) == 0 {
			return nil, nil, nil, nil, nil
		}
		lists := make([]LoRALists, 0, len(newest))
		for _, s := range newest {
			lists = append(lists, LoRALists{Running: s.labels.get(LoRARunningLabel), Waiting: s.labels.get(LoRAWaitingLabel),
				Max: s.labels.get(LoRAMaxLabel)})
		}
		r, w := CountLoRA(lists)
		runNames, waitNames, maxLoRA = ReadLoRA(lists)
		return sample.F(r), sample.F(w), runNames, waitNames, maxLoRA
	}
	return nil, nil, nil, nil, nil
}

// The labels of a LoRA info gauge (Mapping.LoRAInfo) listing the adapters,
// comma-separated.
const (
	LoRARunningLabel = "running_lora_adapters"
	LoRAWaitingLabel = "waiting_lora_adapters"
	// LoRAMaxLabel is the label of the same gauge giving the most adapters
	// one engine core's running batch may hold (vLLM's --max-loras).
	LoRAMaxLabel = "max_lora"
)

// LoRALists are the adapter lists of the newest LoRA info series of one
// replica, and its max_lora label ("" when absent).
type LoRALists struct {
	Running, Waiting string
	Max              string
}

// ReadLoRA names the distinct adapters running and waited for over the
// replicas' lists, each sorted (nil when none), and reads max_lora: the
// largest over the replicas that give a positive number, nil when none
// does.
func ReadLoRA(lists []LoRALists) (running, waiting []string, maxLoRA *float64) {
	for _, l := range lists {
		running = addNames(running, l.Running)
		waiting = addNames(waiting, l.Waiting)
		if v, err := strconv.ParseFloat(strings.TrimSpace(l.Max), 64); err == nil && v > 0 && !math.IsInf(v, 0) &&
			(maxLoRA == nil || v > *maxLoRA) {
			maxLoRA = sample.F(v)
		}
	}
	slices.Sort(running)
	slices.Sort(waiting)
	return running, waiting, maxLoRA
}

// CountLoRA counts the distinct adapters named running and waiting over
// the replicas' lists, each name once.
func CountLoRA(lists []LoRALists) (running, waiting float64) {
	var rb, wb [8]string // a node has a few adapters: no allocation
	run, wait := rb[:0], wb[:0]
	for _, l := range lists {
		run = addNames(run, l.Running)
		wait = addNames(wait, l.Waiting)
	}
	return float64(len(run)), float64(len(wait))
}

// addNames adds to set the names of a comma-separated list it lacks (a
// node has a few adapters: a slice beats a map).
func addNames(set []string, list string) []string {
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(set, n) {
			set = append(set, n)
		}
	}
	return set
}

// offload is the tier of the first Mapping.Offload prefix some family
// starts with; "" when none does.
func (x *extractor) offload() string {
	for _, o := range x.m.Offload {
		for name, mf := range x.families {
			if strings.HasPrefix(name, o.Prefix) && len(mf.GetMetric()) > 0 {
				return o.Tier
			}
		}
	}
	return ""
}
