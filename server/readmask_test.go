package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// maskedServices starts two services over one store on a stopped clock:
// one that prepares answers per store generation, and one that makes
// every answer afresh (its store has no generation).
func maskedServices(t *testing.T) (prep, fresh map[string]api) {
	t.Helper()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := testkit.NewClock(t0.Add(2 * time.Second))
	src := &fakeSource{now: t0, nodes: []fleet.Node{
		{ID: "deepseek-v4-0", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, ActiveParamsBillions: 37, GPU: "H200"}},
		{ID: "deepseek-v4-1", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, ActiveParamsBillions: 37, GPU: "H200"}},
		{ID: "glm-0", Model: "glm-4.6", Profile: fleet.Profile{TensorParallel: 8, ActiveParamsBillions: 32}},
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tm, err := telemetry.New(prometheus.NewRegistry(), clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second
	st := memory.New(memory.Options{}, "test")
	loop := refresh.New(src, st, tm, log, clock.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th})
	if err := loop.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: th.StaleAfter, Thresholds: th, OffsetStep: 5 * time.Second}
	p := servertest.Start(t, servertest.Options{Store: st, Source: src, Log: log, Now: clock.Now, Config: cfg})
	f := servertest.Start(t, servertest.Options{Store: noGeneration{st}, Source: src, Log: log, Now: clock.Now, Config: cfg})
	return apis(t, p.URL), apis(t, f.URL)
}

func mask(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }

