package client

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// AllNodes pages through ListNodes with req's filters and returns every
// page's nodes in one response, sorted by id as the pages are. Degraded is
// the first degraded page's, if any. req.PageToken is ignored (AllNodes
// starts at the first page); req.PageSize sets the size of each page, and
// req.ReadMask goes with every page.
func (c *Client) AllNodes(ctx context.Context, req *llmdiagv1.ListNodesRequest) (*llmdiagv1.ListNodesResponse, error) {
	req = proto.CloneOf(req)
	req.PageToken = ""
	out := &llmdiagv1.ListNodesResponse{}
	seen := map[string]bool{}
	for {
		resp, err := c.ListNodes(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		out.Nodes = append(out.Nodes, resp.Msg.GetNodes()...)
		if out.Degraded == nil {
			out.Degraded = resp.Msg.GetDegraded()
		}
		next := resp.Msg.GetNextPageToken()
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, errors.New("list nodes: the service repeated a page token")
		}
		seen[next] = true
		req.PageToken = next
	}
}
