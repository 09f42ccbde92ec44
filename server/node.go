package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/readmask"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/report"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
)

// GetNodeMetrics and DiagnoseNode: one node, at the default window from the
// store, or at another window or offset read on demand from the source.

// GetNodeMetrics implements DiagnosisServiceHandler.
func (s *Service) GetNodeMetrics(ctx context.Context, req *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error) {
	node, offsetpb := req.Msg.GetNode(), req.Msg.GetOffset()
	mask, err := s.masks.get("metrics", req.Msg.GetReadMask().GetPaths(), func() (readmask.Mask, error) {
		return answerMask(&llmdiagv1.GetNodeMetricsResponse{}, "metrics", req.Msg.GetReadMask())
	})
	if err != nil {
		return nil, err
	}
	if s.isDefault(node, req.Msg.GetWindow(), offsetpb) {
		p, err := s.answer(ctx, answerKey{node: node, mask: mask.Key()}, func(ctx context.Context) (*prepared, error) {
			return s.prepareMetrics(ctx, node, mask)
		})
		if err != nil {
			return nil, err
		}
		if age, ok := s.fresh(p); ok {
			resp := &llmdiagv1.GetNodeMetricsResponse{Degraded: s.degraded()}
			if mask.Has("metrics.staleness") {
				resp.Metrics = &llmdiagv1.NodeMetrics{Staleness: durationpb.New(age)}
			}
			if offsetpb != nil && mask.Has("metrics.offset") {
				if resp.Metrics == nil {
					resp.Metrics = &llmdiagv1.NodeMetrics{}
				}
				resp.Metrics.Offset = durationpb.New(0)
			}
			if err := withPrepared(resp, p.wire, binaryProto(req.Peer(), req.Header())); err != nil {
				return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("prepared metrics of %q: %w", node, err))
			}
			return connect.NewResponse(resp), nil
		}
	}
	m, _, err := s.metricsFor(s.budgeted(ctx), node, req.Msg.GetWindow(), offsetpb)
	if err != nil {
		return nil, err
	}
	resp := &llmdiagv1.GetNodeMetricsResponse{Metrics: m, Degraded: s.degraded()}
	mask.Prune(resp)
	return connect.NewResponse(resp), nil
}

// DiagnoseNode implements DiagnosisServiceHandler.
func (s *Service) DiagnoseNode(ctx context.Context, req *connect.Request[llmdiagv1.DiagnoseNodeRequest]) (*connect.Response[llmdiagv1.DiagnoseNodeResponse], error) {
	lang := req.Msg.GetLanguage()
	switch lang {
	case llmdiagv1.Language_LANGUAGE_UNSPECIFIED:
		lang = llmdiagv1.Language_LANGUAGE_EN
	case llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH:
	default:
		return nil, invalid("language", fmt.Errorf("unknown value %d", lang))
	}
	format := req.Msg.GetFormat()
	switch format {
	case llmdiagv1.ReportFormat_REPORT_FORMAT_UNSPECIFIED:
		format = llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN
	case llmdiagv1.ReportFormat_REPORT_FORMAT_MARKDOWN, llmdiagv1.ReportFormat_REPORT_FORMAT_TEXT:
	default:
		return nil, invalid("format", fmt.Errorf("unknown value %d", format))
	}
	mask, err := s.masks.get("diagnosis", req.Msg.GetReadMask().GetPaths(), func() (readmask.Mask, error) {
		return answerMask(&llmdiagv1.DiagnoseNodeResponse{}, "diagnosis", req.Msg.GetReadMask(), "report")
	})
	if err != nil {
		return nil, err
	}
	withReport := mask.Has("report")
	if !withReport {
		format = llmdiagv1.ReportFormat_REPORT_FORMAT_UNSPECIFIED // nothing rendered: one answer for every format
	}
	node := req.Msg.GetNode()
	if s.isDefault(node, req.Msg.GetWindow(), nil) {
		p, err := s.answer(ctx, answerKey{node: node, diagnosis: true, lang: lang, format: format, mask: mask.Key()}, func(ctx context.Context) (*prepared, error) {
			return s.prepareDiagnosis(ctx, node, lang, format, mask)
		})
		if err != nil {
			return nil, err
		}
		if age, ok := s.fresh(p); ok {
			resp := &llmdiagv1.DiagnoseNodeResponse{Degraded: s.degraded()}
			if mask.Has("diagnosis.staleness") {
				resp.Diagnosis = &llmdiagv1.Diagnosis{Staleness: durationpb.New(age)}
			}
			if err := withPrepared(resp, p.withReportAt(age), binaryProto(req.Peer(), req.Header())); err != nil {
				return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("prepared diagnosis of %q: %w", node, err))
			}
			return connect.NewResponse(resp), nil
		}
	}
	ctx = s.budgeted(ctx) // what follows may read the source
	m, rec, err := s.metricsFor(ctx, node, req.Msg.GetWindow(), nil)
	if err != nil {
		return nil, err
	}
	var d *llmdiagv1.Diagnosis
	if rec.Diagnosis != nil && lang == llmdiagv1.Language_LANGUAGE_EN && !m.GetStale() && m.GetWindow() == rec.Metrics.GetWindow() {
		// The verdict made at refresh time: a store lookup.
		d = rec.Diagnosis
		d.Staleness = m.GetStaleness()
	} else {
		sp, err := s.spanOf(req.Msg.GetWindow(), 0) // checked by metricsFor
		if err != nil {
			return nil, err
		}
		d = s.rediagnose(ctx, rec, m, lang, s.now(), s.sloWindows(ctx, rec, sp))
	}
	resp := &llmdiagv1.DiagnoseNodeResponse{Diagnosis: d, Degraded: s.degraded()}
	if withReport {
		resp.Report = report.Render(d, format, lang)
	}
	mask.Prune(resp)
	return connect.NewResponse(resp), nil
}

