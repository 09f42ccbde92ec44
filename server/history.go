package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// GetNodeHistory: one node's history, as the store keeps it.

// MaxHistoryPoints bounds the points one GetNodeHistory answer carries:
// the newest ones when the store keeps more (serve --history above it).
// About 130 bytes a point in JSON (TestPlainGETs), so an answer stays
// under 1.5 MB.
const MaxHistoryPoints = 10_000

// GetNodeHistory implements DiagnosisServiceHandler: the node's points,
// oldest first, the newest limit of them (0: all kept, up to
// MaxHistoryPoints). A figure a point does not hold stays absent.
func (s *Service) GetNodeHistory(ctx context.Context, req *connect.Request[llmdiagv1.GetNodeHistoryRequest]) (*connect.Response[llmdiagv1.GetNodeHistoryResponse], error) {
	node, limit := req.Msg.GetNode(), req.Msg.GetLimit()
	if node == "" {
		return nil, invalid("node", errors.New("required"))
	}
	if !fleet.ValidID(node) {
		return nil, invalid("node", fmt.Errorf("%q is not a valid node id", node))
	}
	if limit < 0 || limit > MaxHistoryPoints {
		return nil, invalid("limit", fmt.Errorf("%d is outside [0, %d] (0: every point kept)", limit, MaxHistoryPoints))
	}
	n := int(limit)
	if n == 0 {
		n = MaxHistoryPoints
	}
	points, err := s.history(ctx, node)
	if err != nil {
		return nil, storeErr(err)
	}
	points = points[max(0, len(points)-n):]
	out := &llmdiagv1.GetNodeHistoryResponse{Points: make([]*llmdiagv1.HistoryPoint, len(points)), Degraded: s.degraded()}
	// One allocation for all the points and one for their times. The
	// figures are the store's fresh copies (store.Store.History), the
	// caller's to keep.
	pts := make([]llmdiagv1.HistoryPoint, len(points))
	at := make([]timestamppb.Timestamp, len(points))
	for i, p := range points {
		at[i].Seconds, at[i].Nanos = p.At.Unix(), int32(p.At.Nanosecond())
		hp := &pts[i]
		hp.At, hp.Up, hp.Status = &at[i], p.Up, p.Status
		hp.Queue, hp.Running, hp.KvPressure = p.Queue, p.Running, p.KVPressure
		hp.E2EMeanSeconds, hp.E2EP99Seconds, hp.GenerationTokensPerSecond = p.E2EMean, p.E2EP99, p.GenerationRate
		out.Points[i] = hp
	}
	return connect.NewResponse(out), nil
}
