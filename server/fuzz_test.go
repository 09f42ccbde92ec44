package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// fuzzRPC is one unary procedure and a new message of its answer.
type fuzzRPC struct {
	procedure string
	response  func() proto.Message
}

// fuzzRPCs are the unary procedures FuzzConnectJSON posts to; the fuzzer's
// first input picks one (modulo their number). StreamHealth is left out: a
// stream that validates holds its connection until the client leaves.
var fuzzRPCs = []fuzzRPC{
	{llmdiagv1connect.DiagnosisServiceListNodesProcedure, func() proto.Message { return &llmdiagv1.ListNodesResponse{} }},
	{llmdiagv1connect.DiagnosisServiceGetNodeMetricsProcedure, func() proto.Message { return &llmdiagv1.GetNodeMetricsResponse{} }},
	{llmdiagv1connect.DiagnosisServiceComparePercentilesProcedure, func() proto.Message { return &llmdiagv1.ComparePercentilesResponse{} }},
	{llmdiagv1connect.DiagnosisServiceDiagnoseNodeProcedure, func() proto.Message { return &llmdiagv1.DiagnoseNodeResponse{} }},
	{llmdiagv1connect.DiagnosisServiceGetNodeHistoryProcedure, func() proto.Message { return &llmdiagv1.GetNodeHistoryResponse{} }},
}

// connectStatus is the HTTP status of each Connect error code a unary
// request may be answered with: the codes the handlers document
// (invalid_argument, not_found, resource_exhausted, unavailable) and
// unauthenticated. Any other status fails the fuzz target.
var connectStatus = map[string]int{
	"invalid_argument":   http.StatusBadRequest,
	"not_found":          http.StatusNotFound,
	"resource_exhausted": http.StatusTooManyRequests,
	"unauthenticated":    http.StatusUnauthorized,
	"unavailable":        http.StatusServiceUnavailable,
}

// fuzzHandler is the whole service's HTTP handler over a memory store
// holding three nodes, called in process (no listener).
func fuzzHandler(f *testing.F) http.Handler {
	f.Helper()
	now := time.Now()
	src := &fakeSource{now: now, nodes: []fleet.Node{
		{ID: "deepseek-v4-0", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, TensorParallel: 1, ActiveParamsBillions: 37}},
		{ID: "deepseek-v4-1", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, TensorParallel: 1, ActiveParamsBillions: 37}},
		{ID: "glm-0", Model: "glm-4.6", Profile: fleet.Profile{TensorParallel: 8, ActiveParamsBillions: 32}},
	}}
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	tm, err := telemetry.New(reg, time.Now)
	if err != nil {
		f.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	th.StaleAfter = time.Hour // the store's data stays fresh for the whole run
	st := memory.New(memory.Options{}, "fuzz")
	if err := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th}).Once(context.Background()); err != nil {
		f.Fatal(err)
	}
	done := make(chan struct{})
	f.Cleanup(func() { close(done) })
	svc := server.NewService(st, src, log, time.Now, server.Config{DefaultWindow: metrics.DefaultWindow, StaleAfter: time.Hour, Thresholds: th, OffsetStep: 5 * time.Second, MinHeartbeat: time.Second}, done)
	ready := make(chan struct{})
	close(ready)
	return server.Handler(svc, server.NewHealth(ready), reg)
}

