package compare_test

import (
	"testing"

	"github.com/llmdiag/llmdiag/compare"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

func TestMetricByName(t *testing.T) {
	for name, want := range map[string]llmdiagv1.LatencyMetric{
		"ttft": llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, " E2E ": llmdiagv1.LatencyMetric_LATENCY_METRIC_E2E,
		"itl": llmdiagv1.LatencyMetric_LATENCY_METRIC_INTER_TOKEN, "inter_token": llmdiagv1.LatencyMetric_LATENCY_METRIC_INTER_TOKEN,
		"tpot": llmdiagv1.LatencyMetric_LATENCY_METRIC_TIME_PER_OUTPUT_TOKEN, "queue_time": llmdiagv1.LatencyMetric_LATENCY_METRIC_QUEUE_TIME,
	} {
		if got, ok := compare.MetricByName(name); !ok || got != want {
			t.Errorf("MetricByName(%q) = %v, %v; want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "p99", "ttft_seconds"} {
		if _, ok := compare.MetricByName(name); ok {
			t.Errorf("MetricByName(%q) takes an unknown name", name)
		}
	}
}
