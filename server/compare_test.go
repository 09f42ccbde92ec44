package server_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source"
)

var ttftLayout = []float64{0.1, 0.5, 1, 2.5, 5, 10, math.Inf(1)}

// shiftSource is a source with history: each node's TTFT sits in one bucket
// now and (possibly) another one an hour or more ago; a node reaches back
// only as far as its history does, as a scrape ring would.
type shiftSource struct {
	now   time.Time
	nodes []fleet.Node
	// ttft[node] = {typical now, typical an hour or more ago}.
	ttft map[string][2]float64
	// history[node] is how far back the node can be read.
	history map[string]time.Duration
}

func (f *shiftSource) metrics(n fleet.Node, window string, offset time.Duration) *llmdiagv1.NodeMetrics {
	typical := f.ttft[n.ID][0]
	if offset >= time.Hour {
		typical = f.ttft[n.ID][1]
	}
	at := f.now.Add(-offset)
	mk := func(at time.Time, k float64) *sample.Sample {
		h := &sample.Histogram{Bounds: ttftLayout, Counts: make([]float64, len(ttftLayout))}
		for i, b := range ttftLayout {
			if b >= typical {
				h.Counts[i] = k * 60
			}
		}
		h.Count, h.Sum = k*60, k*60*typical
		s := &sample.Sample{At: at, Up: true, Engine: llmdiagv1.Engine_ENGINE_VLLM, Model: n.Model,
			Queue: sample.F(0), Running: sample.F(10), KVUsage: sample.F(0.3), RequestsFinished: sample.F(k * 60)}
		s.Hists[sample.TTFT] = h
		return s
	}
	m := metrics.Compute(mk(at, 101), mk(at.Add(-time.Minute), 100), window, nil, at, 30*time.Second)
	m.Node = n.ID
	return m
}

func (f *shiftSource) Refresh(_ context.Context, window string) ([]source.Observation, error) {
	var out []source.Observation
	for _, n := range f.nodes {
		m := f.metrics(n, window, 0)
		out = append(out, source.Observation{Node: n, Engine: m.GetEngine(), Metrics: m})
	}
	return out, nil
}

func (f *shiftSource) Window(_ context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	for _, n := range f.nodes {
		if n.ID != node {
			continue
		}
		if h := f.history[node]; offset > h {
			return nil, fmt.Errorf("no samples of %q from %s ago: the oldest kept is from %s ago", node, offset, h)
		}
		m := f.metrics(n, window, offset)
		m.ObservedAt = timestamppb.New(f.now.Add(-offset))
		return m, nil
	}
	return nil, source.ErrUnknownNode
}

// compareService is a service over a memory store filled by one refresh of
// a shiftSource: a (slower than an hour ago), b (unchanged) and c (only
// 30 minutes of history) carry a team label, d none.
func compareService(t *testing.T) *server.Service {
	t.Helper()
	src := &shiftSource{
		now: time.Now(),
		nodes: []fleet.Node{
			{ID: "a", Model: "m1", Labels: map[string]string{"team": "search", "region": "eu"}},
			{ID: "b", Model: "m1", Labels: map[string]string{"team": "search"}},
			{ID: "c", Model: "m2", Labels: map[string]string{"team": "ads"}},
			{ID: "d", Model: "m2"},
		},
		ttft:    map[string][2]float64{"a": {3, 0.7}, "b": {0.7, 0.7}, "c": {0.3, 0.3}, "d": {7, 7}},
		history: map[string]time.Duration{"a": 3 * time.Hour, "b": 3 * time.Hour, "c": 30 * time.Minute, "d": 3 * time.Hour},
	}
	return serviceOver(t, src, server.Config{})
}

func TestCompareBadInput(t *testing.T) {
	svc := compareService(t)
	ttft := llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT
	tests := []struct {
		name  string
		req   *llmdiagv1.ComparePercentilesRequest
		field string
	}{
		{"label missing", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, GroupBy: llmdiagv1.GroupBy_GROUP_BY_LABEL}, "label"},
		{"label not a label name", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, GroupBy: llmdiagv1.GroupBy_GROUP_BY_LABEL, Label: `team"} or vector(1)`}, "label"},
		{"reserved label", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, GroupBy: llmdiagv1.GroupBy_GROUP_BY_LABEL, Label: "__name__"}, "label"},
		{"label without label grouping", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, GroupBy: llmdiagv1.GroupBy_GROUP_BY_MODEL, Label: "team"}, "label"},
		{"label with default grouping", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, Label: "team"}, "label"},
		{"zero baseline", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, BaselineOffset: durationpb.New(0)}, "baseline_offset"},
		{"negative baseline", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, BaselineOffset: durationpb.New(-time.Hour)}, "baseline_offset"},
		{"baseline beyond 7d", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, BaselineOffset: durationpb.New(7*24*time.Hour + time.Second)}, "baseline_offset"},
		{"malformed baseline", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, BaselineOffset: &durationpb.Duration{Seconds: 1, Nanos: -1}}, "baseline_offset"},
		{"offset plus baseline beyond the limit", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, Offset: durationpb.New(25 * 24 * time.Hour), BaselineOffset: durationpb.New(6 * 24 * time.Hour)}, "baseline_offset"},
		{"bad offset with baseline", &llmdiagv1.ComparePercentilesRequest{Metric: ttft, Offset: durationpb.New(-time.Hour), BaselineOffset: durationpb.New(time.Hour)}, "offset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.ComparePercentiles(context.Background(), connect.NewRequest(tc.req))
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("code %v (%v), want invalid_argument", connect.CodeOf(err), err)
			}
			var ce *connect.Error
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Message(), tc.field+":") {
				t.Fatalf("error %q does not name %q", err, tc.field)
			}
		})
	}
	// The edges are accepted.
	for _, b := range []time.Duration{time.Nanosecond, 7 * 24 * time.Hour} {
		if _, err := svc.ComparePercentiles(context.Background(), connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{Metric: ttft, BaselineOffset: durationpb.New(b)})); err != nil {
			t.Errorf("baseline %v: %v", b, err)
		}
	}
}

