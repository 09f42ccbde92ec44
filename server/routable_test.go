package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// routableFixture is a service over a memory store holding one node of
// each kind GET /routable/{node} tells apart, observed at now (stale-node
// 45 s before, past the 30 s --stale-after); GetRoutability falls back on
// fb.
func routableFixture(t *testing.T, now time.Time, fb server.RoutableFallback) *server.Service {
	t.Helper()
	st := memory.New(memory.Options{}, "routable")
	put := func(id string, status llmdiagv1.Status, cause llmdiagv1.Cause, routable bool, score float64, age time.Duration) {
		rec := &store.Record{
			Node:    &llmdiagv1.Node{Id: id, Model: "m", Status: status, RootCause: cause, Routable: routable, LoadScore: score},
			Metrics: &llmdiagv1.NodeMetrics{Node: id, ObservedAt: timestamppb.New(now.Add(-age))},
		}
		if err := st.Put(context.Background(), rec, diagnose.Point{}); err != nil {
			t.Fatal(err)
		}
	}
	ok, crit := llmdiagv1.Status_STATUS_OK, llmdiagv1.Status_STATUS_CRIT
	put("healthy-0", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.31, 2*time.Second)
	put("saturated-0", llmdiagv1.Status_STATUS_WARN, llmdiagv1.Cause_CAUSE_OVERLOADED, false, 1.4, 2*time.Second)
	put("stalled-0", crit, llmdiagv1.Cause_CAUSE_STALLED, false, 0.5, 2*time.Second)
	put("down-0", llmdiagv1.Status_STATUS_DOWN, llmdiagv1.Cause_CAUSE_TARGET_DOWN, false, 0, 2*time.Second)
	put("stale-0", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.2, 45*time.Second)
	put("nodata-0", llmdiagv1.Status_STATUS_UNKNOWN, llmdiagv1.Cause_CAUSE_NO_DATA, false, 0, 2*time.Second)
	put("pool/a:0", ok, llmdiagv1.Cause_CAUSE_HEALTHY, true, 0.05, 2*time.Second)
	return server.NewService(st, nil, slog.New(slog.DiscardHandler), func() time.Time { return now }, server.Config{StaleAfter: 30 * time.Second, Routable: fb}, nil)
}

func routableMux(t *testing.T, svc *server.Service, o server.RoutableOptions) http.Handler {
	t.Helper()
	h, err := svc.RoutableHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(server.RoutablePattern, h)
	return mux
}

