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

// Input is one comparison: what to compare, how to form the subjects, and
// the node metrics it reads. Compare does no I/O: the caller fetches the
// window (and the baseline window) for every node.
type Input struct {
	Metric llmdiagv1.LatencyMetric
	// Quantiles, each in (0, 1); the caller validates them.
	Quantiles []float64
	GroupBy   llmdiagv1.GroupBy
	// Label is the node label GROUP_BY_LABEL groups by.
	Label string
	// Nodes are the nodes' metrics over the window: the subjects "now".
	Nodes []*llmdiagv1.NodeMetrics
	// Labels are the nodes' labels by node id; only GROUP_BY_LABEL reads
	// them.
	Labels map[string]map[string]string
	// BaselineOffset, when positive, gives every subject a second row: the
	// same subject over the window ending BaselineOffset earlier.
	BaselineOffset time.Duration
	// Baseline are the nodes' metrics over that earlier window, by node id.
	Baseline map[string]*llmdiagv1.NodeMetrics
	// BaselineMissing says, by node id, why a node has no baseline (the
	// source could not answer that window). A subject with a member
	// missing has a baseline row with a note instead of values.
	BaselineMissing map[string]string
}

// group is one subject's members, before their histograms are summed.
type group struct {
	name    string
	members []*llmdiagv1.NodeMetrics
}

// summed is a subject's histogram: its members' bucket counts summed, or a
// note saying why they cannot be.
type summed struct {
	bounds []float64
	counts []float64
	note   string
}

// Compare builds the comparison the input asks for.
//
// Rows are the subjects sorted by name; with a baseline each subject's row
// is followed by its baseline row (CompareRow.offset = the baseline offset).
// Ranks, ratios to the median, within-resolution marks and outliers are
// computed over the subjects now; a baseline row has no rank and no ratio to
// the median. Both rows of a pair carry ratio_to_baseline = now / then at
// the highest requested quantile, and a baseline value is within resolution
// when the subject's value now lies in the baseline value's bucket.
//
// With GROUP_BY_LABEL, nodes without the label are not summed into a group
// of their own (they share nothing): they are listed in one last row,
// subject "(no LABEL label)", with a note and no values.
func Compare(in Input) *llmdiagv1.ComparePercentilesResponse {
	qs := in.Quantiles
	resp := &llmdiagv1.ComparePercentilesResponse{Metric: in.Metric, Quantiles: qs}
	groups, absent := form(in)
	var now []*llmdiagv1.CompareRow
	type pair struct{ now, then *llmdiagv1.CompareRow }
	var pairs []pair
	for _, g := range groups {
		row := makeRow(g, sum(in.Metric, g.members), qs)
		now = append(now, row)
		resp.Rows = append(resp.Rows, row)
		if in.BaselineOffset > 0 {
			s := summed{}
			if members, why := baselineOf(in, g); why != "" {
				s.note = why
			} else {
				s = sum(in.Metric, members)
			}
			then := makeRow(g, s, qs)
			then.Offset = durationpb.New(in.BaselineOffset)
			resp.Rows = append(resp.Rows, then)
			pairs = append(pairs, pair{row, then})
		}
	}
	rank(now, len(qs))
	hi := tails(resp.Rows, now, qs)
	for _, p := range pairs {
		baseline(p.now, p.then, hi)
	}
	if len(absent) > 0 {
		row := &llmdiagv1.CompareRow{
			Subject: fmt.Sprintf("(no %s label)", in.Label),
			Nodes:   absent,
			Note:    fmt.Sprintf("%d node(s) without the label %q: neither grouped nor ranked", len(absent), in.Label),
		}
		for _, q := range qs {
			row.Values = append(row.Values, &llmdiagv1.CompareValue{Percentile: nanPercentile(q)})
		}
		resp.Rows = append(resp.Rows, row)
	}
	oldest, worst := time.Time{}, time.Duration(0)
	for _, m := range in.Nodes {
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

func nanPercentile(q float64) *llmdiagv1.Percentile {
	return &llmdiagv1.Percentile{Quantile: q, Value: math.NaN(), LowerBound: math.NaN(), UpperBound: math.NaN()}
}

// makeRow computes a subject's percentiles from its summed histogram.
func makeRow(g group, s summed, qs []float64) *llmdiagv1.CompareRow {
	row := &llmdiagv1.CompareRow{Subject: g.name, Note: s.note}
	for _, m := range g.members {
		row.Nodes = append(row.Nodes, m.GetNode())
	}
	if n := len(s.counts); n > 0 && s.note == "" {
		row.Count = s.counts[n-1]
	}
	for _, q := range qs {
		p := nanPercentile(q)
		if s.note == "" {
			e := histogram.Quantile(q, histogram.Buckets(&sample.Histogram{Bounds: s.bounds, Counts: s.counts}))
			p.Value, p.LowerBound, p.UpperBound = e.Value, e.Lower, e.Upper
		}
		row.Values = append(row.Values, &llmdiagv1.CompareValue{Percentile: p})
	}
	return row
}

// form turns nodes into groups sorted by name: one per node, or one per
// model, engine or label value. With GROUP_BY_LABEL it also returns the
// nodes that lack the label.
func form(in Input) (groups []group, absent []string) {
	key := func(m *llmdiagv1.NodeMetrics) (string, bool) { return m.GetNode(), true }
	switch in.GroupBy {
	case llmdiagv1.GroupBy_GROUP_BY_MODEL:
		key = func(m *llmdiagv1.NodeMetrics) (string, bool) { return m.GetModel(), true }
	case llmdiagv1.GroupBy_GROUP_BY_ENGINE:
		key = func(m *llmdiagv1.NodeMetrics) (string, bool) { return fleet.EngineName(m.GetEngine()), true }
	case llmdiagv1.GroupBy_GROUP_BY_LABEL:
		key = func(m *llmdiagv1.NodeMetrics) (string, bool) {
			v := in.Labels[m.GetNode()][in.Label]
			return v, v != ""
		}
	}
	index := map[string]int{}
	for _, m := range in.Nodes {
		k, ok := key(m)
		if !ok {
			absent = append(absent, m.GetNode())
			continue
		}
		i, seen := index[k]
		if !seen {
			i = len(groups)
			index[k] = i
			groups = append(groups, group{name: k})
		}
		groups[i].members = append(groups[i].members, m)
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].name < groups[j].name })
	return groups, absent
}

