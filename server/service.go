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
}

// Service implements DiagnosisService.
type Service struct {
	st  store.Store
	win source.Source
	log *slog.Logger
	now func() time.Time
	cfg Config
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
	return &Service{st: st, win: win, log: log, now: now, cfg: cfg, done: doneCtx}
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
	if off := msg.GetOffset(); off != nil {
		if err := off.CheckValid(); err != nil {
			return nil, invalid("offset", err)
		}
		if d := off.AsDuration(); d < 0 || d > MaxOffset {
			return nil, invalid("offset", fmt.Errorf("%v is outside [0, %v]", d, MaxOffset))
		}
		if d := off.AsDuration() + baseline; d > MaxOffset {
			return nil, invalid("baseline_offset", fmt.Errorf("offset + baseline_offset = %v is beyond %v", d, MaxOffset))
		}
	}
	if len(msg.GetNodes()) > s.cfg.MaxCompareSubjects {
		return nil, invalid("nodes", fmt.Errorf("at most %d", s.cfg.MaxCompareSubjects))
	}
	if _, _, err := metrics.ParseWindow(windowOr(msg.GetWindow(), s.cfg.DefaultWindow)); err != nil {
		return nil, invalid("window", err)
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
	in := compare.Input{
		Metric:         msg.GetMetric(),
		Quantiles:      qs,
		GroupBy:        group,
		Label:          msg.GetLabel(),
		Labels:         map[string]map[string]string{},
		BaselineOffset: baseline,
	}
	if baseline > 0 {
		in.Baseline, in.BaselineMissing = map[string]*llmdiagv1.NodeMetrics{}, map[string]string{}
	}
	seen := map[string]bool{}
	for i, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		m, rec, err := s.metricsFor(ctx, id, msg.GetWindow(), msg.GetOffset())
		if err != nil {
			if connect.CodeOf(err) == connect.CodeInvalidArgument {
				return nil, invalid(fmt.Sprintf("nodes[%d]", i), err)
			}
			return nil, err
		}
		in.Nodes = append(in.Nodes, m)
		in.Labels[id] = rec.Node.GetLabels()
		if baseline > 0 {
			// The same node, the window ending baseline earlier. A source
			// that cannot reach that far back (a scrape ring shorter than
			// the offset, no history at all) leaves a note on the row, not
			// a failed comparison.
			b, _, err := s.metricsFor(ctx, id, msg.GetWindow(), durationpb.New(msg.GetOffset().AsDuration()+baseline))
			switch {
			case err == nil && b.GetWindow() != m.GetWindow():
				// Too few samples then for the window: the source fell
				// back to lifetime counts, which are no baseline for it.
				in.BaselineMissing[id] = fmt.Sprintf("the source has a %s window then, not %s", b.GetWindow(), m.GetWindow())
			case err == nil:
				in.Baseline[id] = b
			case ctx.Err() != nil:
				return nil, storeErr(ctx.Err())
			default:
				in.BaselineMissing[id] = connectMessage(err)
			}
		}
	}
	resp := compare.Compare(in)
	resp.Window = windowOr(msg.GetWindow(), s.cfg.DefaultWindow)
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

// metricsFor validates a node id, window and offset and returns the node's
// metrics over the window (staleness measured now) with its stored record.
// The default window is a store lookup; any other window or an offset is
// computed by the source.Source through the store's query cache, so a burst of
// identical requests costs one computation (one Prometheus query set).
func (s *Service) metricsFor(ctx context.Context, node, window string, offsetpb *durationpb.Duration) (*llmdiagv1.NodeMetrics, *store.Record, error) {
	if node == "" {
		return nil, nil, invalid("node", errors.New("required"))
	}
	if !fleet.ValidID(node) {
		return nil, nil, invalid("node", fmt.Errorf("%q is not a valid node id", node))
	}
	window = windowOr(window, s.cfg.DefaultWindow)
	dur, _, err := metrics.ParseWindow(window)
	if err != nil {
		return nil, nil, invalid("window", err)
	}
	var offset time.Duration
	if offsetpb != nil {
		if err := offsetpb.CheckValid(); err != nil {
			return nil, nil, invalid("offset", err)
		}
		if offset = offsetpb.AsDuration(); offset < 0 || offset > MaxOffset {
			return nil, nil, invalid("offset", fmt.Errorf("%v is outside [0, %v]", offset, MaxOffset))
		}
	}
	rec, err := s.st.Get(ctx, node)
	if err != nil {
		return nil, nil, storeErr(err)
	}
	m := rec.Metrics
	if window != s.cfg.DefaultWindow || offset != 0 {
		if s.win == nil {
			return nil, nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("window %q: only the default window %q is available", window, s.cfg.DefaultWindow))
		}
		key := fmt.Sprintf("window\x00%s\x00%s\x00%d", node, window, offset)
		raw, err := s.st.Cached(ctx, key, cacheTTL(dur, offset), func(ctx context.Context) ([]byte, error) {
			m, err := s.win.Window(ctx, node, window, offset)
			if err != nil {
				return nil, err
			}
			return proto.Marshal(m)
		})
		if err != nil {
			return nil, nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("window %q of %q: %w", window, node, err))
		}
		m = &llmdiagv1.NodeMetrics{}
		if err := proto.Unmarshal(raw, m); err != nil {
			return nil, nil, connect.NewError(connect.CodeInternal, fmt.Errorf("cached window %q of %q: %w", window, node, err))
		}
	}
	// Staleness is measured against the time asked about: data from an hour
	// ago is fresh for "one hour ago".
	return refresh.Restale(m, s.now().Add(-offset), s.cfg.StaleAfter), rec, nil
}

// cacheTTL ties how long an on-demand window is reused to the window: a
// twentieth of it, between 1 s and 15 s (a lifetime window counts as 5 m).
// A window in the past changes no more, so it is kept a minute.
func cacheTTL(window, offset time.Duration) time.Duration {
	if offset > 0 {
		return time.Minute
	}
	if window == 0 {
		window = 5 * time.Minute
	}
	return min(max(window/20, time.Second), 15*time.Second)
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
		if hb < time.Second || hb > 5*time.Minute {
			return fanout.SubOptions{}, invalid("heartbeat_interval", fmt.Errorf("%v is outside [1s, 5m]", hb))
		}
	}
	minScore := msg.GetMinScoreChange()
	if !(minScore >= 0 && minScore <= 1) { // NaN too
		return fanout.SubOptions{}, invalid("min_score_change", fmt.Errorf("%v is outside [0, 1]", minScore))
	}
	if n := len(msg.GetNodes()); n > s.cfg.MaxCompareSubjects {
		return fanout.SubOptions{}, invalid("nodes", fmt.Errorf("%d nodes; at most %d", n, s.cfg.MaxCompareSubjects))
	}
	sel := map[string]bool{}
	for i, id := range msg.GetNodes() {
		if !fleet.ValidID(id) {
			return fanout.SubOptions{}, invalid(fmt.Sprintf("nodes[%d]", i), fmt.Errorf("%q is not a valid node id", id))
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