func TestCompareByLabelAndBaseline(t *testing.T) {
	svc := compareService(t)
	ctx := context.Background()
	ttft := llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT

	// The fleet's labels reach ListNodes.
	nodes, err := svc.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, n := range nodes.Msg.GetNodes() {
		labels[n.GetId()] = fmt.Sprint(n.GetLabels())
	}
	if want := map[string]string{"a": "map[region:eu team:search]", "b": "map[team:search]", "c": "map[team:ads]", "d": "map[]"}; fmt.Sprint(labels) != fmt.Sprint(want) {
		t.Errorf("labels %v, want %v", labels, want)
	}

	t.Run("by label", func(t *testing.T) {
		resp, err := svc.ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{
			Metric: ttft, GroupBy: llmdiagv1.GroupBy_GROUP_BY_LABEL, Label: "team", Quantiles: []float64{0.5, 0.99}}))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range resp.Msg.GetRows() {
			got = append(got, fmt.Sprintf("%s=%s#%d", r.GetSubject(), strings.Join(r.GetNodes(), "+"), r.GetValues()[0].GetRank()))
		}
		// ads (c, 0.3 s) is faster than search (a+b: 0.7 s and 3 s summed).
		if want := "ads=c#1 search=a+b#2 (no team label)=d#0"; strings.Join(got, " ") != want {
			t.Errorf("rows %s, want %s", strings.Join(got, " "), want)
		}
	})

	t.Run("baseline", func(t *testing.T) {
		resp, err := svc.ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{
			Metric: ttft, Quantiles: []float64{0.5, 0.99}, BaselineOffset: durationpb.New(time.Hour)}))
		if err != nil {
			t.Fatal(err)
		}
		rows := resp.Msg.GetRows()
		if len(rows) != 8 {
			t.Fatalf("%d rows, want 4 pairs: %v", len(rows), rows)
		}
		type want struct {
			p99now, p99then float64 // the P99s: within the bucket of each typical value
			note            string
		}
		// 60 observations all in one bucket: P99 = lower + (upper-lower)·0.99.
		p99 := func(lo, hi float64) float64 { return lo + (hi-lo)*0.99 }
		wants := map[string]want{
			"a": {p99(2.5, 5), p99(0.5, 1), ""},
			"b": {p99(0.5, 1), p99(0.5, 1), ""},
			"c": {p99(0.1, 0.5), math.NaN(), "no baseline for c: "},
			"d": {p99(5, 10), p99(5, 10), ""},
		}
		for i := 0; i < len(rows); i += 2 {
			now, then := rows[i], rows[i+1]
			w := wants[now.GetSubject()]
			if then.GetSubject() != now.GetSubject() || now.GetOffset().AsDuration() != 0 || then.GetOffset().AsDuration() != time.Hour {
				t.Fatalf("pair %d: %s@%v, %s@%v", i/2, now.GetSubject(), now.GetOffset().AsDuration(), then.GetSubject(), then.GetOffset().AsDuration())
			}
			if got := now.GetValues()[1].GetPercentile().GetValue(); math.Abs(got-w.p99now) > 1e-9 || now.GetValues()[1].GetRank() == 0 {
				t.Errorf("%s now: P99 %v rank %d, want %v", now.GetSubject(), got, now.GetValues()[1].GetRank(), w.p99now)
			}
			if then.GetValues()[1].GetRank() != 0 {
				t.Errorf("%s baseline ranked %d", then.GetSubject(), then.GetValues()[1].GetRank())
			}
			if w.note != "" {
				// The source cannot reach an hour back for c: a note, its
				// words, and no ratio — the rest of the comparison stands.
				if !strings.Contains(then.GetNote(), w.note) || !strings.Contains(then.GetNote(), "from 30m0s ago") || then.GetRatioToBaseline() != 0 || now.GetRatioToBaseline() != 0 {
					t.Errorf("c baseline: note %q ratio %v", then.GetNote(), then.GetRatioToBaseline())
				}
				continue
			}
			if got := then.GetValues()[1].GetPercentile().GetValue(); math.Abs(got-w.p99then) > 1e-9 || then.GetNote() != "" {
				t.Errorf("%s then: P99 %v note %q, want %v", then.GetSubject(), got, then.GetNote(), w.p99then)
			}
			ratio := w.p99now / w.p99then
			if math.Abs(now.GetRatioToBaseline()-ratio) > 1e-9 || math.Abs(then.GetRatioToBaseline()-ratio) > 1e-9 {
				t.Errorf("%s ratio to baseline %v / %v, want %v", now.GetSubject(), now.GetRatioToBaseline(), then.GetRatioToBaseline(), ratio)
			}
		}
		// Ranks are over the rows now: c 1, b 2, a 3, d 4 at P99.
		for i, want := range []uint32{3, 2, 1, 4} {
			if got := rows[2*i].GetValues()[1].GetRank(); got != want {
				t.Errorf("%s rank %d, want %d", rows[2*i].GetSubject(), got, want)
			}
		}
	})
}