// baselineOf is g's members over the baseline window, or why one of them
// has none.
func baselineOf(in Input, g group) ([]*llmdiagv1.NodeMetrics, string) {
	out := make([]*llmdiagv1.NodeMetrics, len(g.members))
	for i, m := range g.members {
		b := in.Baseline[m.GetNode()]
		if b == nil {
			why := in.BaselineMissing[m.GetNode()]
			if why == "" {
				why = "the source returned nothing"
			}
			return nil, fmt.Sprintf("no baseline for %s: %s", m.GetNode(), why)
		}
		out[i] = b
	}
	return out, ""
}

// sum adds the members' bucket counts, as `sum by (le)` would; only
// identical bucket layouts can be summed.
func sum(metric llmdiagv1.LatencyMetric, members []*llmdiagv1.NodeMetrics) summed {
	var s summed
	for _, m := range members {
		d := Distribution(m, metric)
		switch {
		case d == nil || len(d.GetBucketCounts()) == 0:
			return summed{note: fmt.Sprintf("%s does not expose this metric", m.GetNode())}
		case s.bounds == nil:
			s.bounds = slices.Clone(d.GetBucketBounds())
			s.counts = slices.Clone(d.GetBucketCounts())
		case !slices.Equal(s.bounds, d.GetBucketBounds()):
			return summed{note: fmt.Sprintf("%s uses other bucket bounds; groups can only sum identical layouts", m.GetNode())}
		default:
			for i, c := range d.GetBucketCounts() {
				s.counts[i] += c
			}
		}
	}
	return s
}

