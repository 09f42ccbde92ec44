package compare

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/sample"
)

// OutlierRatio is how many times the median subject's value at the highest
// requested quantile a subject must reach to be flagged an outlier.
const OutlierRatio = 2.0

// Distribution picks metric's distribution out of m; nil when unknown.
func Distribution(m *llmdiagv1.NodeMetrics, metric llmdiagv1.LatencyMetric) *llmdiagv1.Distribution {
	switch metric {
	case llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT:
		return m.GetTtft()
	case llmdiagv1.LatencyMetric_LATENCY_METRIC_E2E:
		return m.GetE2E()
	case llmdiagv1.LatencyMetric_LATENCY_METRIC_INTER_TOKEN:
		return m.GetInterToken()
	case llmdiagv1.LatencyMetric_LATENCY_METRIC_TIME_PER_OUTPUT_TOKEN:
		return m.GetTimePerOutputToken()
	case llmdiagv1.LatencyMetric_LATENCY_METRIC_QUEUE_TIME:
		return m.GetQueueTime()
	}
	return nil
}

type subject struct {
	name   string
	nodes  []string
	bounds []float64
	counts []float64
	note   string
}

// Compare builds the comparison of subjects (each a node's metrics over the
// same window) at quantiles qs, grouped as group says.
func Compare(metric llmdiagv1.LatencyMetric, qs []float64, group llmdiagv1.GroupBy, nodes []*llmdiagv1.NodeMetrics) *llmdiagv1.ComparePercentilesResponse {
	resp := &llmdiagv1.ComparePercentilesResponse{Metric: metric, Quantiles: qs}
	subjects := form(metric, group, nodes)
	for _, sub := range subjects {
		row := &llmdiagv1.CompareRow{Subject: sub.name, Nodes: sub.nodes, Note: sub.note}
		if n := len(sub.counts); n > 0 {
			row.Count = sub.counts[n-1]
		}
		for _, q := range qs {
			p := &llmdiagv1.Percentile{Quantile: q, Value: math.NaN(), LowerBound: math.NaN(), UpperBound: math.NaN()}
			if sub.note == "" {
				e := histogram.Quantile(q, histogram.Buckets(&sample.Histogram{Bounds: sub.bounds, Counts: sub.counts}))
				p.Value, p.LowerBound, p.UpperBound = e.Value, e.Lower, e.Upper
			}
			row.Values = append(row.Values, &llmdiagv1.CompareValue{Percentile: p})
		}
		resp.Rows = append(resp.Rows, row)
	}
	rank(resp.Rows, len(qs))
	tails(resp.Rows, qs)
	oldest, worst := time.Time{}, time.Duration(0)
	for _, m := range nodes {
		if t := m.GetObservedAt().AsTime(); oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
		if d := m.GetStaleness().AsDuration(); d > worst {
			worst = d
		}
	}
	if !oldest.IsZero() {
		resp.ObservedAt = timestamppb.New(oldest)
	}
	resp.Staleness = durationpb.New(worst)
	return resp
}

// form turns nodes into subjects: one per node, or one per group with the
// members' bucket counts summed.
func form(metric llmdiagv1.LatencyMetric, group llmdiagv1.GroupBy, nodes []*llmdiagv1.NodeMetrics) []*subject {
	key := func(m *llmdiagv1.NodeMetrics) string { return m.GetNode() }
	switch group {
	case llmdiagv1.GroupBy_GROUP_BY_MODEL:
		key = func(m *llmdiagv1.NodeMetrics) string { return m.GetModel() }
	case llmdiagv1.GroupBy_GROUP_BY_ENGINE:
		key = func(m *llmdiagv1.NodeMetrics) string { return fleet.EngineName(m.GetEngine()) }
	}
	byKey := map[string]*subject{}
	var out []*subject
	for _, m := range nodes {
		k := key(m)
		sub, ok := byKey[k]
		if !ok {
			sub = &subject{name: k}
			byKey[k] = sub
			out = append(out, sub)
		}
		sub.nodes = append(sub.nodes, m.GetNode())
		d := Distribution(m, metric)
		switch {
		case sub.note != "":
		case d == nil || len(d.GetBucketCounts()) == 0:
			sub.note = fmt.Sprintf("%s does not expose this metric", m.GetNode())
		case sub.bounds == nil:
			sub.bounds = slices.Clone(d.GetBucketBounds())
			sub.counts = slices.Clone(d.GetBucketCounts())
		case !slices.Equal(sub.bounds, d.GetBucketBounds()):
			sub.note = fmt.Sprintf("%s uses other bucket bounds; groups can only sum identical layouts", m.GetNode())
		default:
			for i, c := range d.GetBucketCounts() {
				sub.counts[i] += c
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// rank sets, per quantile, rank (1 = lowest value; equal values share a rank)
// and the ratio to the median of the defined values.
func rank(rows []*llmdiagv1.CompareRow, nq int) {
	for qi := 0; qi < nq; qi++ {
		var vals []float64
		for _, r := range rows {
			if v := r.Values[qi].GetPercentile().GetValue(); !math.IsNaN(v) {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			continue
		}
		sort.Float64s(vals)
		med := median(vals)
		for _, r := range rows {
			cv := r.Values[qi]
			v := cv.GetPercentile().GetValue()
			if math.IsNaN(v) {
				continue
			}
			cv.Rank = uint32(sort.SearchFloat64s(vals, v) + 1)
			if med > 0 {
				cv.RatioToMedian = v / med
			}
		}
	}
}

// tails sets the tail ratio (highest quantile / lowest) and flags outliers at
// the highest quantile.
func tails(rows []*llmdiagv1.CompareRow, qs []float64) {
	if len(qs) == 0 {
		return
	}
	lo, hi := 0, 0
	for i, q := range qs {
		if q < qs[lo] {
			lo = i
		}
		if q > qs[hi] {
			hi = i
		}
	}
	defined := 0
	for _, r := range rows {
		if !math.IsNaN(r.Values[hi].GetPercentile().GetValue()) {
			defined++
		}
	}
	for _, r := range rows {
		l, h := r.Values[lo].GetPercentile().GetValue(), r.Values[hi].GetPercentile().GetValue()
		if l > 0 && !math.IsNaN(h) {
			r.TailRatio = h / l
		}
		r.Outlier = defined >= 3 && r.Values[hi].GetRatioToMedian() >= OutlierRatio
	}
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
