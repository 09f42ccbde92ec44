package server

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
)

// SLO windows of diagnoses made on demand.
//
// The SLO burn findings read a node's latency histograms over the burn
// alerts' windows (diagnose.SLOWindows), which the refresh reads beside its
// own window (refresh/slowindows.go) and which the store does not keep. A
// diagnosis the service makes itself (in Chinese, over another window, or
// of stale data) gets them too, so that its SLO findings show the figures
// the stored English verdict shows rather than "not read":
//
//   - ending now, it reuses the windows the refresh read for the verdict it
//     stored beside the record (Config.SLOReads, matched by the record's
//     observed_at), with the record's own metrics for the refresh's window.
//     This costs nothing, and a Chinese answer equals the English one.
//   - when the refresh holds none for that record (no SLOReads; a replica
//     that is not the ingest leader; a record the refresh has not diagnosed
//     since this process started) or the diagnosis ends earlier, each
//     window is read from the source ending then, through the query cache,
//     one after another within the request's query budget
//     (Config.RequestQueryBudget). A window the budget cannot cover is not
//     read, and the finding says so (diagnose.Input.OverBudget); one whose
//     read fails reads "not read". The request itself never fails for them.
//
// Nodes no SLO applies to read nothing.

// SLOReads tells which SLO windows the refresh read for a node's stored
// verdict: refresh.Loop.SLOWindows.
type SLOReads interface {
	// SLOWindows returns the windows the diagnosis of node's metrics
	// observed at observedAt read (shared: not to be changed), or false
	// when it knows of no such diagnosis.
	SLOWindows(node string, observedAt time.Time) ([]*llmdiagv1.NodeMetrics, bool)
}

// sloInput is what a diagnosis made on demand reads for its SLO findings
// (diagnose.Input.Windows and OverBudget).
type sloInput struct {
	windows    []*llmdiagv1.NodeMetrics
	overBudget []time.Duration
}

// sloWindows returns the SLO windows of a diagnosis of rec's node over sp
// (see above); ctx carries the request's budget.
func (s *Service) sloWindows(ctx context.Context, rec *store.Record, sp span) sloInput {
	node := rec.Node.GetId()
	if !diagnose.HasSLO(s.cfg.Thresholds, rec.Node.GetModel()) {
		return sloInput{}
	}
	defaultDur, lifetime, err := metrics.ParseWindow(s.defaultWindow)
	if err != nil || lifetime {
		defaultDur = -1
	}
	// The stored metrics stand for the refresh's own window ending now,
	// which the refresh does not read again.
	var own []*llmdiagv1.NodeMetrics
	if sp.offset == 0 && sp.window != s.defaultWindow && defaultDur > 0 {
		own = []*llmdiagv1.NodeMetrics{rec.Metrics}
	}
	if sp.offset == 0 && s.cfg.SLOReads != nil {
		if w, ok := s.cfg.SLOReads.SLOWindows(node, rec.Metrics.GetObservedAt().AsTime()); ok {
			return sloInput{windows: append(slices.Clip(w), own...)}
		}
	}
	in := sloInput{windows: own}
	if s.win == nil {
		return in
	}
	for _, d := range diagnose.SLOWindows() {
		if d == sp.dur || (sp.offset == 0 && d == defaultDur) {
			continue // the diagnosis's own metrics, or the stored ones
		}
		wsp := span{window: metrics.FormatWindow(d), dur: d, offset: sp.offset}
		m, err := s.readWindow(ctx, node, wsp)
		switch {
		case err == nil:
			in.windows = append(in.windows, m)
		case errors.Is(err, source.ErrOverBudget):
			in.overBudget = append(in.overBudget, d)
		case ctx.Err() != nil:
			return in
		default:
			s.log.Debug("SLO window not read", "node", node, "window", wsp.window, "offset", wsp.offset, "err", err)
		}
	}
	return in
}
