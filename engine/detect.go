package engine

import (
	"strings"

	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Detect tells which engine exposed families: the engine with the most family
// names under its prefix (vllm:, sglang:), the first in table order on a tie,
// or ENGINE_UNSPECIFIED when no family belongs to a known engine. Families of
// other exporters on the same endpoint (Dynamo, LMCache) do not count.
func Detect(families map[string]*dto.MetricFamily) llmdiagv1.Engine {
	best, bestN := llmdiagv1.Engine_ENGINE_UNSPECIFIED, 0
	for _, m := range table {
		n := 0
		for name := range families {
			if strings.HasPrefix(name, m.Prefix) {
				n++
			}
		}
		if n > bestN {
			best, bestN = m.Engine, n
		}
	}
	return best
}