// bucket is the bucket a percentile lies in: values in the same bucket cannot
// be told apart by the histograms.
type bucket struct{ lo, hi float64 }

func bucketOf(p *llmdiagv1.Percentile) bucket {
	return bucket{p.GetLowerBound(), p.GetUpperBound()}
}

// contains reports whether v lies in the percentile's bucket, bounds included.
func contains(p *llmdiagv1.Percentile, v float64) bool {
	return p.GetLowerBound() <= v && v <= p.GetUpperBound()
}

// rank sets, per quantile, over the rows with a value: the rank (1 = lowest
// value), the ratio to the median value, and whether the median lies in the
// value's bucket (within resolution). Values in the same bucket — equal
// lower and upper bounds — are tied, as are equal values: a row's rank is
// one more than the number of rows with a lower value in another bucket.
func rank(rows []*llmdiagv1.CompareRow, nq int) {
	for qi := 0; qi < nq; qi++ {
		var defined []*llmdiagv1.CompareValue
		for _, r := range rows {
			if v := r.Values[qi]; !math.IsNaN(v.GetPercentile().GetValue()) {
				defined = append(defined, v)
			}
		}
		if len(defined) == 0 {
			continue
		}
		sort.SliceStable(defined, func(i, j int) bool {
			return defined[i].GetPercentile().GetValue() < defined[j].GetPercentile().GetValue()
		})
		vals := make([]float64, len(defined))
		for i, cv := range defined {
			vals[i] = cv.GetPercentile().GetValue()
		}
		med := median(vals)
		// lowerInBucket counts, per bucket, the rows already passed: all of
		// them have a lower value than the run of equal values at i.
		lowerInBucket := map[bucket]int{}
		for i := 0; i < len(defined); {
			j := i
			for j < len(defined) && vals[j] == vals[i] {
				j++
			}
			for _, cv := range defined[i:j] {
				p := cv.GetPercentile()
				cv.Rank = uint32(1 + i - lowerInBucket[bucketOf(p)])
				if med > 0 {
					cv.RatioToMedian = p.GetValue() / med
				}
				cv.WithinResolution = len(defined) >= 2 && contains(p, med)
			}
			for _, cv := range defined[i:j] {
				lowerInBucket[bucketOf(cv.GetPercentile())]++
			}
			i = j
		}
	}
}

// tails sets every row's tail ratio (highest quantile / lowest) and flags
// outliers among the rows now at the highest quantile, whose index it
// returns.
func tails(all, now []*llmdiagv1.CompareRow, qs []float64) int {
	if len(qs) == 0 {
		return -1
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
	for _, r := range all {
		l, h := r.Values[lo].GetPercentile().GetValue(), r.Values[hi].GetPercentile().GetValue()
		if l > 0 && !math.IsNaN(h) {
			r.TailRatio = h / l
		}
	}
	defined := 0
	for _, r := range now {
		if !math.IsNaN(r.Values[hi].GetPercentile().GetValue()) {
			defined++
		}
	}
	for _, r := range now {
		r.Outlier = defined >= 3 && r.Values[hi].GetRatioToMedian() >= OutlierRatio
	}
	return hi
}

// baseline sets ratio_to_baseline (now / then at the highest quantile) on
// both rows of a pair, and marks the baseline values the value now cannot
// be told apart from.
func baseline(now, then *llmdiagv1.CompareRow, hi int) {
	if hi < 0 {
		return
	}
	for qi, cv := range then.Values {
		p, v := cv.GetPercentile(), now.Values[qi].GetPercentile().GetValue()
		cv.WithinResolution = !math.IsNaN(v) && !math.IsNaN(p.GetValue()) && contains(p, v)
	}
	n, t := now.Values[hi].GetPercentile().GetValue(), then.Values[hi].GetPercentile().GetValue()
	if t > 0 && !math.IsNaN(n) {
		now.RatioToBaseline = n / t
		then.RatioToBaseline = n / t
	}
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