// TestReadMask asks each of the three reads with a mask over every
// protocol: the answer holds the fields named and nothing else, nested
// paths included; the per-call staleness and the report come only when
// named; paging works on ids a mask leaves out; an empty mask is the
// answer without one, byte for byte; an unknown path is InvalidArgument
// naming read_mask and the path.
func TestReadMask(t *testing.T) {
	prep, _ := maskedServices(t)
	ctx := t.Context()
	ref := prep["grpc-go"]
	const node = "deepseek-v4-0"
	fullNodes, err := ref.listNodes(ctx, &llmdiagv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	fullMetrics, err := ref.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	fullDiag, err := ref.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	if len(fullNodes.GetNodes()) != 3 || fullMetrics.GetMetrics().GetTtft().GetCount() == 0 || fullDiag.GetReport() == "" || fullDiag.GetDiagnosis().GetStaleness() == nil {
		t.Fatalf("unexpected full answers: %d nodes, metrics %v, diagnosis %v", len(fullNodes.GetNodes()), fullMetrics, fullDiag)
	}
	fm, fd := fullMetrics.GetMetrics(), fullDiag.GetDiagnosis()

	for name, a := range prep {
		t.Run(name, func(t *testing.T) {
			// ListNodes: a page of one at a time, without the ids.
			var got []*llmdiagv1.Node
			req := &llmdiagv1.ListNodesRequest{PageSize: 1, ReadMask: mask("status", "routable", "load_score", "profile.gpu")}
			for {
				resp, err := a.listNodes(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, resp.GetNodes()...)
				if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" || len(got) > 3 {
					break
				}
			}
			if len(got) != 3 {
				t.Fatalf("ListNodes in pages of one: %d nodes, want 3", len(got))
			}
			for i, n := range got {
				f := fullNodes.GetNodes()[i]
				want := &llmdiagv1.Node{Status: f.GetStatus(), Routable: f.GetRoutable(), LoadScore: f.GetLoadScore()}
				if g := f.GetProfile().GetGpu(); g != "" {
					want.Profile = &llmdiagv1.Profile{Gpu: g}
				} else {
					want.Profile = &llmdiagv1.Profile{}
				}
				if !proto.Equal(n, want) {
					t.Errorf("ListNodes node %d:\n%v\nwant\n%v", i, prototext.Format(n), prototext.Format(want))
				}
			}

			// GetNodeMetrics: scalars, a nested path, the per-call staleness.
			m, err := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node, ReadMask: mask("kv_pressure", "queue", "ttft.count", "staleness")})
			if err != nil {
				t.Fatal(err)
			}
			wantM := &llmdiagv1.GetNodeMetricsResponse{Metrics: &llmdiagv1.NodeMetrics{
				KvPressure: fm.KvPressure, Queue: fm.Queue, Ttft: &llmdiagv1.Distribution{Count: fm.GetTtft().GetCount()}, Staleness: fm.GetStaleness(),
			}}
			if !proto.Equal(m, wantM) {
				t.Errorf("GetNodeMetrics:\n%v\nwant\n%v", prototext.Format(m), prototext.Format(wantM))
			}
			m, err = a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node, Offset: durationpb.New(0), ReadMask: mask("node")})
			if err != nil || !proto.Equal(m, &llmdiagv1.GetNodeMetricsResponse{Metrics: &llmdiagv1.NodeMetrics{Node: node}}) {
				t.Errorf("GetNodeMetrics(offset 0, node only) = %v, %v: no offset, no staleness", m, err)
			}

			// DiagnoseNode: what a router reads; no report, no staleness.
			d, err := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, ReadMask: mask("routable", "load_score", "status", "root_cause")})
			if err != nil {
				t.Fatal(err)
			}
			wantD := &llmdiagv1.DiagnoseNodeResponse{Diagnosis: &llmdiagv1.Diagnosis{
				Routable: fd.GetRoutable(), LoadScore: fd.GetLoadScore(), Status: fd.GetStatus(), RootCause: fd.GetRootCause(),
			}}
			if !proto.Equal(d, wantD) {
				t.Errorf("DiagnoseNode:\n%v\nwant\n%v", prototext.Format(d), prototext.Format(wantD))
			}
			// The report and the staleness when named; a nested path.
			d, err = a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, ReadMask: mask("report", "staleness", "observed_at.seconds")})
			if err != nil {
				t.Fatal(err)
			}
			wantD = &llmdiagv1.DiagnoseNodeResponse{Report: fullDiag.GetReport(), Diagnosis: &llmdiagv1.Diagnosis{
				Staleness: fd.GetStaleness(), ObservedAt: &timestamppb.Timestamp{Seconds: fd.GetObservedAt().GetSeconds()},
			}}
			if !proto.Equal(d, wantD) {
				t.Errorf("DiagnoseNode(report, staleness):\n%v\nwant\n%v", prototext.Format(d), prototext.Format(wantD))
			}
			d, err = a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, ReadMask: mask("report")})
			if err != nil || !proto.Equal(d, &llmdiagv1.DiagnoseNodeResponse{Report: fullDiag.GetReport()}) {
				t.Errorf("DiagnoseNode(report) = %v, %v: want the report alone", d, err)
			}

			// An empty mask: the answer without one, byte for byte.
			same := func(what string, noMask, empty proto.Message) {
				t.Helper()
				b1, _ := proto.MarshalOptions{Deterministic: true}.Marshal(noMask)
				b2, _ := proto.MarshalOptions{Deterministic: true}.Marshal(empty)
				if string(b1) != string(b2) {
					t.Errorf("%s with an empty mask differs from the answer without one", what)
				}
			}
			l1, err1 := a.listNodes(ctx, &llmdiagv1.ListNodesRequest{})
			l2, err2 := a.listNodes(ctx, &llmdiagv1.ListNodesRequest{ReadMask: mask()})
			m1, err3 := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node})
			m2, err4 := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node, ReadMask: mask()})
			d1, err5 := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node})
			d2, err6 := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, ReadMask: mask()})
			for _, err := range []error{err1, err2, err3, err4, err5, err6} {
				if err != nil {
					t.Fatal(err)
				}
			}
			same("ListNodes", l1, l2)
			same("GetNodeMetrics", m1, m2)
			same("DiagnoseNode", d1, d2)
			if !proto.Equal(d1, fullDiag) || !proto.Equal(m1, fullMetrics) {
				t.Error("an answer without a mask differs over this protocol from grpc-go's")
			}

			// Unknown paths.
			for _, bad := range []struct {
				rpc  string
				path string
				call func(*fieldmaskpb.FieldMask) error
			}{
				{"ListNodes", "nope", func(m *fieldmaskpb.FieldMask) error {
					_, err := a.listNodes(ctx, &llmdiagv1.ListNodesRequest{ReadMask: m})
					return err
				}},
				{"ListNodes", "profile.nope", func(m *fieldmaskpb.FieldMask) error {
					_, err := a.listNodes(ctx, &llmdiagv1.ListNodesRequest{ReadMask: m})
					return err
				}},
				{"GetNodeMetrics", "report", func(m *fieldmaskpb.FieldMask) error {
					_, err := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node, ReadMask: m})
					return err
				}},
				{"GetNodeMetrics", "ttft.percentiles.value", func(m *fieldmaskpb.FieldMask) error {
					_, err := a.getNodeMetrics(ctx, &llmdiagv1.GetNodeMetricsRequest{Node: node, ReadMask: m})
					return err
				}},
				{"DiagnoseNode", "degraded", func(m *fieldmaskpb.FieldMask) error {
					_, err := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, ReadMask: m})
					return err
				}},
				{"DiagnoseNode", "diagnosis.status", func(m *fieldmaskpb.FieldMask) error {
					_, err := a.diagnose(ctx, &llmdiagv1.DiagnoseNodeRequest{Node: node, ReadMask: m})
					return err
				}},
			} {
				err := bad.call(mask("status", bad.path))
				if bad.rpc == "GetNodeMetrics" {
					err = bad.call(mask("up", bad.path))
				}
				if code(err) != "invalid_argument" || !strings.Contains(err.Error(), "read_mask") || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad.path)) {
					t.Errorf("%s with path %q: %v, want InvalidArgument naming read_mask and the path", bad.rpc, bad.path, err)
				}
			}
		})
	}
}

