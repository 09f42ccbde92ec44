package prom

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
)

// loraSeries is the newest LoRA info series of one replica (key): its
// value (the time vLLM set it) and adapter lists.
type loraSeries struct {
	key   string
	at    float64
	lists engine.LoRALists
}

// effectConcept is the effect concept named name (engine.Concept.String)
// among m's effects.
func effectConcept(m *engine.Mapping, name string) (engine.Concept, bool) {
	for c := range m.Effects {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}

// addEffect reads one sample of an effects query (builder.effects) into
// ns. a.mu must be held.
func (a *assembly) addEffect(es *engineState, ns *nodeState, q query, ls []string, v float64,
	effectAt int, replicaAt, rankAt, loraAt []int) {
	if effectAt < 0 {
		return
	}
	name := ls[effectAt]
	switch {
	case name == effectLoRA:
		if !finite(v) {
			return
		}
		l := loraSeries{key: replicaKey(ls, replicaAt), at: v}
		if loraAt[0] >= 0 {
			l.lists.Running = ls[loraAt[0]]
		}
		if loraAt[1] >= 0 {
			l.lists.Waiting = ls[loraAt[1]]
		}
		if loraAt[2] >= 0 {
			l.lists.Max = ls[loraAt[2]]
		}
		// topk keeps one series per replica; should two arrive (aliases
		// of one family), the newest wins, as in engine.Extract.
		i := slices.IndexFunc(ns.lora, func(x loraSeries) bool { return x.key == l.key })
		switch {
		case i < 0:
			ns.lora = append(ns.lora, l)
		case v > ns.lora[i].at:
			ns.lora[i] = l
		}
	case strings.HasPrefix(name, effectOffload):
		tier := strings.TrimPrefix(name, effectOffload)
		// The first tier of Mapping.Offload present, as engine.Extract.
		for _, o := range es.m.Offload {
			if o.Tier == ns.offload {
				return
			}
			if o.Tier == tier {
				ns.offload = tier
				return
			}
		}
	default:
		c, ok := effectConcept(es.m, name)
		if !ok {
			return
		}
		if effectRanked(es.m, c) {
			srcs := es.m.Effects[c]
			ns.addReplica(query{shape: shapeRanked, concept: c, agg: srcs[0].Agg}, ls, v, replicaAt, rankAt)
			return
		}
		if !finite(v) {
			ns.errs = append(ns.errs, fmt.Sprintf("%s: value is %v", c, v))
			return
		}
		ns.vals[c].set(0, v)
	}
}

// setEffects fills the cache and decoding effects of nm as
// metrics.SetEffects does for a direct scrape, from the node's effect
// concepts (rates over the window, or cumulative counters for the
// lifetime: only ratios of counters are used), LoRA series and offload
// tier. The inputs stay on the stack: only nm's fields and the LoRA
// adapters' names are allocated.
func (ns *nodeState) setEffects(nm *llmdiagv1.NodeMetrics) {
	var buf [10]float64
	n := 0
	at := func(v float64) *float64 {
		buf[n] = v
		n++
		return &buf[n-1]
	}
	get := func(c engine.Concept) *float64 {
		if v, ok := ns.value(c); ok {
			return at(v)
		}
		return nil
	}
	e := sample.Effects{
		PrefixCacheQueries: get(engine.PrefixCacheQueries),
		PrefixCacheHits:    get(engine.PrefixCacheHits),
		PrefixCacheHitRate: get(engine.PrefixCacheHitRate),
		SpecDrafts:         get(engine.SpecDrafts),
		SpecDraftTokens:    get(engine.SpecDraftTokens),
		SpecAcceptedTokens: get(engine.SpecAcceptedTokens),
		SpecAcceptRate:     get(engine.SpecAcceptRate),
		SpecAcceptLength:   get(engine.SpecAcceptLength),
		KVOffload:          ns.offload,
	}
	if len(ns.lora) > 0 {
		var lb [4]engine.LoRALists // a few replicas: on the stack
		lists := lb[:0]
		for _, l := range ns.lora {
			lists = append(lists, l.lists)
		}
		r, w := engine.CountLoRA(lists)
		e.LoRAAdaptersRunning, e.LoRAAdaptersWaiting = at(r), at(w)
		e.LoRARunning, e.LoRAWaiting, e.LoRAMax = engine.ReadLoRA(lists)
	}
	e = engine.CleanEffects(e)
	metrics.SetEffects(nm, &e, &e)
}

// value is concept c of the node: its value, or its replicas aggregated;
// false when absent or not finite.
func (ns *nodeState) value(c engine.Concept) (float64, bool) {
	if c < 0 || int(c) >= len(ns.vals) {
		return 0, false
	}
	if ns.vals[c].ok {
		return ns.vals[c].v, true
	}
	if r := ns.reps[c]; r != nil && len(r.vs) > 0 && !isKV(c) {
		v := aggregate(r)
		return v, finite(v)
	}
	return 0, false
}
