package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store/memory"
	"github.com/llmdiag/llmdiag/telemetry"
)

// TestOffsetsShareReads: twenty requests for offsets a second apart are
// rounded to the step of the window (30s for the default 5m) and cost at
// most two reads of the source; the answers say the offset they used.
// Spellings of one window share a read.
func TestOffsetsShareReads(t *testing.T) {
	url, _, src := startServerAt(t, time.Now())
	c, _ := client.New(url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 20 {
		asked := time.Duration(40+i) * time.Second
		resp, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0", Offset: durationpb.New(asked)}))
		if err != nil {
			t.Fatal(err)
		}
		used := resp.Msg.GetMetrics().GetOffset().AsDuration()
		if used%(30*time.Second) != 0 || (used-asked).Abs() > 15*time.Second {
			t.Errorf("offset %v answered at %v: want the nearest multiple of 30s", asked, used)
		}
	}
	reads := src.windowReads()
	if want := []windowRead{{"5m", 30 * time.Second}, {"5m", time.Minute}}; !slices.Equal(reads, want) {
		t.Errorf("twenty offsets 40s…59s read the source as %v, want %v", reads, want)
	}

	for _, w := range []string{"60m", "3600s", "1h"} {
		resp, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0", Window: w}))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Msg.GetMetrics().GetWindow(); got != "1h" {
			t.Errorf("window %q answered as %q, want 1h", w, got)
		}
	}
	// The default window, spelled otherwise, and an offset that rounds to
	// none are the store's.
	for _, off := range []*durationpb.Duration{nil, durationpb.New(14 * time.Second)} {
		resp, err := c.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "glm-0", Window: "300s", Offset: off}))
		if err != nil {
			t.Fatal(err)
		}
		if off != nil && resp.Msg.GetMetrics().GetOffset().AsDuration() != 0 {
			t.Errorf("offset 14s answered at %v, want 0", resp.Msg.GetMetrics().GetOffset().AsDuration())
		}
	}
	if reads := src.windowReads(); len(reads) != 3 || reads[2] != (windowRead{"1h", 0}) {
		t.Errorf("reads %v: want one more, of 1h ending now", reads)
	}
}

// TestOnDemandStep: offsets are rounded to the larger of --offset-step and
// a tenth of the window rounded down to a round step.
func TestOnDemandStep(t *testing.T) {
	svc := serviceOver(t, &fakeSource{now: time.Now(), nodes: []fleet.Node{{ID: "a-0", Model: "m"}}}, server.Config{OffsetStep: 5 * time.Second})
	ctx := context.Background()
	for _, tc := range []struct {
		window      string
		asked, want time.Duration
	}{
		{"1m", 7 * time.Second, 5 * time.Second},         // a tenth is 6s: the 5s step
		{"1h", 8 * time.Minute, 10 * time.Minute},        // a tenth: 5m
		{"7d", 29 * time.Hour, 24 * time.Hour},           // a tenth is 16.8h: 12h
		{"7d", 7 * 24 * time.Hour, 7 * 24 * time.Hour},   // a whole week stays
		{"lifetime", 12 * time.Second, 10 * time.Second}, // the step alone
		{"10s", 2 * time.Second, 0},                      // rounds to now
	} {
		resp, err := svc.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "a-0", Window: tc.window, Offset: durationpb.New(tc.asked)}))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Msg.GetMetrics().GetOffset().AsDuration(); got != tc.want {
			t.Errorf("%s window, offset %v: read at %v, want %v", tc.window, tc.asked, got, tc.want)
		}
	}
	// A comparison says the offsets it used; a baseline is at least a step.
	resp, err := svc.ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{
		Metric: llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT, Window: "1h",
		Offset: durationpb.New(59 * time.Minute), BaselineOffset: durationpb.New(time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	if o, b := resp.Msg.GetOffset().AsDuration(), resp.Msg.GetBaselineOffset().AsDuration(); o != time.Hour || b != 5*time.Minute {
		t.Errorf("compare read at offset %v, baseline %v; want 1h and 5m", o, b)
	}
	for _, r := range resp.Msg.GetRows() {
		if r.GetOffset().AsDuration() != 0 && r.GetOffset().AsDuration() != 5*time.Minute {
			t.Errorf("row %s offset %v", r.GetSubject(), r.GetOffset().AsDuration())
		}
	}
}

// chargingSource charges cost queries to the request's budget for every
// window it reads.
type chargingSource struct {
	*fakeSource
	cost int
}

func (c chargingSource) Window(ctx context.Context, node, window string, offset time.Duration) (*llmdiagv1.NodeMetrics, error) {
	if err := source.BudgetOf(ctx).Charge(c.cost, "a test read"); err != nil {
		return nil, err
	}
	return c.fakeSource.Window(ctx, node, window, offset)
}

// TestOverBudgetIsResourceExhausted: a request whose reads would go past
// its query budget is refused with ResourceExhausted naming the budget and
// the flag that sets it; a baseline over budget fails the comparison
// rather than leaving a note.
func TestOverBudgetIsResourceExhausted(t *testing.T) {
	src := chargingSource{fakeSource: &fakeSource{now: time.Now(), nodes: []fleet.Node{{ID: "a-0", Model: "m"}, {ID: "a-1", Model: "m"}}}, cost: 100}
	svc := serviceOver(t, src, server.Config{RequestQueryBudget: 150})
	ctx := context.Background()
	ttft := llmdiagv1.LatencyMetric_LATENCY_METRIC_TTFT

	if _, err := svc.GetNodeMetrics(ctx, connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: "a-0", Window: "1h"})); err != nil {
		t.Fatalf("one read of 100 within a budget of 150: %v", err)
	}
	for name, req := range map[string]*llmdiagv1.ComparePercentilesRequest{
		"two nodes":         {Metric: ttft, Window: "2h"},
		"now plus baseline": {Metric: ttft, Window: "3h", Nodes: []string{"a-0"}, BaselineOffset: durationpb.New(time.Hour)},
	} {
		_, err := svc.ComparePercentiles(ctx, connect.NewRequest(req))
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
			t.Fatalf("%s: err = %v, want resource_exhausted", name, err)
		}
		if msg := ce.Message(); !strings.Contains(msg, "budget of 150") || !strings.Contains(msg, "--max-request-queries") {
			t.Errorf("%s: %q does not name the budget and its flag", name, msg)
		}
	}
}

// serviceOver is a service over a memory store filled by one refresh of
// src, with cfg's default window 5m and staleness limit 30s.
func serviceOver(t *testing.T, src source.Source, cfg server.Config) *server.Service {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tm, err := telemetry.New(prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	th := diagnose.DefaultThresholds()
	st := memory.New(memory.Options{}, "ondemand")
	if err := refresh.New(src, st, tm, log, time.Now, refresh.Config{Window: metrics.DefaultWindow, Thresholds: th}).Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg.DefaultWindow, cfg.StaleAfter, cfg.Thresholds = metrics.DefaultWindow, 30*time.Second, th
	return server.NewService(st, src, log, time.Now, cfg, ctx.Done())
}
