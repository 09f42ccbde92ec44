package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/compare"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// ComparePercentiles: latency percentiles of many nodes, grouped, ranked
// and compared with a baseline.

// ComparePercentiles implements DiagnosisServiceHandler.
func (s *Service) ComparePercentiles(ctx context.Context, req *connect.Request[llmdiagv1.ComparePercentilesRequest]) (*connect.Response[llmdiagv1.ComparePercentilesResponse], error) {
	msg := req.Msg
	if msg.GetMetric() == llmdiagv1.LatencyMetric_LATENCY_METRIC_UNSPECIFIED {
		return nil, invalid("metric", errors.New("required: ttft, e2e, inter_token, time_per_output_token or queue_time"))
	}
	if _, ok := llmdiagv1.LatencyMetric_name[int32(msg.GetMetric())]; !ok {
		return nil, invalid("metric", fmt.Errorf("unknown value %d", msg.GetMetric()))
	}
	qs := msg.GetQuantiles()
	if len(qs) == 0 {
		qs = []float64{0.5, 0.95, 0.99}
	}
	if len(qs) > 20 {
		return nil, invalid("quantiles", errors.New("at most 20"))
	}
	for i, q := range qs {
		if !(q > 0 && q < 1) {
			return nil, invalid("quantiles", fmt.Errorf("quantiles[%d] = %v is outside (0, 1)", i, q))
		}
	}
	group := msg.GetGroupBy()
	if _, ok := llmdiagv1.GroupBy_name[int32(group)]; !ok {
		return nil, invalid("group_by", fmt.Errorf("unknown value %d", group))
	}
	switch label := msg.GetLabel(); {
	case group == llmdiagv1.GroupBy_GROUP_BY_LABEL && label == "":
		return nil, invalid("label", errors.New("required with GROUP_BY_LABEL"))
	case group == llmdiagv1.GroupBy_GROUP_BY_LABEL && !fleet.ValidLabelName(label):
		return nil, invalid("label", fmt.Errorf("%q is not a label name (letters, digits and _, not starting with a digit or __)", label))
	case group != llmdiagv1.GroupBy_GROUP_BY_LABEL && label != "":
		return nil, invalid("label", errors.New("only with GROUP_BY_LABEL"))
	}
	var baseline time.Duration
	if b := msg.GetBaselineOffset(); b != nil {
		if err := b.CheckValid(); err != nil {
			return nil, invalid("baseline_offset", err)
		}
		if baseline = b.AsDuration(); baseline <= 0 || baseline > MaxBaselineOffset {
			return nil, invalid("baseline_offset", fmt.Errorf("%v is outside (0, %v]", baseline, MaxBaselineOffset))
		}
	}
	offset, err := offsetOf("offset", msg.GetOffset())
	if err != nil {
		return nil, err
	}
	if d := offset + baseline; msg.GetOffset() != nil && d > MaxOffset {
		return nil, invalid("baseline_offset", fmt.Errorf("offset + baseline_offset = %v is beyond %v", d, MaxOffset))
	}
	if len(msg.GetNodes()) > s.cfg.MaxCompareSubjects {
		return nil, invalid("nodes", fmt.Errorf("at most %d", s.cfg.MaxCompareSubjects))
	}
	now, err := s.spanOf(msg.GetWindow(), offset)
	if err != nil {
		return nil, err
	}
	then := now
	if baseline > 0 {
		then.offset = now.offset + s.baselineStep(now, baseline)
		if then.offset > MaxOffset && now.step > 0 {
			// Rounding went past the limit the request kept to.
			then.offset -= now.step
		}
	}
	for i, id := range msg.GetNodes() {
		if !fleet.ValidID(id) {
			return nil, invalid(fmt.Sprintf("nodes[%d]", i), fmt.Errorf("%q is not a valid node id", id))
		}
	}
	ids := msg.GetNodes()
	if len(ids) == 0 {
		recs, err := s.list(ctx)
		if err != nil {
			return nil, storeErr(err)
		}
		for _, r := range recs {
			ids = append(ids, r.Node.GetId())
		}
		if len(ids) > s.cfg.MaxCompareSubjects {
			ids = ids[:s.cfg.MaxCompareSubjects]
		}
	}
	ids = uniqueIDs(ids)
	in := compare.Input{
		Metric:         msg.GetMetric(),
		Quantiles:      qs,
		GroupBy:        group,
		Label:          msg.GetLabel(),
		Labels:         make(map[string]map[string]string, len(ids)),
		BaselineOffset: then.offset - now.offset,
	}
	if baseline > 0 {
		in.Baseline, in.BaselineMissing = map[string]*llmdiagv1.NodeMetrics{}, map[string]string{}
	}
	rows, err := s.compareRows(s.budgeted(ctx), ids, now, then, baseline > 0)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		r := rows[i]
		in.Nodes = append(in.Nodes, r.now)
		in.Labels[id] = r.labels
		switch {
		case baseline == 0:
		case r.then != nil:
			in.Baseline[id] = r.then
		default:
			in.BaselineMissing[id] = r.missing
		}
	}
	resp := compare.Compare(in)
	resp.Window = now.window
	if msg.GetOffset() != nil {
		resp.Offset = durationpb.New(now.offset)
	}
	if baseline > 0 {
		resp.BaselineOffset = durationpb.New(then.offset - now.offset)
	}
	resp.Degraded = s.degraded()
	return connect.NewResponse(resp), nil
}

// MaxBaselineOffset bounds how far before the compared window a baseline
// may lie.
const MaxBaselineOffset = 7 * 24 * time.Hour

// compareRow is what a comparison reads of one node: its metrics now, and
// then (the baseline) or why not.
type compareRow struct {
	now, then *llmdiagv1.NodeMetrics
	labels    map[string]string
	missing   string
}

// compareWorkers bounds the nodes a comparison reads at once: each read is
// a query-cache lookup (a round trip with Redis); the source's reads behind
// them are fleet-wide, one per span.
const compareWorkers = 8

// compareRows reads ids over now and, with baseline, then. A source that
// cannot reach back to then for a node (a scrape ring shorter than the
// offset, no history at all) leaves a note on the row, not a failed
// comparison; a request over its query budget fails.
func (s *Service) compareRows(ctx context.Context, ids []string, now, then span, baseline bool) ([]compareRow, error) {
	rows := make([]compareRow, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(compareWorkers)
	for i, id := range ids {
		g.Go(func() error {
			m, rec, err := s.metricsAt(gctx, id, now)
			if err != nil {
				return err
			}
			rows[i] = compareRow{now: m, labels: rec.Node.GetLabels()}
			if !baseline {
				return nil
			}
			b, _, err := s.metricsAt(gctx, id, then)
			switch {
			case err == nil && b.GetWindow() != m.GetWindow():
				// Too few samples then for the window: the source fell
				// back to lifetime counts, which are no baseline for it.
				rows[i].missing = fmt.Sprintf("the source has a %s window then, not %s", b.GetWindow(), m.GetWindow())
			case err == nil:
				rows[i].then = b
			case gctx.Err() != nil:
				return storeErr(gctx.Err())
			case connect.CodeOf(err) == connect.CodeResourceExhausted:
				return err
			default:
				rows[i].missing = connectMessage(err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return rows, nil
}

// uniqueIDs is ids without repeats, in order.
func uniqueIDs(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// baselineStep is baseline rounded to now's step, at least one step.
func (s *Service) baselineStep(now span, baseline time.Duration) time.Duration {
	if now.step == 0 {
		return baseline
	}
	return max(roundTo(baseline, now.step), now.step)
}
