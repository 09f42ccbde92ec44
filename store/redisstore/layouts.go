package redisstore

import "math"

// layouts are the lists the record codec refers to by index instead of
// writing them out: the engines' bucket bounds (as Distributions carry
// them, +Inf last; from vllm/v1/metrics/loggers.py and SGLang's
// collector.py, listed in docs/engine-metrics.md) and the quantile
// lists. Records written by one process are read by others, possibly of
// another version, so this table is append-only: never reorder, change or
// remove an entry. A layout not listed is written inline.
var layouts = func() [][]float64 {
	inf := math.Inf(1)
	withInf := func(b ...float64) []float64 { return append(b, inf) }
	return [][]float64{
		// Quantile lists.
		{0.5, 0.95, 0.99}, // metrics.DefaultQuantiles
		{0.5, 0.9, 0.95, 0.99},
		{0.5, 0.9, 0.99},
		// vLLM V1: TTFT, inter-token/TPOT, request latency (e2e, queue).
		withInf(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560),
		withInf(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80),
		withInf(0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680),
		// SGLang: TTFT, inter-token, e2e, queue.
		withInf(0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400),
		withInf(0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8),
		withInf(0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400),
		withInf(0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
			200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000),
	}
}()
