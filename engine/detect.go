package engine

import (
	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Detect tells which engine exposed families: the engine with the most family
// names under its prefixes (Mapping.Prefix and AltPrefixes: vllm: and vllm_,
// sglang:, trtllm_, nv_trt_llm_, tgi_, dynamo_frontend_), the first in table
// order on a tie, or ENGINE_UNSPECIFIED when no family belongs to a known
// engine. Families of other exporters on the same endpoint do not count:
// LMCache's, Triton's generic nv_inference_… and nv_gpu_…, and the
// dynamo_component_… families a Dynamo worker exposes next to its engine's
// own (a worker running vLLM is a vLLM endpoint; only dynamo_frontend_…
// families make a Dynamo frontend).
func Detect(families map[string]*dto.MetricFamily) llmdiagv1.Engine {
	best, bestN := llmdiagv1.Engine_ENGINE_UNSPECIFIED, 0
	for i := range table {
		m := &table[i]
		prefixes := m.Prefixes()
		n := 0
		for name := range families {
			if hasAnyPrefix(name, prefixes) {
				n++
			}
		}
		if n > bestN {
			best, bestN = m.Engine, n
		}
	}
	return best
}
