package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/store"
)

// GET /routable/{node}: one node's routability as an HTTP status, for the
// health checkers of proxies and load balancers (Envoy, nginx, Caddy, cloud
// load balancers), which read a status code and nothing else.

// RoutablePattern is the ServeMux pattern of the routability check: GET
// (and so HEAD) of /routable/ and the node id, which may hold slashes.
const RoutablePattern = "GET /routable/{node...}"

// StaleHeader is set to "true" on an answer made from stale or unknown data
// (or none, when the store could not be read), whichever status the
// fail-open switch gave it.
const StaleHeader = "X-Llmdiag-Stale"

// RoutableFallback says how routability is answered when the data cannot
// say (GET /routable/{node} and GetRoutability alike).
type RoutableFallback struct {
	// FailOpen answers routable when the node's data is stale or unknown,
	// or the store cannot say; false answers not routable. serve's
	// --routable-fail-open, true by default: an outage of llmdiag's inputs
	// then costs routing quality, never traffic, as the Go client's
	// FailOpen.
	FailOpen bool
	// Ready, when not nil, is closed once the service holds verdicts (the
	// first refresh): before, a node the store does not know is unknown
	// data rather than an unknown node.
	Ready <-chan struct{}
}

// RoutableOptions configures RoutableHandler.
type RoutableOptions struct {
	RoutableFallback
	// Registerer, when not nil, gets llmdiag_routable_answers_total{code}.
	Registerer prometheus.Registerer
}

// routableAnswer is the JSON body of an answer (Accept: application/json).
type routableAnswer struct {
	Node       string     `json:"node"`
	Routable   bool       `json:"routable"`
	LoadScore  *float64   `json:"load_score,omitempty"`
	Status     string     `json:"status,omitempty"`
	Cause      string     `json:"cause,omitempty"`
	ObservedAt *time.Time `json:"observed_at,omitempty"`
	// Stale is true when the answer follows the fail-open switch.
	Stale bool   `json:"stale,omitempty"`
	Error string `json:"error,omitempty"`
}

type routableHandler struct {
	s       *Service
	o       RoutableOptions
	answers *prometheus.CounterVec
}

// RoutableHandler answers RoutablePattern from the store's latest record of
// the node (a lookup, no diagnosis), with Cache-Control: no-store:
//
//   - 200 "routable 0.31" (its load score) when the node is routable;
//   - 503 "not routable: STATUS_CRIT CAUSE_STALLED" when it is not;
//   - stale data (older than Config.StaleAfter, the rule every answer of
//     the service follows), a verdict of UNKNOWN, a store that cannot be
//     read, or a node unknown before the first refresh: 200 "routable
//     (stale)" with FailOpen, else 503, either with StaleHeader;
//   - 404 for a node the store does not know, 400 for an invalid node id.
//
// With Accept: application/json the body is JSON (routableAnswer); a HEAD
// answers the same status and headers without a body.
func (s *Service) RoutableHandler(o RoutableOptions) (http.Handler, error) {
	h := &routableHandler{s: s, o: o, answers: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmdiag_routable_answers_total",
		Help: "Answers of GET /routable/{node} (the routability check for proxies' health checkers), by HTTP status code.",
	}, []string{"code"})}
	for _, c := range []int{http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable} {
		h.answers.WithLabelValues(strconv.Itoa(c))
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(h.answers); err != nil {
			return nil, fmt.Errorf("routable metrics: %w", err)
		}
	}
	return h, nil
}

func (h *routableHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	a, err := h.s.routability(r.Context(), node, h.o.RoutableFallback)
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound:
		h.write(w, r, http.StatusNotFound, false, fmt.Sprintf("unknown node %q", node), routableAnswer{Node: node, Error: "unknown node"})
		return
	case err != nil:
		if len(node) > maxLoggedPath {
			node = node[:maxLoggedPath] + "…"
		}
		h.write(w, r, http.StatusBadRequest, false, fmt.Sprintf("invalid node id %q: 1-128 letters, digits and . _ : / -, starting with a letter or digit", node),
			routableAnswer{Node: node, Error: "invalid node id"})
		return
	}
	out := routableAnswer{Node: node, Routable: a.GetRoutable(), LoadScore: a.LoadScore, Stale: a.GetStale()}
	if a.GetStatus() != llmdiagv1.Status_STATUS_UNSPECIFIED {
		out.Status, out.Cause = a.GetStatus().String(), a.GetRootCause().String()
	} else {
		out.Error = a.GetStaleReason() // no verdict to read
	}
	if a.ObservedAt != nil {
		t := a.GetObservedAt().AsTime()
		out.ObservedAt = &t
	}
	code, text := http.StatusOK, ""
	switch {
	case a.GetStale() && a.GetRoutable():
		text = "routable (stale)"
	case a.GetStale() && out.Status != "":
		code, text = http.StatusServiceUnavailable, "not routable (stale): "+out.Status+" "+out.Cause
	case a.GetStale():
		code, text = http.StatusServiceUnavailable, "not routable (stale)"
	case a.GetRoutable():
		text = "routable " + strconv.FormatFloat(a.GetLoadScore(), 'f', 2, 64)
	default:
		code, text = http.StatusServiceUnavailable, "not routable: "+out.Status+" "+out.Cause
	}
	h.write(w, r, code, a.GetStale(), text, out)
}

