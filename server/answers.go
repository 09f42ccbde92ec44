package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/singleflight"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/report"
)

// Answers prepared once per store generation.
//
// GetNodeMetrics and DiagnoseNode at the default window ending now answer
// from the store's latest records, which change only when the store does
// (a refresh's writes, a replica's sync: the store's generation). So the
// service prepares each such answer once per generation, on first ask:
// the record decoded, the diagnosis made in the language asked for when
// the store holds none in it (with the model's peers, listed once per
// generation), the whole marshalled, and the report rendered with a hole
// for the data's age (report.Template). Later asks copy those bytes and
// add what changes from one call to the next: the staleness, an explicit
// zero offset, the report's age, and Degraded.
//
// Over binary protobuf (gRPC, gRPC-Web, Connect with application/proto)
// the prepared bytes go out as the response's unknown fields after the
// per-call fields: a protobuf parser merges repeated occurrences of a
// message field, so the client reads one message holding both, as if it
// had been marshalled whole. For JSON, and for callers in this process,
// the bytes are decoded into the message first (protojson writes no
// unknown fields).
//
// What an answer says about the data's age beyond its staleness (the
// staleness finding's value) is as of when it was prepared, as the verdict
// the refresh stores is as of the refresh. Data past StaleAfter is never
// served from a prepared answer: it is diagnosed afresh (UNKNOWN, stale).
//
// A request's read_mask is part of what is prepared: the answer is
// trimmed to it before it is marshalled (a diagnosis not asked for its
// report renders none), and the per-call fields are added only when the
// mask names them. Answers are kept per normalized mask (readmask.Mask's
// Key), for at most MaxMaskShapes distinct masks a generation; an answer
// under any further mask is made afresh on each call, as one past
// MaxPreparedBytes is. The masks asked often keep their places: a mask
// whose prepared answers were served again at one generation is admitted
// at the next before any other, and the places left go to the first masks
// asked. No mask and an empty one are the same shape, the whole answer,
// and are not counted.

// generationer is a store that tells when what it holds changed
// (memory.Store, replica.Store); without it every answer is made afresh.
type generationer interface{ Generation() uint64 }

// MaxPreparedBytes bounds the prepared answers kept for one generation;
// past it answers are made afresh for each call until the next generation.
const MaxPreparedBytes = 64 << 20

// MaxMaskShapes bounds the distinct read masks whose answers are prepared
// in one generation.
const MaxMaskShapes = 16

// answerKey names one prepared answer: a node's metrics, or its diagnosis
// in a language and format, trimmed to a read mask (its Key; "" for the
// whole answer).
type answerKey struct {
	node      string
	diagnosis bool
	lang      llmdiagv1.Language
	format    llmdiagv1.ReportFormat
	mask      string
}

func (k answerKey) String() string {
	return k.node + "\x00" + strconv.FormatBool(k.diagnosis) + "\x00" + k.lang.String() + "\x00" + k.format.String() + "\x00" + k.mask
}

// prepared is one answer as made at one generation.
type prepared struct {
	observedAt time.Time
	// wire is the answer's fixed part marshalled: GetNodeMetricsResponse
	// with its metrics, or DiagnoseNodeResponse with its diagnosis, as
	// trimmed by the read mask; no staleness, report or Degraded.
	wire   []byte
	report *report.Template // diagnoses asked for their report
	// withReport is wire with the report last filled in appended as
	// DiagnoseNodeResponse.report: the age reads the same for a second or
	// more, and the answers between share it (withReportAt).
	withReport atomic.Pointer[filledWire]
}

type filledWire struct {
	report string
	wire   []byte
}