// isDefault reports whether a request asks for the default window ending
// now of a valid node: an answer the service prepares once per store
// generation (answers.go). Anything else, invalid input included, takes
// the general path, which validates it.
func (s *Service) isDefault(node, window string, offset *durationpb.Duration) bool {
	if (window != "" && window != s.defaultWindow) || !fleet.ValidID(node) {
		return false
	}
	return offset == nil || (offset.CheckValid() == nil && offset.AsDuration() == 0)
}

// prepareMetrics prepares GetNodeMetrics' answer from the store's record,
// trimmed to mask, or none when its data is stale.
func (s *Service) prepareMetrics(ctx context.Context, node string, mask readmask.Mask) (*prepared, error) {
	rec, err := s.get(ctx, node)
	if err != nil {
		return nil, storeErr(err)
	}
	m := rec.Metrics
	if metrics.Stale(m, s.cfg.StaleAfter) {
		return nil, nil
	}
	observedAt := m.GetObservedAt().AsTime()
	m.Staleness, m.Offset = nil, nil
	resp := &llmdiagv1.GetNodeMetricsResponse{Metrics: m}
	mask.Prune(resp)
	return s.prepare(resp, observedAt, nil)
}

// prepareDiagnosis prepares DiagnoseNode's answer: the verdict the refresh
// stored when the store holds it in lang, else one made now, trimmed to
// mask, with its report only when mask asks for it; none when the data is
// stale.
func (s *Service) prepareDiagnosis(ctx context.Context, node string, lang llmdiagv1.Language, format llmdiagv1.ReportFormat, mask readmask.Mask) (*prepared, error) {
	now := s.now()
	rec, err := s.get(ctx, node)
	if err != nil {
		return nil, storeErr(err)
	}
	m := refresh.Restale(rec.Metrics, now, s.cfg.StaleAfter)
	if m.GetStale() {
		return nil, nil
	}
	d := rec.Diagnosis
	if d == nil || lang != llmdiagv1.Language_LANGUAGE_EN {
		// The SLO windows may be read from the source when the refresh
		// holds none: within a request's budget, as an answer made afresh.
		dur, _, _ := metrics.ParseWindow(s.defaultWindow)
		slo := s.sloWindows(s.budgeted(ctx), rec, span{window: s.defaultWindow, dur: dur})
		d = s.rediagnose(ctx, rec, m, lang, now, slo)
	}
	d.Staleness = nil
	var tmpl *report.Template
	if mask.Has("report") {
		tmpl = report.Prepare(d, format, lang)
	}
	resp := &llmdiagv1.DiagnoseNodeResponse{Diagnosis: d}
	mask.Prune(resp)
	return s.prepare(resp, m.GetObservedAt().AsTime(), tmpl)
}

