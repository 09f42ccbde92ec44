package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/compare"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fanout"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/report"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store"
)

// Config configures the service.
type Config struct {
	// DefaultWindow is the refresh's window; requests naming it (or none)
	// are answered from the store.
	DefaultWindow string
	// StaleAfter marks data stale (and verdicts UNKNOWN) when older.
	StaleAfter time.Duration
	Thresholds diagnose.Thresholds
	// MaxCompareSubjects bounds the nodes one comparison reads, and the nodes
	// one stream may select (default 1000).
	MaxCompareSubjects int
	// MinHeartbeat is the shortest heartbeat_interval a stream may ask for
	// (default DefaultMinHeartbeat).
	MinHeartbeat time.Duration
	// OffsetStep, when positive, is the finest step offsets are rounded to
	// before they key the query cache and the source's reads (see
	// onDemandStep): for a source whose reads cost queries. Zero reads
	// offsets as asked.
	OffsetStep time.Duration
	// RequestQueryBudget bounds the queries to the source's backend
	// (Prometheus) one request may cause; a request that would go past it
	// is refused with ResourceExhausted (default DefaultRequestQueryBudget).
	RequestQueryBudget int
}

// DefaultRequestQueryBudget is Config.RequestQueryBudget's default: room
// for the two fleet-wide reads a comparison with a baseline needs, each
// charged at its most (every engine's queries: 114 with the built-in
// table), twice over.
const DefaultRequestQueryBudget = 500

// budgetFlag names the flag that sets Config.RequestQueryBudget, for the
// errors that refuse a request over it.
const budgetFlag = "llmdiag serve --max-request-queries"

// Service implements DiagnosisService.
type Service struct {
	st  store.Store
	win source.Source
	log *slog.Logger
	now func() time.Time
	cfg Config
	// defaultWindow is cfg.DefaultWindow's canonical spelling.
	defaultWindow string
	// done is canceled on shutdown (the done channel NewService was given
	// closes) so streams end and clients reconnect.
	done context.Context
	// hub fans the health feed out to streams; started by the first one.
	hubOnce sync.Once
	hub     *fanout.Hub
}

var _ llmdiagv1connect.DiagnosisServiceHandler = (*Service)(nil)

// NewService returns the service. win may be nil when only the default
// window is available. done, when closed, ends open streams.
func NewService(st store.Store, win source.Source, log *slog.Logger, now func() time.Time, cfg Config, done <-chan struct{}) *Service {
	if cfg.DefaultWindow == "" {
		cfg.DefaultWindow = "5m"
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 30 * time.Second
	}
	if cfg.MaxCompareSubjects <= 0 {
		cfg.MaxCompareSubjects = 1000
	}
	if cfg.RequestQueryBudget <= 0 {
		cfg.RequestQueryBudget = DefaultRequestQueryBudget
	}
	if cfg.MinHeartbeat <= 0 {
		cfg.MinHeartbeat = DefaultMinHeartbeat
	}
	defaultWindow, err := metrics.CanonicalWindow(cfg.DefaultWindow)
	if err != nil {
		defaultWindow = cfg.DefaultWindow // the caller checked it; requests name it as given
	}
	// One context for the whole service: a stream ties itself to it with
	// context.AfterFunc, which costs no goroutine per stream.
	doneCtx := context.Background()
	if done != nil {
		ctx, cancel := context.WithCancel(doneCtx)
		go func() {
			<-done
			cancel()
		}()
		doneCtx = ctx
	}
	return &Service{st: st, win: win, log: log, now: now, cfg: cfg, defaultWindow: defaultWindow, done: doneCtx}
}