// GetRoutability implements DiagnosisServiceHandler: the node's
// routability as GET /routable/{node} answers it, with Config.Routable's
// fallback.
func (s *Service) GetRoutability(ctx context.Context, req *connect.Request[llmdiagv1.GetRoutabilityRequest]) (*connect.Response[llmdiagv1.GetRoutabilityResponse], error) {
	a, err := s.routability(ctx, req.Msg.GetNode(), s.cfg.Routable)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(a), nil
}

// routability is node's routability now, from the store's latest record
// of it (a lookup, no diagnosis): an invalid id is InvalidArgument, a node
// the store does not know once fb.Ready is closed NotFound; data that
// cannot say (stale, UNKNOWN, no verdict yet, a store that cannot be read)
// is an answer marked stale, routable per fb.FailOpen.
func (s *Service) routability(ctx context.Context, node string, fb RoutableFallback) (*llmdiagv1.GetRoutabilityResponse, error) {
	if !fleet.ValidID(node) {
		return nil, invalid("node", fmt.Errorf("%q is not a valid node id", node))
	}
	a := &llmdiagv1.GetRoutabilityResponse{Node: node}
	unknown := func(reason string) (*llmdiagv1.GetRoutabilityResponse, error) {
		a.Stale, a.StaleReason, a.Routable = true, reason, proto.Bool(fb.FailOpen)
		return a, nil
	}
	rec, err := s.get(ctx, node)
	switch {
	case errors.Is(err, store.ErrNotFound) && ready(fb.Ready):
		return nil, storeErr(err)
	case errors.Is(err, store.ErrNotFound):
		return unknown("no verdicts yet: the first refresh has not completed")
	case err != nil:
		s.log.Warn("routable: store lookup failed", "node", node, "err", err)
		return unknown("store unavailable")
	}
	n := rec.Node
	a.Status, a.RootCause, a.ObservedAt = n.GetStatus(), n.GetRootCause(), rec.Metrics.GetObservedAt()
	if score := n.GetLoadScore(); !math.IsNaN(score) && !math.IsInf(score, 0) {
		a.LoadScore = &score
	}
	decision, stale := store.Decide(rec, s.now(), s.cfg.StaleAfter)
	if decision == store.Unknown {
		if stale {
			// As ListNodes and StreamHealth say of stale data.
			a.Status, a.RootCause = llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA
			return unknown(fmt.Sprintf("data older than %v", s.cfg.StaleAfter))
		}
		return unknown("the verdict is UNKNOWN")
	}
	a.Routable = proto.Bool(decision == store.Routable)
	return a, nil
}

// ready reports whether ch, when not nil, is closed.
func ready(ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// write sends the answer: text, or a as JSON when the caller accepts JSON;
// no body for HEAD.
func (h *routableHandler) write(w http.ResponseWriter, r *http.Request, code int, stale bool, text string, a routableAnswer) {
	h.answers.WithLabelValues(strconv.Itoa(code)).Inc()
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	if stale {
		hd.Set(StaleHeader, "true")
	}
	var body []byte
	if acceptsJSON(r.Header.Values("Accept")) {
		hd.Set("Content-Type", "application/json")
		body, _ = json.Marshal(a) // cannot fail: strings, bools, a float and a time
		body = append(body, '\n')
	} else {
		hd.Set("Content-Type", "text/plain; charset=utf-8")
		body = []byte(text + "\n")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsJSON reports whether an Accept header names application/json.
func acceptsJSON(accept []string) bool {
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
				return true
			}
		}
	}
	return false
}
