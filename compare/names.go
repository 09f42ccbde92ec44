package compare

import (
	"strings"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// MetricNamesHint lists the metric names MetricByName takes, for a usage
// message.
const MetricNamesHint = "ttft, e2e, itl, tpot or queue_time"

// metricNames are the metrics' short names and the long names they stand
// for.
var metricNames = map[string]llmdiagv1.LatencyMetric{
	"ttft":                  llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT,
	"e2e":                   llmdiagv1.LatencyMetric_LATENCY_METRIC_E2E,
	"itl":                   llmdiagv1.LatencyMetric_LATENCY_METRIC_INTER_TOKEN,
	"inter_token":           llmdiagv1.LatencyMetric_LATENCY_METRIC_INTER_TOKEN,
	"tpot":                  llmdiagv1.LatencyMetric_LATENCY_METRIC_TIME_PER_OUTPUT_TOKEN,
	"time_per_output_token": llmdiagv1.LatencyMetric_LATENCY_METRIC_TIME_PER_OUTPUT_TOKEN,
	"queue_time":            llmdiagv1.LatencyMetric_LATENCY_METRIC_QUEUE_TIME,
}

// MetricByName is the latency metric a person names (ttft, e2e, itl or
// inter_token, tpot or time_per_output_token, queue_time; any case, spaces
// around ignored), as `llmdiag compare --metric`, the MCP server's
// compare_percentiles and Slack's `/llmdiag compare` take it.
func MetricByName(name string) (llmdiagv1.LatencyMetric, bool) {
	m, ok := metricNames[strings.ToLower(strings.TrimSpace(name))]
	return m, ok
}