// ListNodes implements DiagnosisServiceHandler: one page of the nodes
// that pass the filters, sorted by id (see pages.go for paging).
func (s *Service) ListNodes(ctx context.Context, req *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	msg := req.Msg
	if _, ok := llmdiagv1.Engine_name[int32(msg.GetEngine())]; !ok {
		return nil, invalid("engine", fmt.Errorf("unknown value %d", msg.GetEngine()))
	}
	if _, ok := llmdiagv1.Status_name[int32(msg.GetStatus())]; !ok {
		return nil, invalid("status", fmt.Errorf("unknown value %d", msg.GetStatus()))
	}
	size, err := pageSize(msg.GetPageSize())
	if err != nil {
		return nil, err
	}
	after, err := decodePageToken(msg)
	if err != nil {
		return nil, err
	}
	recs, err := s.st.List(ctx)
	if err != nil {
		return nil, storeErr(err)
	}
	out := &llmdiagv1.ListNodesResponse{}
	now := s.now()
	for _, r := range recs {
		n := r.Node
		if after != "" && n.GetId() <= after {
			continue
		}
		if m := msg.GetModel(); m != "" && n.GetModel() != m {
			continue
		}
		if e := msg.GetEngine(); e != llmdiagv1.Engine_ENGINE_UNSPECIFIED && n.GetEngine() != e {
			continue
		}
		s.markStale(r, now)
		if st := msg.GetStatus(); st != llmdiagv1.Status_STATUS_UNSPECIFIED && n.GetStatus() != st {
			continue
		}
		if len(out.Nodes) == size {
			out.NextPageToken = encodePageToken(msg, out.Nodes[size-1].GetId())
			break
		}
		out.Nodes = append(out.Nodes, n)
	}
	out.Degraded = s.degraded()
	return connect.NewResponse(out), nil
}

// GetNodeMetrics implements DiagnosisServiceHandler.
func (s *Service) GetNodeMetrics(ctx context.Context, req *connect.Request[llmdiagv1.GetNodeMetricsRequest]) (*connect.Response[llmdiagv1.GetNodeMetricsResponse], error) {
	ctx = s.budgeted(ctx)
	m, _, err := s.metricsFor(ctx, req.Msg.GetNode(), req.Msg.GetWindow(), req.Msg.GetOffset())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&llmdiagv1.GetNodeMetricsResponse{Metrics: m, Degraded: s.degraded()}), nil
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
	ctx = s.budgeted(ctx)
	m, rec, err := s.metricsFor(ctx, req.Msg.GetNode(), req.Msg.GetWindow(), nil)
	if err != nil {
		return nil, err
	}
	var d *llmdiagv1.Diagnosis
	if rec.Diagnosis != nil && lang == llmdiagv1.Language_LANGUAGE_EN && !m.GetStale() && m.GetWindow() == rec.Metrics.GetWindow() {
		// The verdict made at refresh time: a store lookup.
		d = rec.Diagnosis
		d.Staleness = m.GetStaleness()
	} else {
		d = s.rediagnose(ctx, rec, m, lang, s.now())
	}
	return connect.NewResponse(&llmdiagv1.DiagnoseNodeResponse{
		Diagnosis: d,
		Report:    report.Render(d, format, lang),
		Degraded:  s.degraded(),
	}), nil
}

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
		recs, err := s.st.List(ctx)
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

// connectMessage is err's message without the code prefix a connect.Error
// adds.
func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// MaxOffset bounds how far back a request may look.
const MaxOffset = 30 * 24 * time.Hour

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
	w, err := metrics.CanonicalWindow(windowOr(window, s.cfg.DefaultWindow))
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

