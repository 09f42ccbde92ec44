package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// pagedService serves n nodes "n0000"…: models a and b alternate, every
// third node is WARN, the rest OK; all observed now.
func pagedService(t *testing.T, n int) *server.Service {
	t.Helper()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := memory.New(memory.Options{HistoryLen: 1}, "pages")
	for i := range n {
		id := fmt.Sprintf("n%04d", i)
		model := []string{"a", "b"}[i%2]
		status := llmdiagv1.Status_STATUS_OK
		if i%3 == 0 {
			status = llmdiagv1.Status_STATUS_WARN
		}
		rec := &store.Record{
			Node:    &llmdiagv1.Node{Id: id, Model: model, Engine: llmdiagv1.Engine_ENGINE_VLLM, Status: status},
			Metrics: &llmdiagv1.NodeMetrics{Node: id, Model: model, ObservedAt: timestamppb.New(now), Up: true},
		}
		if err := st.Put(context.Background(), rec, diagnose.Point{At: now}); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return server.NewService(st, nil, log, func() time.Time { return now }, server.Config{}, nil)
}

// listAll pages through ListNodes and returns the ids in order and the
// number of pages.
func listAll(t *testing.T, svc *server.Service, req *llmdiagv1.ListNodesRequest) ([]string, int) {
	t.Helper()
	var ids []string
	for pages := 1; ; pages++ {
		resp, err := svc.ListNodes(context.Background(), connect.NewRequest(req))
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(resp.Msg.GetNodes()) > int(max(req.GetPageSize(), 0)) && req.GetPageSize() > 0 {
			t.Fatalf("page %d: %d nodes, page_size %d", pages, len(resp.Msg.GetNodes()), req.GetPageSize())
		}
		for _, n := range resp.Msg.GetNodes() {
			ids = append(ids, n.GetId())
		}
		if resp.Msg.GetNextPageToken() == "" {
			return ids, pages
		}
		req.PageToken = resp.Msg.GetNextPageToken()
	}
}

func TestListNodesPages(t *testing.T) {
	svc := pagedService(t, 25)
	for _, tc := range []struct {
		name      string
		req       *llmdiagv1.ListNodesRequest
		wantNodes int
		wantPages int
		keep      func(i int) bool
	}{
		{"all in one default page", &llmdiagv1.ListNodesRequest{}, 25, 1, func(int) bool { return true }},
		{"pages of 10", &llmdiagv1.ListNodesRequest{PageSize: 10}, 25, 3, func(int) bool { return true }},
		{"exact pages", &llmdiagv1.ListNodesRequest{PageSize: 5}, 25, 5, func(int) bool { return true }},
		{"model", &llmdiagv1.ListNodesRequest{Model: "b", PageSize: 4}, 12, 3, func(i int) bool { return i%2 == 1 }},
		{"status", &llmdiagv1.ListNodesRequest{Status: llmdiagv1.Status_STATUS_WARN, PageSize: 3}, 9, 3, func(i int) bool { return i%3 == 0 }},
		{"model and status", &llmdiagv1.ListNodesRequest{Model: "a", Status: llmdiagv1.Status_STATUS_WARN}, 5, 1, func(i int) bool { return i%6 == 0 }},
		{"engine matches none", &llmdiagv1.ListNodesRequest{Engine: llmdiagv1.Engine_ENGINE_SGLANG}, 0, 1, func(int) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, pages := listAll(t, svc, tc.req)
			var want []string
			for i := range 25 {
				if tc.keep(i) {
					want = append(want, fmt.Sprintf("n%04d", i))
				}
			}
			if strings.Join(ids, ",") != strings.Join(want, ",") || len(ids) != tc.wantNodes {
				t.Errorf("ids %v, want %v", ids, want)
			}
			if pages != tc.wantPages {
				t.Errorf("%d pages, want %d", pages, tc.wantPages)
			}
		})
	}
}

func TestListNodesPageBounds(t *testing.T) {
	svc := pagedService(t, server.MaxPageSize+5)
	ctx := context.Background()
	for _, size := range []int32{0, 5000} {
		resp, err := svc.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{PageSize: size}))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(resp.Msg.GetNodes()); got != server.MaxPageSize || resp.Msg.GetNextPageToken() == "" {
			t.Errorf("page_size %d: %d nodes, next %q; want %d and a token", size, got, resp.Msg.GetNextPageToken(), server.MaxPageSize)
		}
	}
	ids, pages := listAll(t, svc, &llmdiagv1.ListNodesRequest{})
	if len(ids) != server.MaxPageSize+5 || pages != 2 {
		t.Errorf("%d nodes in %d pages, want %d in 2", len(ids), pages, server.MaxPageSize+5)
	}
}

func TestListNodesBadPaging(t *testing.T) {
	svc := pagedService(t, 10)
	ctx := context.Background()
	first, err := svc.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{Model: "a", PageSize: 2}))
	if err != nil {
		t.Fatal(err)
	}
	tok := first.Msg.GetNextPageToken()
	for _, tc := range []struct {
		name  string
		req   *llmdiagv1.ListNodesRequest
		field string
	}{
		{"negative page size", &llmdiagv1.ListNodesRequest{PageSize: -1}, "page_size"},
		{"garbage token", &llmdiagv1.ListNodesRequest{PageToken: "not-a-token!"}, "page_token"},
		{"token of base64 garbage", &llmdiagv1.ListNodesRequest{PageToken: "aGVsbG8"}, "page_token"},
		{"token with other filters", &llmdiagv1.ListNodesRequest{Model: "b", PageToken: tok}, "page_token"},
		{"oversized token", &llmdiagv1.ListNodesRequest{PageToken: strings.Repeat("A", 2000)}, "page_token"},
		{"unknown status", &llmdiagv1.ListNodesRequest{Status: 99}, "status"},
		{"unknown engine", &llmdiagv1.ListNodesRequest{Engine: 99}, "engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.ListNodes(ctx, connect.NewRequest(tc.req))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("err = %v, want InvalidArgument naming %s", err, tc.field)
			}
		})
	}
	// The token goes on with the same filters.
	next, err := svc.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{Model: "a", PageSize: 2, PageToken: tok}))
	if err != nil || len(next.Msg.GetNodes()) != 2 || next.Msg.GetNodes()[0].GetId() != "n0004" {
		t.Errorf("second page: %v, %v; want n0004, n0006", next.Msg.GetNodes(), err)
	}
}