// prepare marshals an answer's fixed part.
func (s *Service) prepare(fixed proto.Message, observedAt time.Time, tmpl *report.Template) (*prepared, error) {
	wire, err := proto.Marshal(fixed)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("prepare answer: %w", err))
	}
	return &prepared{observedAt: observedAt, wire: wire, report: tmpl}, nil
}

// fresh returns the age of a prepared answer's data, and whether it is
// still fresh enough to serve from (not past StaleAfter).
func (s *Service) fresh(p *prepared) (time.Duration, bool) {
	if p == nil {
		return 0, false
	}
	age, stale := metrics.Staleness(p.observedAt, s.now(), s.cfg.StaleAfter)
	return age, !stale
}

// MaxOffset bounds how far back a request may look.
const MaxOffset = 30 * 24 * time.Hour

// span is an on-demand read as the service performs it: the window in its
// canonical spelling (metrics.CanonicalWindow: "60m" is "1h") and the
// offset rounded to step. The default window ending now is the store's.
type span struct {
	window string
	dur    time.Duration // 0 for the lifetime
	offset time.Duration
	step   time.Duration // offsets into window are rounded to; 0 not at all
}

// spanOf validates window (empty: the default) and normalises it and
// offset (already validated) into the span read.
func (s *Service) spanOf(window string, offset time.Duration) (span, error) {
	w, err := metrics.CanonicalWindow(windowOr(window, s.defaultWindow))
	if err != nil {
		return span{}, invalid("window", err)
	}
	dur, _, _ := metrics.ParseWindow(w)
	sp := span{window: w, dur: dur, offset: offset}
	if s.cfg.OffsetStep > 0 {
		sp.step = s.onDemandStep(dur)
		sp.offset = roundTo(offset, sp.step)
		if sp.offset > MaxOffset {
			sp.offset -= sp.step
		}
	}
	return sp, nil
}

// roundSteps are the steps a tenth of a window is rounded down to.
var roundSteps = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// onDemandStep is the step offsets into a window of dur are rounded to:
// the larger of Config.OffsetStep and a tenth of the window rounded down to
// one of roundSteps (30s for 5m, 5m for 1h, 12h for 7d). A window then
// moves by at most a twentieth of its length, and requests for offsets a
// few seconds apart share one read of the source and one cache entry.
func (s *Service) onDemandStep(dur time.Duration) time.Duration {
	step := s.cfg.OffsetStep
	for _, r := range roundSteps {
		if r <= dur/10 {
			step = max(step, r)
		}
	}
	return step
}

// roundTo is d rounded to the nearest multiple of step.
func roundTo(d, step time.Duration) time.Duration {
	return (d + step/2) / step * step
}

// offsetOf validates an offset field: absent is 0.
func offsetOf(field string, pb *durationpb.Duration) (time.Duration, error) {
	if pb == nil {
		return 0, nil
	}
	if err := pb.CheckValid(); err != nil {
		return 0, invalid(field, err)
	}
	d := pb.AsDuration()
	if d < 0 || d > MaxOffset {
		return 0, invalid(field, fmt.Errorf("%v is outside [0, %v]", d, MaxOffset))
	}
	return d, nil
}

// metricsFor validates a node id, window and offset and returns the node's
// metrics over the window (staleness measured now) with its stored record.
// The answer's offset is the one read (span).
func (s *Service) metricsFor(ctx context.Context, node, window string, offsetpb *durationpb.Duration) (*llmdiagv1.NodeMetrics, *store.Record, error) {
	if node == "" {
		return nil, nil, invalid("node", errors.New("required"))
	}
	if !fleet.ValidID(node) {
		return nil, nil, invalid("node", fmt.Errorf("%q is not a valid node id", node))
	}
	offset, err := offsetOf("offset", offsetpb)
	if err != nil {
		return nil, nil, err
	}
	sp, err := s.spanOf(window, offset)
	if err != nil {
		return nil, nil, err
	}
	m, rec, err := s.metricsAt(ctx, node, sp)
	if err != nil {
		return nil, nil, err
	}
	if offsetpb != nil {
		m.Offset = durationpb.New(sp.offset)
	}
	return m, rec, nil
}