// baselineStep is baseline rounded to now's step, at least one step.
func (s *Service) baselineStep(now span, baseline time.Duration) time.Duration {
	if now.step == 0 {
		return baseline
	}
	return max(roundTo(baseline, now.step), now.step)
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

// budgeted is ctx with the request's query budget (Config.RequestQueryBudget).
func (s *Service) budgeted(ctx context.Context) context.Context {
	return source.WithBudget(ctx, source.NewBudget(s.cfg.RequestQueryBudget))
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
	rec, err := s.st.Get(ctx, node)
	if err != nil {
		return nil, nil, storeErr(err)
	}
	m := rec.Metrics
	if sp.window != s.defaultWindow || sp.offset != 0 {
		if s.win == nil {
			return nil, nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("window %q: only the default window %q is available", sp.window, s.cfg.DefaultWindow))
		}
		key := fmt.Sprintf("window\x00%s\x00%s\x00%d", node, sp.window, sp.offset)
		raw, err := s.st.Cached(ctx, key, source.Reuse(sp.dur), func(ctx context.Context) ([]byte, error) {
			m, err := s.win.Window(ctx, node, sp.window, sp.offset)
			if err != nil {
				return nil, err
			}
			return proto.Marshal(m)
		})
		if err != nil {
			return nil, nil, windowErr(sp, node, err)
		}
		m = &llmdiagv1.NodeMetrics{}
		if err := proto.Unmarshal(raw, m); err != nil {
			return nil, nil, connect.NewError(connect.CodeInternal, fmt.Errorf("cached window %q of %q: %w", sp.window, node, err))
		}
	}
	// Staleness is measured against the time asked about: data from an hour
	// ago is fresh for "one hour ago".
	return refresh.Restale(m, s.now().Add(-sp.offset), s.cfg.StaleAfter), rec, nil
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
// profile and peers.
func (s *Service) rediagnose(ctx context.Context, rec *store.Record, m *llmdiagv1.NodeMetrics, lang llmdiagv1.Language, now time.Time) *llmdiagv1.Diagnosis {
	m = refresh.Restale(m, now, s.cfg.StaleAfter)
	hist, err := s.st.History(ctx, rec.Node.GetId())
	if err != nil {
		s.log.Warn("history unavailable", "node", rec.Node.GetId(), "err", err)
	}
	var peers []*llmdiagv1.NodeMetrics
	if recs, err := s.st.List(ctx); err == nil {
		for _, r := range recs {
			if r.Node.GetId() != rec.Node.GetId() && r.Node.GetModel() == rec.Node.GetModel() {
				peers = append(peers, refresh.Restale(r.Metrics, now, s.cfg.StaleAfter))
			}
		}
	}
	return diagnose.Diagnose(diagnose.Input{Metrics: m, History: hist, Profile: rec.Node.GetProfile(), Peers: peers}, s.cfg.Thresholds, lang)
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

// degrader is a store that answers from its own copy when the shared store
// it mirrors is unreachable (store/replica).
type degrader interface {
	Degraded() (reason string, age time.Duration, degraded bool)
}

// degraded says, for an answer, whether it comes from this replica's copy.
func (s *Service) degraded() *llmdiagv1.Degraded {
	d, ok := s.st.(degrader)
	if !ok {
		return nil
	}
	reason, age, yes := d.Degraded()
	if !yes {
		return nil
	}
	return &llmdiagv1.Degraded{Reason: reason, CopyAge: durationpb.New(age)}
}

// Bounds on a stream's label selector.
const (
	maxStreamLabels   = 64
	maxLabelKeyBytes  = 128
	maxLabelValueByte = 1024
)

// DefaultMinHeartbeat is Config.MinHeartbeat's default: a heartbeat costs
// every stream a write, so a caller may not ask for them faster.
const DefaultMinHeartbeat = 5 * time.Second

// maxStreamNodeBytes bounds the bytes of node ids one stream selects, all
// ids together: a stream holds its selection as long as it is open, and
// made-up ids cost the same as real ones (a node may join after the stream
// starts, so ids are not checked against the fleet). 1,000 ids of the
// longest kind (128 bytes) made a stream cost 250-400 KB; at this bound a
// selection costs at most about 16 KiB of ids, and up to 1,000 ids of 16
// bytes on average still fit.
const maxStreamNodeBytes = 16 << 10

// StreamHealth implements DiagnosisServiceHandler. Streams share one reader
// of the health feed (package fanout): each gets the current state of every
// selected node, SYNCED, then the latest state of each node that changes,
// coalesced per node when the subscriber reads slower than the feed moves.
//
// INITIAL events carry no resume token (a stream broken before SYNCED starts
// over); SYNCED, CHANGE and HEARTBEAT carry one that resumes with no gap and
// no repeated state (see package fanout for the rule under coalescing).
func (s *Service) StreamHealth(ctx context.Context, req *connect.Request[llmdiagv1.StreamHealthRequest], stream *connect.ServerStream[llmdiagv1.StreamHealthResponse]) error {
	opts, err := s.streamOptions(req.Msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.done, cancel)()
	h := &healthStream{s: s, ctx: ctx, stream: stream}
	sub, err := h.subscribe(req.Msg.GetResumeToken(), opts)
	if err != nil {
		return h.end(err)
	}
	defer sub.Close()
	return h.end(h.pump(sub))
}

// streamOptions validates a StreamHealthRequest into the subscription it
// asks for.
func (s *Service) streamOptions(msg *llmdiagv1.StreamHealthRequest) (fanout.SubOptions, error) {
	hb := 15 * time.Second
	if d := msg.GetHeartbeatInterval(); d != nil {
		hb = d.AsDuration()
		if hb < s.cfg.MinHeartbeat || hb > 5*time.Minute {
			return fanout.SubOptions{}, invalid("heartbeat_interval", fmt.Errorf("%v is outside [%v, 5m]", hb, s.cfg.MinHeartbeat))
		}
	}
	minScore := msg.GetMinScoreChange()
	if !(minScore >= 0 && minScore <= 1) { // NaN too
		return fanout.SubOptions{}, invalid("min_score_change", fmt.Errorf("%v is outside [0, 1]", minScore))
	}
	if n := len(msg.GetNodes()); n > s.cfg.MaxCompareSubjects {
		return fanout.SubOptions{}, invalid("nodes", fmt.Errorf("%d nodes; at most %d", n, s.cfg.MaxCompareSubjects))
	}
	size := 0
	for _, id := range msg.GetNodes() {
		size += len(id)
	}
	if size > maxStreamNodeBytes {
		return fanout.SubOptions{}, invalid("nodes", fmt.Errorf("%d bytes of node ids; at most %d in all (select by model or labels instead)", size, maxStreamNodeBytes))
	}
	sel := map[string]bool{}
	for i, id := range msg.GetNodes() {
		if !fleet.ValidID(id) {
			return fanout.SubOptions{}, invalid(fmt.Sprintf("nodes[%d]", i), fmt.Errorf("%.40q is not a valid node id", id))
		}
		sel[id] = true
	}
	labels := msg.GetLabels()
	if len(labels) > maxStreamLabels {
		return fanout.SubOptions{}, invalid("labels", fmt.Errorf("%d labels; at most %d", len(labels), maxStreamLabels))
	}
	for k, v := range labels {
		if k == "" || len(k) > maxLabelKeyBytes {
			return fanout.SubOptions{}, invalid("labels", fmt.Errorf("key %.40q must be 1-%d bytes", k, maxLabelKeyBytes))
		}
		if len(v) > maxLabelValueByte {
			return fanout.SubOptions{}, invalid(fmt.Sprintf("labels[%q]", k), fmt.Errorf("value of %d bytes; at most %d", len(v), maxLabelValueByte))
		}
	}
	opts := fanout.SubOptions{
		Match:          selector(sel, msg.GetModel(), labels),
		MinScoreChange: minScore,
		Heartbeat:      hb,
	}
	return opts, nil
}

// healthStream is one StreamHealth call.
type healthStream struct {
	s      *Service
	ctx    context.Context
	stream *connect.ServerStream[llmdiagv1.StreamHealthResponse]
}

func (h *healthStream) send(kind llmdiagv1.EventKind, health *llmdiagv1.NodeHealth, token string) error {
	return h.stream.Send(&llmdiagv1.StreamHealthResponse{Kind: kind, Health: health, SentAt: timestamppb.New(h.s.now()), ResumeToken: token})
}

// end maps how the stream ended to what the handler returns.
func (h *healthStream) end(err error) error {
	if err == nil || errors.Is(err, fanout.ErrClosed) {
		return nil
	}
	return streamErr(h.ctx, err)
}

// subscribe starts the subscription: from the current state when token is
// empty or expired, else right after token.
func (h *healthStream) subscribe(token string, opts fanout.SubOptions) (*fanout.Sub, error) {
	s, ctx, hb := h.s, h.ctx, opts.Heartbeat
	hub := s.streamHub()
	lastBeat := s.now()
	for {
		if token == "" {
			return s.syncStream(ctx, hub, opts, h.send)
		}
		sub, err := hub.Resume(ctx, token, opts)
		switch {
		case err == nil:
			return sub, nil
		case errors.Is(err, store.ErrTokenExpired):
			s.log.Debug("stream resync", "err", err)
			token = ""
		default:
			if ctx.Err() != nil || errors.Is(err, fanout.ErrClosed) {
				return nil, err
			}
			// The feed is unreachable (Redis down) and the hub no longer
			// holds the token: keep the stream, tell the subscriber it is
			// alive, and read on from the same token once the feed answers,
			// so no event is missed.
			s.log.Debug("stream: feed unreachable, retrying", "err", err)
			if s.now().Sub(lastBeat) >= hb {
				if err := h.send(llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT, nil, token); err != nil {
					return nil, err
				}
				lastBeat = s.now()
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(min(hb, time.Second)):
			}
		}
	}
}

// pump sends what the subscription yields until the stream ends.
func (h *healthStream) pump(sub *fanout.Sub) error {
	for {
		m, err := sub.Next(h.ctx)
		if err != nil {
			return err
		}
		kind := llmdiagv1.EventKind_EVENT_KIND_CHANGE
		if m.Kind == fanout.Heartbeat {
			kind = llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT
		}
		if err := h.send(kind, m.Health, m.Token); err != nil {
			return err
		}
	}
}

// selector matches the nodes a stream selects: all of the listed ids (or
// any when none), the model (any when empty), and every label.
func selector(nodes map[string]bool, model string, labels map[string]string) func(*llmdiagv1.NodeHealth) bool {
	return func(h *llmdiagv1.NodeHealth) bool {
		if len(nodes) > 0 && !nodes[h.GetNode()] {
			return false
		}
		if model != "" && h.GetModel() != model {
			return false
		}
		for k, v := range labels {
			if got, ok := h.GetLabels()[k]; !ok || got != v {
				return false
			}
		}
		return true
	}
}

// syncStream attaches a subscriber at the hub's position and sends the
// current state of every selected node (INITIAL), then SYNCED with the
// position's token. The state is the store's listing, or what the hub read
// from the feed when that is newer (a replica's copy may lag the feed), so
// nothing between the state and the position is lost; events after the
// position follow as changes, less those the initial state already showed.
func (s *Service) syncStream(ctx context.Context, hub *fanout.Hub, opts fanout.SubOptions, send func(llmdiagv1.EventKind, *llmdiagv1.NodeHealth, string) error) (*fanout.Sub, error) {
	sub, pos, seen, err := hub.Sync(ctx, opts)
	if err != nil {
		return nil, err
	}
	recs, err := s.st.List(ctx)
	if err != nil {
		sub.Close()
		return nil, err
	}
	fromFeed := make(map[string]*llmdiagv1.NodeHealth, len(seen))
	for _, h := range seen {
		fromFeed[h.GetNode()] = h
	}
	now := s.now()
	initial := func(h *llmdiagv1.NodeHealth) error {
		sub.MarkSent(h)
		return send(llmdiagv1.EventKind_EVENT_KIND_INITIAL, h, "")
	}
	for _, r := range recs {
		s.markStale(r, now)
		h := refresh.Health(r.Node, r.Metrics.GetObservedAt())
		if f, ok := fromFeed[h.GetNode()]; ok {
			delete(fromFeed, h.GetNode())
			if f.GetObservedAt().AsTime().After(h.GetObservedAt().AsTime()) {
				h = s.restale(f, now)
			}
		}
		if !opts.Match(h) {
			continue
		}
		if err := initial(h); err != nil {
			sub.Close()
			return nil, err
		}
	}
	// Nodes the feed announced that the listing does not have yet (a new
	// node on a replica whose copy lags), while their data is fresh.
	rest := slices.SortedFunc(maps.Values(fromFeed), func(a, b *llmdiagv1.NodeHealth) int { return strings.Compare(a.GetNode(), b.GetNode()) })
	for _, f := range rest {
		if _, stale := metrics.Staleness(f.GetObservedAt().AsTime(), now, s.cfg.StaleAfter); stale {
			continue
		}
		if err := initial(s.restale(f, now)); err != nil {
			sub.Close()
			return nil, err
		}
	}
	if err := send(llmdiagv1.EventKind_EVENT_KIND_SYNCED, nil, pos); err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// restale is h (from the feed, not to be modified) with its staleness
// measured at now, UNKNOWN and unroutable when too old, as markStale does.
func (s *Service) restale(h *llmdiagv1.NodeHealth, now time.Time) *llmdiagv1.NodeHealth {
	h = proto.CloneOf(h)
	age, stale := metrics.Staleness(h.GetObservedAt().AsTime(), now, s.cfg.StaleAfter)
	h.Staleness = durationpb.New(age)
	if stale {
		h.Status, h.RootCause, h.Routable = llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, false
	}
	return h
}

// currentHealth is the health of every node in the store, for the hub to
// resynchronise subscribers with.
func (s *Service) currentHealth(ctx context.Context) ([]*llmdiagv1.NodeHealth, error) {
	recs, err := s.st.List(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]*llmdiagv1.NodeHealth, 0, len(recs))
	for _, r := range recs {
		s.markStale(r, now)
		out = append(out, refresh.Health(r.Node, r.Metrics.GetObservedAt()))
	}
	return out, nil
}

// streamHub returns the hub all streams share, started with the first
// stream and stopped when the service's done channel closes, which ends
// every stream at once.
func (s *Service) streamHub() *fanout.Hub {
	s.hubOnce.Do(func() {
		s.hub = fanout.New(s.st, fanout.Options{Log: s.log, Current: s.currentHealth})
		go s.hub.Run(s.done)
	})
	return s.hub
}

// streamErr maps the end of a stream to a connect error: shutdown and client
// cancellation end it cleanly.
func streamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return storeErr(err)
}

func windowOr(w, def string) string {
	if w == "" {
		return def
	}
	return w
}

func invalid(field string, err error) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %w", field, err))
}

func storeErr(err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, store.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}
