package engine_test

import (
	"math"
	"testing"

	"github.com/llmdiag/llmdiag/engine"
)

func TestCombineKV(t *testing.T) {
	r := func(kv ...any) []engine.Replica {
		out := []engine.Replica{}
		for i := 0; i < len(kv); i += 2 {
			out = append(out, engine.Replica{Key: kv[i].(string), V: kv[i+1].(float64)})
		}
		return out
	}
	inf := math.Inf(1)
	tests := []struct {
		name                  string
		usage, used, capacity []engine.Replica
		agg                   engine.Agg
		want                  engine.KV
	}{
		{name: "nothing exposed"},
		{name: "used over capacity (SGLang)", usage: r("a", 0.9), used: r("a", 100.0, "b", 300.0), capacity: r("a", 1000.0, "b", 1000.0),
			want: engine.KV{Usage: 0.2, Capacity: 2000, HasUsage: true, HasCapacity: true, UsageFrom: engine.KVUsedTokens}},
		{name: "capacity weighted (vLLM DP)", usage: r("0", 0.5, "1", 1.0), capacity: r("0", 3000.0, "1", 1000.0), agg: engine.CapacityWeighted,
			want: engine.KV{Usage: 0.625, Capacity: 4000, HasUsage: true, HasCapacity: true, UsageFrom: engine.KVUsage}},
		{name: "a replica without capacity: plain mean", usage: r("0", 0.5, "1", 1.0), capacity: r("0", 3000.0), agg: engine.CapacityWeighted,
			want: engine.KV{Usage: 0.75, Capacity: 3000, HasUsage: true, HasCapacity: true, UsageFrom: engine.KVUsage}},
		{name: "mean aggregation ignores capacity", usage: r("0", 0.5, "1", 1.0), capacity: r("0", 3000.0, "1", 1000.0), agg: engine.Mean,
			want: engine.KV{Usage: 0.75, Capacity: 4000, HasUsage: true, HasCapacity: true, UsageFrom: engine.KVUsage}},
		{name: "overflowed capacity is not used to derive usage", usage: r("0", 0.5, "1", 1.0), used: r("0", 1.0), capacity: r("0", inf, "1", 1.0), agg: engine.CapacityWeighted,
			want: engine.KV{Usage: 0.75, Capacity: inf, HasUsage: true, HasCapacity: true, UsageFrom: engine.KVUsage}},
		{name: "zero capacity: used tokens cannot be divided", used: r("0", 1.0), capacity: r("0", 0.0),
			want: engine.KV{Capacity: 0, HasCapacity: true}},
	}
	for _, tc := range tests {
		got := engine.CombineKV(tc.usage, tc.agg, tc.used, tc.capacity)
		if got != tc.want {
			t.Errorf("%s: CombineKV = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Exposed with no series: a mean of nothing, for the caller to report.
	if got := engine.CombineKV([]engine.Replica{}, engine.Mean, nil, nil); !got.HasUsage || !math.IsNaN(got.Usage) {
		t.Errorf("usage exposed without series = %+v, want a NaN usage", got)
	}
}
