package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/llmdiag/llmdiag/client"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
)

// pagedFleet serves n nodes in pages of at most 3 (the token is the index
// of the next node), or repeats its first token when stuck.
type pagedFleet struct {
	llmdiagv1connect.UnimplementedDiagnosisServiceHandler
	n     int
	stuck bool
	calls int
	// masks are the read masks the calls carried, joined by commas.
	masks []string
}

func (p *pagedFleet) ListNodes(_ context.Context, req *connect.Request[llmdiagv1.ListNodesRequest]) (*connect.Response[llmdiagv1.ListNodesResponse], error) {
	p.calls++
	p.masks = append(p.masks, strings.Join(req.Msg.GetReadMask().GetPaths(), ","))
	from := 0
	if tok := req.Msg.GetPageToken(); tok != "" && !p.stuck {
		from, _ = strconv.Atoi(tok)
	}
	size := 3
	if s := int(req.Msg.GetPageSize()); s > 0 && s < size {
		size = s
	}
	out := &llmdiagv1.ListNodesResponse{}
	for i := from; i < min(from+size, p.n); i++ {
		out.Nodes = append(out.Nodes, &llmdiagv1.Node{Id: fmt.Sprintf("n%d", i), Model: req.Msg.GetModel()})
	}
	if from+size < p.n {
		out.NextPageToken = strconv.Itoa(from + size)
	}
	return connect.NewResponse(out), nil
}

func TestAllNodesPagesThrough(t *testing.T) {
	for _, tc := range []struct {
		n, pageSize, calls int
		stuck              bool
	}{
		{n: 0, calls: 1},
		{n: 3, calls: 1},
		{n: 7, calls: 3},
		{n: 7, pageSize: 2, calls: 4},
		{n: 7, stuck: true},
	} {
		t.Run(fmt.Sprintf("n=%d,size=%d,stuck=%v", tc.n, tc.pageSize, tc.stuck), func(t *testing.T) {
			svc := &pagedFleet{n: tc.n, stuck: tc.stuck}
			_, h := llmdiagv1connect.NewDiagnosisServiceHandler(svc)
			srv := httptest.NewUnstartedServer(h)
			srv.Config.Protocols = &http.Protocols{}
			srv.Config.Protocols.SetHTTP1(true)
			srv.Config.Protocols.SetUnencryptedHTTP2(true)
			srv.Start()
			defer srv.Close()
			c, err := client.New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.AllNodes(context.Background(), &llmdiagv1.ListNodesRequest{Model: "m", PageSize: int32(tc.pageSize), PageToken: "ignored",
				ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"id", "model"}}})
			if tc.stuck {
				if err == nil || !strings.Contains(err.Error(), "repeated a page token") {
					t.Fatalf("stuck service: err = %v, want a repeated-token error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetNodes()) != tc.n || svc.calls != tc.calls {
				t.Fatalf("%d nodes in %d calls, want %d in %d", len(resp.GetNodes()), svc.calls, tc.n, tc.calls)
			}
			for i, m := range svc.masks {
				if m != "id,model" {
					t.Errorf("page %d asked with read mask %q, want the request's (id,model)", i, m)
				}
			}
			for i, n := range resp.GetNodes() {
				if n.GetId() != fmt.Sprintf("n%d", i) || n.GetModel() != "m" {
					t.Fatalf("node %d = %v: order or filter lost", i, n)
				}
			}
		})
	}
}