// FuzzConnectJSON posts arbitrary bytes as a Connect JSON unary request to
// each RPC of the service, in process. Whatever the body, the answer is
// either 200 with the RPC's response message in protojson, or a Connect
// JSON error whose code is one the service documents and whose HTTP status
// is that code's; never a panic, never another 5xx. A body that does not
// decode as the request message is invalid_argument.
func FuzzConnectJSON(f *testing.F) {
	h := fuzzHandler(f)
	seeds := map[int][]string{
		0: {`{}`, `{"model":"glm-4.6","pageSize":1}`, `{"pageToken":"x"}`, `{"pageSize":-1}`, `{"status":"STATUS_OK","readMask":"id,status,profile.gpu"}`,
			`{"readMask":"nope"}`, `{"engine":99}`, `{"pageSize":1,"readMask":"id"}`},
		1: {`{"node":"glm-0"}`, `{"node":"glm-0","window":"15m","offset":"30s"}`, `{"node":"ghost"}`, `{"node":"x\"} or vector(1)"}`,
			`{"node":"glm-0","window":"-5m"}`, `{"node":"glm-0","readMask":"ttft.percentiles,queue"}`, `{"node":"glm-0","offset":"-1s"}`, `{"node":"glm-0","window":"lifetime"}`},
		2: {`{"metric":"LATENCY_METRIC_TTFT","quantiles":[0.5,0.99]}`, `{"metric":"LATENCY_METRIC_E2E","groupBy":"GROUP_BY_MODEL"}`,
			`{"metric":"LATENCY_METRIC_TTFT","quantiles":["NaN"]}`, `{"metric":99}`, `{"metric":"LATENCY_METRIC_TTFT","nodes":["glm-0","ghost"]}`,
			`{"metric":"LATENCY_METRIC_TTFT","groupBy":"GROUP_BY_LABEL","label":"team"}`, `{"metric":"LATENCY_METRIC_TTFT","quantiles":[1e-300,0.999999999]}`},
		3: {`{"node":"deepseek-v4-0","language":"LANGUAGE_ZH"}`, `{"node":"glm-0","format":"REPORT_FORMAT_TEXT"}`, `{}`, `{"node":"glm-0","language":42}`,
			`{"node":"glm-0","readMask":"report,diagnosis.rootCause"}`, `{"node":"glm-0","window":"1h","language":"LANGUAGE_EN"}`},
		4: {`{"node":"glm-0"}`, `{"node":"glm-0","limit":1}`, `{"node":"glm-0","limit":-1}`, `{"node":"glm-0","limit":2147483647}`, `{"node":"a b"}`},
	}
	for i, bodies := range seeds {
		for _, b := range bodies {
			f.Add(uint8(i), []byte(b))
		}
	}
	f.Add(uint8(0), []byte(`not json`))
	f.Add(uint8(1), []byte(`{"node":"glm-0","unknownField":1}`))
	f.Add(uint8(2), []byte(`{"metric":"LATENCY_METRIC_TTFT","offset":"315576000000s"}`))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		rpc := fuzzRPCs[int(which)%len(fuzzRPCs)]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, rpc.procedure, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		got, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusOK {
			if err := protojson.Unmarshal(got, rpc.response()); err != nil {
				t.Fatalf("%s %q: 200 with a body that is not its response: %v\n%s", rpc.procedure, body, err, got)
			}
			if err := connectJSON.Unmarshal(body, requestOf(rpc.procedure)); err != nil {
				t.Fatalf("%s %q: 200 for a body that does not decode as its request: %v", rpc.procedure, body, err)
			}
			return
		}
		var cerr struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(got, &cerr); err != nil {
			t.Fatalf("%s %q: HTTP %d with a body that is not a Connect error: %v\n%s", rpc.procedure, body, res.StatusCode, err, got)
		}
		want, ok := connectStatus[cerr.Code]
		if !ok {
			t.Fatalf("%s %q: HTTP %d, code %q (%s): not a code the service answers with", rpc.procedure, body, res.StatusCode, cerr.Code, cerr.Message)
		}
		if res.StatusCode != want {
			t.Fatalf("%s %q: HTTP %d for code %q, want %d", rpc.procedure, body, res.StatusCode, cerr.Code, want)
		}
		if cerr.Message == "" {
			t.Fatalf("%s %q: %s without a message", rpc.procedure, body, cerr.Code)
		}
		if connectJSON.Unmarshal(body, requestOf(rpc.procedure)) != nil && cerr.Code != "invalid_argument" {
			t.Fatalf("%s %q: undecodable body answered %s, want invalid_argument", rpc.procedure, body, cerr.Code)
		}
	})
}

// connectJSON decodes a request as Connect's JSON codec does: unknown
// fields are dropped.
var connectJSON = protojson.UnmarshalOptions{DiscardUnknown: true}

// requestOf is a new request message of procedure.
func requestOf(procedure string) proto.Message {
	switch procedure {
	case llmdiagv1connect.DiagnosisServiceListNodesProcedure:
		return &llmdiagv1.ListNodesRequest{}
	case llmdiagv1connect.DiagnosisServiceGetNodeMetricsProcedure:
		return &llmdiagv1.GetNodeMetricsRequest{}
	case llmdiagv1connect.DiagnosisServiceComparePercentilesProcedure:
		return &llmdiagv1.ComparePercentilesRequest{}
	case llmdiagv1connect.DiagnosisServiceDiagnoseNodeProcedure:
		return &llmdiagv1.DiagnoseNodeRequest{}
	}
	return &llmdiagv1.GetNodeHistoryRequest{}
}
