package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/sim"
	"github.com/llmdiag/llmdiag/source/scrape"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// simExpositions answers GET http://sim/<node>/metrics with the simulated
// node's exposition at the current simulated instant.
type simExpositions struct{ f *sim.Fleet }

func (s simExpositions) RoundTrip(req *http.Request) (*http.Response, error) {
	id := strings.TrimSuffix(strings.TrimPrefix(req.URL.Path, "/"), "/metrics")
	body, err := s.f.Metrics(id)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"text/plain; version=0.0.4"}},
		Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

// TestStreamHealthStalled runs the stalled scenario through the real
// pipeline (simulator → scrape → refresh → memory store → StreamHealth
// over gRPC) in simulated time, a refresh every 5 s from a minute before
// the hang to a minute into it. A subscriber sees the hung node turn CRIT,
// STALLED and not routable by the third refresh of the hang
// (stalled_refreshes), having seen it OK and routable before, and the peer
// never leave OK; a subscriber that comes later gets the hung node's
// initial state CRIT, STALLED, not routable.
func TestStreamHealthStalled(t *testing.T) {
	const hung, peer = "qwen3-8b-0", "qwen3-8b-1"
	const every = 5 * time.Second
	cfg := simtest.Scenario(t, "stalled", 1)
	cfg.Warmup = 2 * time.Minute
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(cfg.Warmup + sim.StalledAt - time.Minute)
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testkit.NewClock(epoch.Add(f.Now()))

	targets := f.FleetFile().Nodes
	byID := map[string]fleet.Node{}
	for i := range targets {
		targets[i].URL = "http://sim/" + targets[i].ID + "/metrics"
		byID[targets[i].ID] = targets[i]
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	th := diagnose.DefaultThresholds()
	th.StaleAfter = 30 * time.Second
	st := memory.New(memory.Options{Now: clk.Now, FeedLen: 1 << 12}, "stalled")
	scraper := scrape.New(targets, &http.Client{Transport: simExpositions{f}}, log, clk.Now, scrape.Options{StaleAfter: th.StaleAfter})
	tm, _ := telemetry.New(prometheus.NewRegistry(), clk.Now)
	loop := refresh.New(scraper, st, tm, log, clk.Now, refresh.Config{Interval: every, Window: metrics.DefaultWindow, Thresholds: th, Fleet: byID})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := loop.Once(ctx); err != nil {
		t.Fatal(err)
	}
	// Staleness is not what this test is about: the events are read after
	// the last refresh, a minute of simulated time later than the first.
	srv := servertest.Start(t, servertest.Options{Store: st, Now: clk.Now,
		Config: server.Config{StaleAfter: time.Hour, MinHeartbeat: time.Second, Thresholds: th}})
	c, err := client.New(srv.URL, client.WithProtocol(client.ProtocolGRPC))
	if err != nil {
		t.Fatal(err)
	}
	req := &llmdiagv1.StreamHealthRequest{Nodes: []string{hung, peer}, HeartbeatInterval: durationpb.New(time.Second)}
	recv := streamRecv(t, ctx, c, req)
	initial := map[string]*llmdiagv1.NodeHealth{}
	for m := recv(); m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED; m = recv() {
		initial[m.GetHealth().GetNode()] = m.GetHealth()
	}
	for _, id := range []string{hung, peer} {
		if h := initial[id]; h.GetStatus() != llmdiagv1.Status_STATUS_OK || !h.GetRoutable() {
			t.Fatalf("initial %s: %v", id, h)
		}
	}

	hangAt := epoch.Add(cfg.Warmup + sim.StalledAt)
	for f.Now() < cfg.Warmup+sim.StalledAt+time.Minute {
		f.Step(every)
		clk.Set(epoch.Add(f.Now()))
		if err := loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}

	due := hangAt.Add(time.Duration(th.StalledRefreshes-1) * every) // the third refresh of the hang, which starts on one
	var stalled *llmdiagv1.NodeHealth
	for stalled == nil {
		m := recv()
		h := m.GetHealth()
		if m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_CHANGE {
			continue
		}
		at := h.GetObservedAt().AsTime()
		switch {
		case h.GetNode() == peer && (h.GetStatus() != llmdiagv1.Status_STATUS_OK || !h.GetRoutable()):
			t.Errorf("the peer changed to %v, %v, routable %v at %v", h.GetStatus(), h.GetRootCause(), h.GetRoutable(), at.Sub(hangAt))
		case h.GetNode() == hung && h.GetRootCause() == llmdiagv1.Cause_CAUSE_STALLED:
			stalled = h
		case h.GetNode() == hung && at.Before(hangAt) && !h.GetRoutable():
			t.Errorf("the hung node was not routable (%v) %v before its hang", h.GetRootCause(), hangAt.Sub(at))
		}
	}
	if at := stalled.GetObservedAt().AsTime(); at.After(due) {
		t.Errorf("STALLED first streamed as observed %v into the hang: want by %v (refresh %d)", at.Sub(hangAt), due.Sub(hangAt), th.StalledRefreshes)
	}
	if stalled.GetStatus() != llmdiagv1.Status_STATUS_CRIT || stalled.GetRoutable() {
		t.Errorf("STALLED streamed as %v, routable %v: want CRIT, not routable", stalled.GetStatus(), stalled.GetRoutable())
	}

	late := streamRecv(t, ctx, c, req)
	for m := late(); m.GetKind() != llmdiagv1.EventKind_EVENT_KIND_SYNCED; m = late() {
		h := m.GetHealth()
		want := struct {
			status   llmdiagv1.Status
			cause    llmdiagv1.Cause
			routable bool
		}{llmdiagv1.Status_STATUS_OK, llmdiagv1.Cause_CAUSE_HEALTHY, true}
		if h.GetNode() == hung {
			want.status, want.cause, want.routable = llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_STALLED, false
		}
		if h.GetStatus() != want.status || h.GetRootCause() != want.cause || h.GetRoutable() != want.routable {
			t.Errorf("a minute into the hang, a new subscriber gets %s %v %v routable %v: want %v %v routable %v",
				h.GetNode(), h.GetStatus(), h.GetRootCause(), h.GetRoutable(), want.status, want.cause, want.routable)
		}
	}
}
