package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/readmask"
)

// ListNodes: the fleet, filtered and in pages (pages.go); GetNode: one
// node of it.

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
	mask, err := s.masks.get("nodes", msg.GetReadMask().GetPaths(), func() (readmask.Mask, error) {
		return nodeMask(msg.GetReadMask())
	})
	if err != nil {
		return nil, err
	}
	size, err := pageSize(msg.GetPageSize())
	if err != nil {
		return nil, err
	}
	after, err := decodePageToken(msg)
	if err != nil {
		return nil, err
	}
	recs, err := s.list(ctx)
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
	for _, n := range out.Nodes { // filtered and paged on every field
		mask.Prune(n)
	}
	out.Degraded = s.degraded()
	return connect.NewResponse(out), nil
}

// GetNode implements DiagnosisServiceHandler: the node as ListNodes lists
// it (stale data reads UNKNOWN), trimmed to the read mask.
func (s *Service) GetNode(ctx context.Context, req *connect.Request[llmdiagv1.GetNodeRequest]) (*connect.Response[llmdiagv1.GetNodeResponse], error) {
	msg := req.Msg
	node := msg.GetNode()
	if node == "" {
		return nil, invalid("node", errors.New("required"))
	}
	if !fleet.ValidID(node) {
		return nil, invalid("node", fmt.Errorf("%q is not a valid node id", node))
	}
	mask, err := s.masks.get("nodes", msg.GetReadMask().GetPaths(), func() (readmask.Mask, error) {
		return nodeMask(msg.GetReadMask())
	})
	if err != nil {
		return nil, err
	}
	rec, err := s.get(ctx, node)
	if err != nil {
		return nil, storeErr(err)
	}
	s.markStale(rec, s.now())
	n := rec.Node
	mask.Prune(n)
	return connect.NewResponse(&llmdiagv1.GetNodeResponse{Node: n, Degraded: s.degraded()}), nil
}
