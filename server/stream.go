package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/fanout"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/store"
)

// StreamHealth: the health of the selected nodes, then every change, with
// heartbeats and resume tokens, from the shared health feed (fanout).

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
	// Shutdown ends the stream through the hub, which stops with the
	// service (Next returns ErrClosed), not through a context of its own:
	// a context derived from the call's, tied to the service's, cost every
	// stream about 600 bytes.
	h := &healthStream{s: s, ctx: ctx, stream: stream, flush: heldFlushOf(ctx)}
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
	for i, id := range msg.GetNodes() {
		if !fleet.ValidID(id) {
			return fanout.SubOptions{}, invalid(fmt.Sprintf("nodes[%d]", i), fmt.Errorf("%.40q is not a valid node id", id))
		}
	}
	// Sorted, searched by halves: a map of one id cost a stream about 250
	// bytes, the list costs 16 a node.
	sel := slices.Clone(msg.GetNodes())
	slices.Sort(sel)
	sel = slices.Compact(sel)
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
	// flush holds connect's flush after a message that others follow at
	// once; nil when the handler was not reached through holdFlushes.
	flush *heldFlush
}

// send sends one message. An INITIAL one is always followed by more of the
// sync (another INITIAL, then SYNCED): it is not flushed on its own.
func (h *healthStream) send(kind llmdiagv1.EventKind, health *llmdiagv1.NodeHealth, token string) error {
	return h.sendHolding(kind == llmdiagv1.EventKind_EVENT_KIND_INITIAL, kind, health, token)
}

// sendHolding sends one message, flushed unless hold.
func (h *healthStream) sendHolding(hold bool, kind llmdiagv1.EventKind, health *llmdiagv1.NodeHealth, token string) error {
	h.flush.holdNext(hold)
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
			case <-s.done.Done():
				return nil, fanout.ErrClosed
			case <-time.After(min(hb, time.Second)):
			}
		}
	}
}

// pump sends what the subscription yields until the stream ends. A message
// that another follows at once (a subscriber behind the feed) is not
// flushed on its own, up to maxHeldMessages in a row: the backlog goes out
// in one write, not one write and one HTTP/2 round trip a message.
func (h *healthStream) pump(sub *fanout.Sub) error {
	held := 0
	m, err := sub.Next(h.ctx)
	for {
		if err != nil {
			return err
		}
		following, more := sub.TryNext()
		kind := llmdiagv1.EventKind_EVENT_KIND_CHANGE
		if m.Kind == fanout.Heartbeat {
			kind = llmdiagv1.EventKind_EVENT_KIND_HEARTBEAT
		}
		hold := more && held < maxHeldMessages
		if hold {
			held++
		} else {
			held = 0
		}
		if err := h.sendHolding(hold, kind, m.Health, m.Token); err != nil {
			return err
		}
		if more {
			m = following
			continue
		}
		m, err = sub.Next(h.ctx)
	}
}

// maxHeldMessages bounds the messages of a stream written without a flush
// after each: a subscriber with a standing backlog still gets a flush every
// so many. (net/http writes out what a stream buffers past 4 KiB anyway.)
const maxHeldMessages = 64

// heldFlush is a stream's response writer whose next flush can be held:
// connect flushes after every message it sends. Only the stream's own
// goroutine sends, so hold needs no lock.
type heldFlush struct {
	http.ResponseWriter
	hold bool
}

// holdFlushes gives the handlers of streaming procedures a response
// writer whose flushes the stream can hold (heldFlush), found in the
// request's context.
func holdFlushes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hf := &heldFlush{ResponseWriter: w}
		next.ServeHTTP(hf, r.WithContext(context.WithValue(r.Context(), heldFlushKey{}, hf)))
	})
}

type heldFlushKey struct{}

// heldFlushOf is the stream's heldFlush, nil when there is none.
func heldFlushOf(ctx context.Context) *heldFlush {
	hf, _ := ctx.Value(heldFlushKey{}).(*heldFlush)
	return hf
}

// holdNext says whether the flush after the next message is held.
func (w *heldFlush) holdNext(hold bool) {
	if w != nil {
		w.hold = hold
	}
}

// Flush flushes unless held; a held flush is done by the next one not held
// (or by net/http when the handler returns).
func (w *heldFlush) Flush() {
	if w.hold {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *heldFlush) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// selector matches the nodes a stream selects: all of the listed ids
// (sorted; any node when none), the model (any when empty), and every label.
func selector(nodes []string, model string, labels map[string]string) func(*llmdiagv1.NodeHealth) bool {
	return func(h *llmdiagv1.NodeHealth) bool {
		if len(nodes) > 0 {
			if _, ok := slices.BinarySearch(nodes, h.GetNode()); !ok {
				return false
			}
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
	recs, err := s.list(ctx)
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
	recs, err := s.list(ctx)
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
// cancellation end it cleanly; a context ended with a *connect.Error as
// cause (a revoked credential, see Authorize) ends it with that error.
func streamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		var ce *connect.Error
		if errors.As(context.Cause(ctx), &ce) {
			return ce
		}
		return nil
	}
	return storeErr(err)
}
