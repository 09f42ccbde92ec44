package diagnose

import (
	"math"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// LoadScore rates how loaded m's node is: 0 idle, 1 saturated, above 1
// overloaded. It is the highest of three pressures, each 1 at the point
// routers treat as saturated: queue ÷ QueueSaturated, KV pressure ÷
// KVSaturated and, when MaxRunning is configured, running ÷ MaxRunning.
// Unknown gauges do not count; with none known, or m nil, the score is 0.
// Staleness is not considered: the verdict's routable flag covers it.
func LoadScore(m *llmdiagv1.NodeMetrics, t Thresholds) float64 {
	if m == nil {
		return 0
	}
	var score float64
	pressure := func(v opt, saturated float64) {
		if v.ok && saturated > 0 {
			score = math.Max(score, v.v/saturated)
		}
	}
	pressure(known(m.Queue), t.QueueSaturated)
	pressure(known(m.KvPressure), t.KVSaturated)
	pressure(known(m.Running), t.MaxRunning)
	return round3(score)
}

// round3 rounds to three decimals, enough for a score and stable in JSON.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