// metricsAt returns a node's metrics over sp (staleness measured now),
// a copy the caller may change, with its stored record. The default window
// ending now is a store lookup; any other window or an offset is read from
// the source.Source through the store's query cache, so a burst of
// identical requests costs one read; the source's own reads are
// fleet-wide (Prometheus: one query set per window and offset, whatever
// the nodes asked about).
func (s *Service) metricsAt(ctx context.Context, node string, sp span) (*llmdiagv1.NodeMetrics, *store.Record, error) {
	rec, err := s.get(ctx, node)
	if err != nil {
		return nil, nil, storeErr(err)
	}
	m := rec.Metrics
	if sp.window != s.defaultWindow || sp.offset != 0 {
		if s.win == nil {
			return nil, nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("window %q: only the default window %q is available", sp.window, s.defaultWindow))
		}
		if m, err = s.readWindow(ctx, node, sp); err != nil {
			var ce *connect.Error
			if errors.As(err, &ce) {
				return nil, nil, ce
			}
			return nil, nil, windowErr(sp, node, err)
		}
		// When its XIDs occurred is known from the refreshes only.
		engine.StampXIDs(rec.Metrics.GetGpu(), m.GetGpu(), m.GetObservedAt().AsTime())
	}
	// Staleness is measured against the time asked about: data from an hour
	// ago is fresh for "one hour ago".
	m = refresh.Restale(m, s.now().Add(-sp.offset), s.cfg.StaleAfter)
	refresh.CarryRole(m, rec.Metrics)
	return m, rec, nil
}

// readWindow reads node's metrics over sp from the source through the
// store's query cache: a message of the caller's own.
func (s *Service) readWindow(ctx context.Context, node string, sp span) (*llmdiagv1.NodeMetrics, error) {
	key := fmt.Sprintf("window\x00%s\x00%s\x00%d", node, sp.window, sp.offset)
	raw, err := s.st.Cached(ctx, key, source.Reuse(sp.dur), func(ctx context.Context) ([]byte, error) {
		m, err := s.win.Window(ctx, node, sp.window, sp.offset)
		if err != nil {
			return nil, err
		}
		return proto.Marshal(m)
	})
	if err != nil {
		return nil, err
	}
	m := &llmdiagv1.NodeMetrics{}
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("cached window %q of %q: %w", sp.window, node, err))
	}
	return m, nil
}

// windowErr is the answer to a failed on-demand read.
func windowErr(sp span, node string, err error) error {
	err = fmt.Errorf("window %q ending %v ago of %q: %w", sp.window, sp.offset, node, err)
	switch {
	case errors.Is(err, source.ErrOverBudget):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%w (%s sets the budget)", err, budgetFlag))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return storeErr(err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

// rediagnose runs the verdict rules on m with the node's stored history,
// profile and peers, and slo's SLO windows (slo.go).
func (s *Service) rediagnose(ctx context.Context, rec *store.Record, m *llmdiagv1.NodeMetrics, lang llmdiagv1.Language, now time.Time, slo sloInput) *llmdiagv1.Diagnosis {
	m = refresh.Restale(m, now, s.cfg.StaleAfter)
	hist, err := s.history(ctx, rec.Node.GetId())
	if err != nil {
		s.log.Warn("history unavailable", "node", rec.Node.GetId(), "err", err)
	}
	peers, err := s.peersOf(ctx, rec.Node.GetModel(), rec.Node.GetId(), now)
	if err != nil {
		s.log.Warn("peers unavailable", "node", rec.Node.GetId(), "err", err)
	}
	return diagnose.Diagnose(diagnose.Input{Metrics: m, History: hist, Profile: rec.Node.GetProfile(), Peers: peers, Windows: slo.windows, OverBudget: slo.overBudget}, s.cfg.Thresholds, lang)
}

// markStale measures the record's staleness at now; when the data is too old
// the node's health becomes UNKNOWN and unroutable, as a fresh diagnosis of
// stale data would say (the refresh that would have said it has not run).
func (s *Service) markStale(r *store.Record, now time.Time) {
	n := r.Node
	age, stale := metrics.Staleness(r.Metrics.GetObservedAt().AsTime(), now, s.cfg.StaleAfter)
	n.Staleness = durationpb.New(age)
	if stale {
		n.Status, n.RootCause, n.Routable = llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, false
	}
}