// TestReadMaskPreparedIsFresh: masked answers served from what was
// prepared are the answers made afresh, over every protocol, for more
// distinct masks than are prepared a generation (the rest are made afresh
// on every call).
func TestReadMaskPreparedIsFresh(t *testing.T) {
	prep, fresh := maskedServices(t)
	ctx := t.Context()
	ref := fresh["grpc-go"]
	var masks [][]string
	fields := (&llmdiagv1.Diagnosis{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() { // one mask per field: more than MaxMaskShapes
		masks = append(masks, []string{string(fields.Get(i).Name())})
	}
	masks = append(masks, []string{"routable", "load_score", "status", "root_cause"}, []string{"status", "report"}, []string{"report"})
	if len(masks) <= server.MaxMaskShapes {
		t.Fatalf("%d masks do not pass the bound of %d", len(masks), server.MaxMaskShapes)
	}
	for _, node := range []string{"deepseek-v4-0", "glm-0"} {
		for _, paths := range masks {
			for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
				req := &llmdiagv1.DiagnoseNodeRequest{Node: node, Language: lang, ReadMask: mask(paths...)}
				want, err := ref.diagnose(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				for name, a := range prep {
					for range 2 { // prepared on first ask, served from it on the second
						got, err := a.diagnose(ctx, req)
						if err != nil {
							t.Fatal(err)
						}
						if !proto.Equal(got, want) {
							t.Errorf("DiagnoseNode(%s, %s, %v) over %s:\n%v\nafresh:\n%v", node, lang, paths, name, prototext.Format(got), prototext.Format(want))
						}
					}
				}
			}
		}
		for _, paths := range [][]string{{"kv_pressure", "queue", "staleness"}, {"ttft.percentiles", "gpu"}, {"offset", "node"}} {
			for _, offset := range []*durationpb.Duration{nil, durationpb.New(0)} {
				req := &llmdiagv1.GetNodeMetricsRequest{Node: node, Offset: offset, ReadMask: mask(paths...)}
				want, err := ref.getNodeMetrics(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				for name, a := range prep {
					for range 2 {
						got, err := a.getNodeMetrics(ctx, req)
						if err != nil {
							t.Fatal(err)
						}
						if !proto.Equal(got, want) {
							t.Errorf("GetNodeMetrics(%s, offset %v, %v) over %s:\n%v\nafresh:\n%v", node, offset, paths, name, prototext.Format(got), prototext.Format(want))
						}
					}
				}
			}
		}
	}
}