func TestRoutableHandler(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	svc := routableFixture(t, now, server.RoutableFallback{})
	reg := prometheus.NewRegistry()
	open := routableMux(t, svc, server.RoutableOptions{RoutableFallback: server.RoutableFallback{FailOpen: true}, Registerer: reg})
	closed := routableMux(t, svc, server.RoutableOptions{})
	notReady := routableMux(t, svc, server.RoutableOptions{RoutableFallback: server.RoutableFallback{FailOpen: true, Ready: make(chan struct{})}})
	for _, c := range []struct {
		name, method, path, accept string
		h                          http.Handler
		code                       int
		body                       string // the whole body, or with json the answer's fields
		stale                      bool
	}{
		{"routable", "GET", "/routable/healthy-0", "", open, 200, "routable 0.31\n", false},
		{"node id with slash and colon", "GET", "/routable/pool/a:0", "", open, 200, "routable 0.05\n", false},
		{"saturated", "GET", "/routable/saturated-0", "", open, 503, "not routable: STATUS_WARN CAUSE_OVERLOADED\n", false},
		{"stalled", "GET", "/routable/stalled-0", "", open, 503, "not routable: STATUS_CRIT CAUSE_STALLED\n", false},
		{"down", "GET", "/routable/down-0", "", open, 503, "not routable: STATUS_DOWN CAUSE_TARGET_DOWN\n", false},
		{"unknown node", "GET", "/routable/nobody-0", "", open, 404, "unknown node \"nobody-0\"\n", false},
		{"unknown node, fail-closed", "GET", "/routable/nobody-0", "", closed, 404, "unknown node \"nobody-0\"\n", false},
		{"bad id", "GET", "/routable/-bad", "", open, 400, "", false},
		{"empty id", "GET", "/routable/", "", open, 400, "", false},
		{"stale, fail-open", "GET", "/routable/stale-0", "", open, 200, "routable (stale)\n", true},
		{"stale, fail-closed", "GET", "/routable/stale-0", "", closed, 503, "not routable (stale): STATUS_UNKNOWN CAUSE_NO_DATA\n", true},
		{"UNKNOWN verdict, fail-open", "GET", "/routable/nodata-0", "", open, 200, "routable (stale)\n", true},
		{"UNKNOWN verdict, fail-closed", "GET", "/routable/nodata-0", "", closed, 503, "not routable (stale): STATUS_UNKNOWN CAUSE_NO_DATA\n", true},
		{"before the first refresh, fail-open", "GET", "/routable/nobody-0", "", notReady, 200, "routable (stale)\n", true},
		{"HEAD routable", "HEAD", "/routable/healthy-0", "", open, 200, "", false},
		{"HEAD stalled", "HEAD", "/routable/stalled-0", "", open, 503, "", false},
		{"HEAD stale, fail-closed", "HEAD", "/routable/stale-0", "", closed, 503, "", true},
		{"JSON routable", "GET", "/routable/healthy-0", "application/json", open, 200,
			`{"node":"healthy-0","routable":true,"load_score":0.31,"status":"STATUS_OK","cause":"CAUSE_HEALTHY","observed_at":"2026-03-01T11:59:58Z"}`, false},
		{"JSON stalled", "GET", "/routable/stalled-0", "text/html, application/json;q=0.9", open, 503,
			`{"node":"stalled-0","routable":false,"load_score":0.5,"status":"STATUS_CRIT","cause":"CAUSE_STALLED","observed_at":"2026-03-01T11:59:58Z"}`, false},
		{"JSON stale, fail-open", "GET", "/routable/stale-0", "application/json", open, 200,
			`{"node":"stale-0","routable":true,"load_score":0.2,"status":"STATUS_UNKNOWN","cause":"CAUSE_NO_DATA","observed_at":"2026-03-01T11:59:15Z","stale":true}`, true},
		{"JSON unknown node", "GET", "/routable/nobody-0", "application/json", open, 404, `{"node":"nobody-0","routable":false,"error":"unknown node"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, nil)
			if c.accept != "" {
				req.Header.Set("Accept", c.accept)
			}
			rec := httptest.NewRecorder()
			c.h.ServeHTTP(rec, req)
			res := rec.Result()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != c.code {
				t.Fatalf("HTTP %d, want %d: %s", res.StatusCode, c.code, body)
			}
			if got := res.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", got)
			}
			if got := res.Header.Get(server.StaleHeader) == "true"; got != c.stale {
				t.Errorf("%s: %q, want stale %v", server.StaleHeader, res.Header.Get(server.StaleHeader), c.stale)
			}
			switch {
			case c.method == http.MethodHead:
				if len(body) != 0 {
					t.Errorf("HEAD answered a body: %q", body)
				}
				if res.Header.Get("Content-Length") == "" {
					t.Error("HEAD without Content-Length")
				}
			case c.accept != "":
				if ct := res.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				var got, want map[string]any
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("%v: %s", err, body)
				}
				if err := json.Unmarshal([]byte(c.body), &want); err != nil {
					t.Fatal(err)
				}
				if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
					t.Errorf("body %s\nwant %s", g, w)
				}
			case c.body == "":
				if !strings.HasPrefix(string(body), "invalid node id") {
					t.Errorf("body %q", body)
				}
			default:
				if string(body) != c.body {
					t.Errorf("body %q, want %q", body, c.body)
				}
				if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("Content-Type %q", ct)
				}
			}
		})
	}
	// The open handler's answers, by code: 200 ×7, 503 ×5, 404 ×2, 400 ×2
	// (the closed and not-ready handlers count on registries of their own).
	const want = `
# HELP llmdiag_routable_answers_total Answers of GET /routable/{node} (the routability check for proxies' health checkers), by HTTP status code.
# TYPE llmdiag_routable_answers_total counter
llmdiag_routable_answers_total{code="200"} 7
llmdiag_routable_answers_total{code="400"} 2
llmdiag_routable_answers_total{code="404"} 2
llmdiag_routable_answers_total{code="503"} 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmdiag_routable_answers_total"); err != nil {
		t.Error(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
