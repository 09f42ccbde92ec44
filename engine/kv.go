package engine

import "math"

// Replica is one replica's reading of a concept, keyed by its replica
// labels (Mapping.ReplicaLabels).
type Replica struct {
	Key string
	V   float64
}

// KV is a node's KV usage (0..1) and capacity in tokens as CombineKV reads
// them; a value is set only where its Has flag is.
type KV struct {
	Usage, Capacity       float64
	HasUsage, HasCapacity bool
	// UsageFrom is the concept Usage was computed from: KVUsedTokens or
	// KVUsage.
	UsageFrom Concept
}

// CombineKV combines a node's per-replica KV readings the one way every
// source does (direct scrape and Prometheus): usage is tokens used /
// capacity summed over replicas when both are exposed (SGLang); otherwise
// the usage gauge, weighted by each replica's capacity when usageAgg is
// CapacityWeighted and every replica's capacity is known (vLLM DP engines
// with different cache sizes), else its plain mean. A nil slice is a
// concept the engine does not expose (an empty one is exposed, with no
// series). Sums that overflow come back as they
// are, for the caller to report; a capacity that is not finite and positive
// is not used to derive usage.
func CombineKV(usage []Replica, usageAgg Agg, used, capacity []Replica) KV {
	var kv KV
	if capacity != nil {
		kv.Capacity, kv.HasCapacity = sumReplicas(capacity), true
	}
	capOK := kv.HasCapacity && !math.IsNaN(kv.Capacity) && !math.IsInf(kv.Capacity, 0)
	if used != nil && capOK && kv.Capacity > 0 {
		kv.Usage, kv.UsageFrom, kv.HasUsage = sumReplicas(used)/kv.Capacity, KVUsedTokens, true
		return kv
	}
	if usage == nil {
		return kv
	}
	kv.UsageFrom, kv.HasUsage = KVUsage, true
	if usageAgg == CapacityWeighted && capOK {
		if w, ok := weightedMean(usage, capacity); ok {
			kv.Usage = w
			return kv
		}
	}
	kv.Usage = sumReplicas(usage) / float64(len(usage))
	return kv
}

// weightedMean is the mean of vals weighted by the weight of the same key;
// false when a key has no weight or the weights add to 0.
func weightedMean(vals, weights []Replica) (float64, bool) {
	w := make(map[string]float64, len(weights))
	for _, k := range weights {
		w[k.Key] += k.V
	}
	var num, den float64
	for _, v := range vals {
		c, ok := w[v.Key]
		if !ok {
			return 0, false
		}
		num += v.V * c
		den += c
	}
	if den <= 0 {
		return 0, false
	}
	return num / den, true
}

func sumReplicas(vals []Replica) float64 {
	var t float64
	for _, v := range vals {
		t += v.V
	}
	return t
}