// withReportAt returns a diagnosis's prepared bytes with its report for
// data of age appended: one copy per distinct report text, and no UTF-8
// check of the report on each answer (it was checked when rendered).
func (p *prepared) withReportAt(age time.Duration) []byte {
	if p.report == nil {
		return p.wire
	}
	text := p.report.Text(age)
	if f := p.withReport.Load(); f != nil && f.report == text {
		return f.wire
	}
	field := (&llmdiagv1.DiagnoseNodeResponse{}).ProtoReflect().Descriptor().Fields().ByName("report").Number()
	wire := slices.Clip(p.wire)
	wire = protowire.AppendTag(wire, field, protowire.BytesType)
	wire = protowire.AppendString(wire, text)
	p.withReport.Store(&filledWire{text, wire})
	return wire
}

// answers holds the prepared answers of the store's current generation and
// the peers of each model at it.
type answers struct {
	// max bounds bytes (default MaxPreparedBytes); maxShapes the masks in
	// shapes (default MaxMaskShapes).
	max       int
	maxShapes int
	mu        sync.RWMutex
	gen       uint64
	byKey     map[answerKey]*prepared
	bytes     int
	// shapes are the read masks (Key, not "") answers are kept for at gen,
	// each with the asks served from what was prepared for it.
	shapes map[string]*atomic.Int64
	// peers are every node's metrics by model, their staleness measured
	// at the generation's first ask for them.
	peers map[string][]peer
	group singleflight.Group
}

func (a *answers) get(gen uint64, key answerKey) *prepared {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.gen != gen {
		return nil
	}
	p := a.byKey[key]
	if p != nil && key.mask != "" {
		a.shapes[key.mask].Add(1)
	}
	return p
}

// admits reports whether an answer under mask may be kept at gen: the
// whole answer, a mask already kept, or room for one more.
func (a *answers) admits(gen uint64, mask string) bool {
	if mask == "" {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.gen != gen || a.shapes[mask] != nil || len(a.shapes) < a.shapeLimit()
}

func (a *answers) shapeLimit() int {
	if a.maxShapes <= 0 {
		return MaxMaskShapes
	}
	return a.maxShapes
}

// turn forgets what belongs to an older generation than gen, and reports
// whether gen is the current one (not older).
func (a *answers) turn(gen uint64) bool {
	if gen < a.gen {
		return false
	}
	if gen > a.gen || a.byKey == nil {
		// The masks served again at the generation ending keep their places.
		shapes := map[string]*atomic.Int64{}
		for mask, asks := range a.shapes {
			if asks.Load() > 0 {
				shapes[mask] = new(atomic.Int64)
			}
		}
		a.gen, a.byKey, a.bytes, a.peers, a.shapes = gen, map[answerKey]*prepared{}, 0, nil, shapes
	}
	return true
}

func (a *answers) put(gen uint64, key answerKey, p *prepared) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// The bytes, the template, and one filled copy of both (withReport).
	size := len(p.wire) + 2*p.report.Size()
	if p.report != nil {
		size += len(p.wire)
	}
	limit := a.max
	if limit <= 0 {
		limit = MaxPreparedBytes
	}
	if !a.turn(gen) || a.bytes+size > limit {
		return
	}
	if key.mask != "" && a.shapes[key.mask] == nil {
		if len(a.shapes) >= a.shapeLimit() {
			return
		}
		a.shapes[key.mask] = new(atomic.Int64)
	}
	a.byKey[key] = p
	a.bytes += size
}

// answer returns the answer for key prepared at the store's current
// generation, preparing it with prepare on first ask (one preparation for
// concurrent asks). It returns nil when the store has no generation,
// prepare made none (stale data), or key's mask is past MaxMaskShapes: the
// caller answers afresh.
func (s *Service) answer(ctx context.Context, key answerKey, prepare func(context.Context) (*prepared, error)) (*prepared, error) {
	g, ok := s.st.(generationer)
	if !ok {
		return nil, nil
	}
	gen := g.Generation()
	if p := s.ans.get(gen, key); p != nil {
		return p, nil
	}
	if !s.ans.admits(gen, key.mask) {
		return nil, nil // one mask too many this generation: afresh
	}
	ch := s.ans.group.DoChan(strconv.FormatUint(gen, 10)+"\x00"+key.String(), func() (any, error) {
		// Read after the generation: what is prepared is at least as new
		// as the generation it is kept under.
		p, err := prepare(context.WithoutCancel(ctx))
		if err == nil && p != nil {
			s.ans.put(gen, key, p)
		}
		return p, err
	})
	select {
	case <-ctx.Done():
		return nil, storeErr(ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*prepared), nil
	}
}

// peersOf returns the metrics of the nodes of model other than node, with
// their staleness at now: listed once per store generation (staleness then
// measured at the first ask) when the store has one, else now.
func (s *Service) peersOf(ctx context.Context, model, node string, now time.Time) ([]*llmdiagv1.NodeMetrics, error) {
	var all []peer
	if g, ok := s.st.(generationer); ok {
		gen := g.Generation()
		s.ans.mu.RLock()
		byModel, cur := s.ans.peers, s.ans.gen == gen
		s.ans.mu.RUnlock()
		if !cur || byModel == nil {
			v, err, _ := s.ans.group.Do("peers\x00"+strconv.FormatUint(gen, 10), func() (any, error) {
				// One listing for everyone waiting: not ended by the first
				// caller giving up.
				byModel, err := s.listPeers(context.WithoutCancel(ctx), now)
				if err != nil {
					return nil, err
				}
				s.ans.mu.Lock()
				if s.ans.turn(gen) {
					s.ans.peers = byModel
				}
				s.ans.mu.Unlock()
				return byModel, nil
			})
			if err != nil {
				return nil, err
			}
			byModel = v.(map[string][]peer)
		}
		all = byModel[model]
	} else {
		byModel, err := s.listPeers(ctx, now)
		if err != nil {
			return nil, err
		}
		all = byModel[model]
	}
	peers := make([]*llmdiagv1.NodeMetrics, 0, len(all))
	for _, p := range all {
		if p.node != node {
			peers = append(peers, p.m)
		}
	}
	return peers, nil
}

// peer is one node's metrics in a list of peers.
type peer struct {
	node string
	m    *llmdiagv1.NodeMetrics
}

// listPeers lists the store's nodes' metrics by model, their staleness
// measured at now.
func (s *Service) listPeers(ctx context.Context, now time.Time) (map[string][]peer, error) {
	recs, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	byModel := map[string][]peer{}
	for _, r := range recs {
		model := r.Node.GetModel()
		byModel[model] = append(byModel[model], peer{r.Node.GetId(), refresh.Restale(r.Metrics, now, s.cfg.StaleAfter)})
	}
	return byModel, nil
}

// binaryProto reports whether the request's answer is marshalled as
// binary protobuf, which keeps a message's unknown fields: a wire request
// with a protobuf content type (or a Connect GET asking for it). JSON and
// calls made in this process (no protocol) get decoded messages.
func binaryProto(peer connect.Peer, h http.Header) bool {
	ct := h.Get("Content-Type")
	switch peer.Protocol {
	case connect.ProtocolGRPC:
		return ct == "application/grpc" || ct == "application/grpc+proto"
	case connect.ProtocolGRPCWeb:
		return ct == "application/grpc-web" || ct == "application/grpc-web+proto"
	case connect.ProtocolConnect:
		if ct == "" {
			return peer.Query.Get("encoding") == "proto"
		}
		return ct == "application/proto" || strings.HasPrefix(ct, "application/connect+proto")
	}
	return false
}

// withPrepared makes resp the prepared answer: resp's own fields (the
// per-call part) followed by the prepared bytes, as unknown fields when
// binary, else decoded into resp under its own fields.
func withPrepared(resp proto.Message, wire []byte, binary bool) error {
	if binary {
		resp.ProtoReflect().SetUnknown(wire)
		return nil
	}
	// What a client's parser does with the binary form.
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(wire, resp)
}
