package refresh_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/store/memory"
)

// scripted returns, on each refresh, the next state of one node.
type scripted struct {
	now    *time.Time
	states []func(m *llmdiagv1.NodeMetrics)
	i      int
}

func (s *scripted) Window(context.Context, string, string, time.Duration) (*llmdiagv1.NodeMetrics, error) {
	return nil, source.ErrUnknownNode
}

func (s *scripted) Refresh(context.Context, string) ([]source.Observation, error) {
	m := &llmdiagv1.NodeMetrics{
		Node: "n", Model: "m", Window: "5m", Up: true, ObservedAt: timestamppb.New(*s.now),
		Queue: sample.F(0), Running: sample.F(10), QueueRunningRatio: sample.F(0), KvPressure: sample.F(0.3),
		PromptTokensPerSecond: sample.F(1000), GenerationTokensPerSecond: sample.F(500), DecodeTokensPerSecondPerRequest: sample.F(50),
		PreemptionsPerSecond: sample.F(0),
	}
	s.states[min(s.i, len(s.states)-1)](m)
	s.i++
	return []source.Observation{{Node: fleet.Node{ID: "n", URL: "http://scraper:s3cret@x/metrics"}, Metrics: m, Sample: &sample.Sample{DataParallel: 2}}}, nil
}

type nopRecorder struct{ refreshes, errors int }

func (r *nopRecorder) ObserveRefresh(_ time.Duration, err error) {
	r.refreshes++
	if err != nil {
		r.errors++
	}
}
func (r *nopRecorder) SetNodeStatuses(map[llmdiagv1.Status]int) {}
func (r *nopRecorder) ObserveNodeSet(refresh.NodeSet)           {}

func TestLoopPublishesOnlyChanges(t *testing.T) {
	now := time.Unix(1000, 0)
	same := func(*llmdiagv1.NodeMetrics) {}
	kvFull := func(m *llmdiagv1.NodeMetrics) { m.KvPressure = sample.F(0.99) }
	down := func(m *llmdiagv1.NodeMetrics) { m.Up = false; m.Errors = []string{"connection refused"} }
	src := &scripted{now: &now, states: []func(*llmdiagv1.NodeMetrics){same, same, kvFull, kvFull, down}}
	st := memory.New(memory.Options{HistoryLen: 3}, "t")
	rec := &nopRecorder{}
	loop := refresh.New(src, st, rec, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, refresh.Config{Thresholds: diagnose.DefaultThresholds()})
	ctx := context.Background()
	start, _ := st.LastToken(ctx)
	var firstSeen *timestamppb.Timestamp
	for i := range 5 {
		if err := loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			r, _ := st.Get(ctx, "n")
			firstSeen = r.Node.GetLastSeen()
		}
		now = now.Add(5 * time.Second)
	}
	evs, err := st.Events(ctx, start, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []llmdiagv1.Cause
	for _, ev := range evs {
		got = append(got, ev.Health.GetRootCause())
	}
	// The first refresh with the KV cache full is not yet KV_EXHAUSTED
	// (routing_hold): its KV finding is WARN, which no cause explains.
	want := []llmdiagv1.Cause{llmdiagv1.Cause_CAUSE_HEALTHY, llmdiagv1.Cause_CAUSE_UNEXPLAINED, llmdiagv1.Cause_CAUSE_KV_EXHAUSTED, llmdiagv1.Cause_CAUSE_TARGET_DOWN}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	r, err := st.Get(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	// The node's URL is stored, and so answered, without its password.
	if r.Node.GetUrl() != "http://scraper:xxxxx@x/metrics" {
		t.Fatalf("stored url %q, want the password redacted", r.Node.GetUrl())
	}
	if r.Node.GetStatus() != llmdiagv1.Status_STATUS_DOWN || r.Node.GetRoutable() {
		t.Fatalf("down node: status %v routable %v", r.Node.GetStatus(), r.Node.GetRoutable())
	}
	// Last seen stays at the last successful read; the profile takes DP from the metrics.
	if !r.Node.GetLastSeen().AsTime().Equal(firstSeen.AsTime()) || r.Node.GetProfile().GetDataParallel() != 2 {
		t.Fatalf("last seen %v (want %v), DP %d", r.Node.GetLastSeen().AsTime(), firstSeen.AsTime(), r.Node.GetProfile().GetDataParallel())
	}
	h, _ := st.History(ctx, "n")
	if len(h) != 3 || h[2].Up || h[2].Status != llmdiagv1.Status_STATUS_DOWN {
		t.Fatalf("history %+v", h)
	}
	if rec.refreshes != 5 || rec.errors != 0 {
		t.Fatalf("recorder saw %d refreshes, %d errors", rec.refreshes, rec.errors)
	}
}

func TestChanged(t *testing.T) {
	base := &llmdiagv1.NodeHealth{Status: llmdiagv1.Status_STATUS_OK, Routable: true, LoadScore: 0.5}
	tests := []struct {
		name string
		edit func(h *llmdiagv1.NodeHealth)
		want bool
	}{
		{"same", func(*llmdiagv1.NodeHealth) {}, false},
		{"small score move", func(h *llmdiagv1.NodeHealth) { h.LoadScore = 0.55 }, false},
		{"score move at threshold", func(h *llmdiagv1.NodeHealth) { h.LoadScore = 0.625 }, true},
		{"status", func(h *llmdiagv1.NodeHealth) { h.Status = llmdiagv1.Status_STATUS_WARN }, true},
		{"routable", func(h *llmdiagv1.NodeHealth) { h.Routable = false }, true},
		{"cause", func(h *llmdiagv1.NodeHealth) { h.RootCause = llmdiagv1.Cause_CAUSE_BURST }, true},
	}
	for _, tc := range tests {
		b := &llmdiagv1.NodeHealth{Status: base.Status, Routable: base.Routable, LoadScore: base.LoadScore}
		tc.edit(b)
		if got := refresh.Changed(base, b, 0.125); got != tc.want {
			t.Errorf("%s: Changed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPointOfTakesMeansOnlyFromCoveredWindows(t *testing.T) {
	mean := sample.F(12)
	tests := []struct {
		window  string
		covered time.Duration
		want    bool
	}{
		{"lifetime", 0, false},
		{"5m", 10 * time.Second, false},
		{"5m", 5 * time.Minute, true},
		{"1m", 55 * time.Second, true},
	}
	for _, tc := range tests {
		e2e := &llmdiagv1.Distribution{Mean: mean, Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.5, Value: 10}, {Quantile: 0.95, Value: 20}, {Quantile: 0.99, Value: 30}}}
		m := &llmdiagv1.NodeMetrics{Window: tc.window, Covered: durationpb.New(tc.covered), Queue: sample.F(1), E2E: e2e, GenerationTokensPerSecond: sample.F(5)}
		p := refresh.PointOf(m)
		if (p.E2EMean != nil) != tc.want || (p.E2EP99 != nil) != tc.want || (p.GenerationRate != nil) != tc.want || p.Queue == nil {
			t.Errorf("%s covered %v: mean %v P99 %v rate %v queue %v; want window figures %v", tc.window, tc.covered, p.E2EMean, p.E2EP99, p.GenerationRate, p.Queue, tc.want)
		}
		if tc.want && *p.E2EP99 != 30 {
			t.Errorf("%s covered %v: E2EP99 %v, want the 0.99 percentile, 30", tc.window, tc.covered, *p.E2EP99)
		}
	}
	// No E2E histogram at all (a target serving junk) must not panic.
	_ = refresh.PointOf(&llmdiagv1.NodeMetrics{Window: "5m", Covered: durationpb.New(5 * time.Minute)})
}

func TestPointOfE2EP99(t *testing.T) {
	tests := []struct {
		name string
		pcts []*llmdiagv1.Percentile
		want *float64
	}{
		{"no percentiles", nil, nil},
		{"no P99", []*llmdiagv1.Percentile{{Quantile: 0.5, Value: 1}}, nil},
		{"no observations (NaN)", []*llmdiagv1.Percentile{{Quantile: 0.99, Value: math.NaN()}}, nil},
		{"rounded to float32", []*llmdiagv1.Percentile{{Quantile: 0.95, Value: 2}, {Quantile: 0.99, Value: 0.1}}, sample.F(float64(float32(0.1)))},
		{"in the last bucket: the largest finite bound", []*llmdiagv1.Percentile{{Quantile: 0.99, Value: 7680, UpperBound: math.Inf(1)}}, sample.F(7680)},
	}
	for _, tc := range tests {
		m := &llmdiagv1.NodeMetrics{Window: "5m", Covered: durationpb.New(5 * time.Minute), E2E: &llmdiagv1.Distribution{Percentiles: tc.pcts}}
		got := refresh.PointOf(m).E2EP99
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: E2EP99 = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPointOfRoundsToMillisecondsAndFloat32(t *testing.T) {
	tests := []struct {
		name string
		in   *float64
		want *float64 // nil: want nil
	}{
		{"unknown stays unknown", nil, nil},
		{"whole number kept", sample.F(7), sample.F(7)},
		{"rounded to float32", sample.F(0.1), sample.F(float64(float32(0.1)))},
		{"beyond float32 kept", sample.F(1e300), sample.F(1e300)},
		{"NaN kept", sample.F(math.NaN()), sample.F(math.NaN())},
	}
	at := time.Date(2026, 11, 30, 12, 0, 5, 123_456_789, time.UTC)
	for _, tc := range tests {
		m := &llmdiagv1.NodeMetrics{ObservedAt: timestamppb.New(at), Window: "1m", Covered: durationpb.New(time.Minute),
			Queue: tc.in, Running: tc.in, KvPressure: tc.in, GenerationTokensPerSecond: tc.in, E2E: &llmdiagv1.Distribution{Mean: tc.in}}
		p := refresh.PointOf(m)
		if want := at.Truncate(time.Millisecond); !p.At.Equal(want) {
			t.Errorf("%s: At = %v, want %v", tc.name, p.At, want)
		}
		for i, got := range []*float64{p.Queue, p.Running, p.KVPressure, p.GenerationRate, p.E2EMean} {
			switch {
			case tc.want == nil && got != nil:
				t.Errorf("%s: gauge %d = %v, want unknown", tc.name, i, *got)
			case tc.want != nil && (got == nil || math.Float64bits(*got) != math.Float64bits(*tc.want) && !(math.IsNaN(*got) && math.IsNaN(*tc.want))):
				t.Errorf("%s: gauge %d = %v, want %v", tc.name, i, got, *tc.want)
			}
		}
	}
}

func TestFleetFileCompletesSourceNodes(t *testing.T) {
	now := time.Unix(1000, 0)
	src := &scripted{now: &now, states: []func(*llmdiagv1.NodeMetrics){func(m *llmdiagv1.NodeMetrics) { m.Model = "" }}}
	st := memory.New(memory.Options{}, "t")
	loop := refresh.New(src, st, &nopRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, refresh.Config{
		Thresholds: diagnose.DefaultThresholds(),
		Fleet:      map[string]fleet.Node{"n": {ID: "n", Model: "deepseek-v4", Profile: fleet.Profile{DataParallel: 8, ActiveParamsBillions: 37}}},
	})
	if err := loop.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(context.Background(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if r.Node.GetModel() != "deepseek-v4" || r.Metrics.GetModel() != "deepseek-v4" || r.Node.GetProfile().GetDataParallel() != 8 || r.Node.GetProfile().GetActiveParamsBillions() != 37 {
		t.Fatalf("node %v, metrics model %q", r.Node, r.Metrics.GetModel())
	}
}

func TestProfileInfersDegreesFromRanks(t *testing.T) {
	tests := []struct {
		name    string
		fleet   fleet.Profile
		dp, tp  int
		pp, ep  int
		wantDP  uint32
		wantTP  uint32
		wantPP  uint32
		wantEP  uint32
		wantGPU string
	}{
		{name: "nothing seen"},
		{name: "vLLM engine cores", dp: 4, wantDP: 4},
		{name: "SGLang ranks", dp: 2, tp: 4, pp: 2, ep: 4, wantDP: 2, wantTP: 4, wantPP: 2, wantEP: 4},
		// SGLang exports from rank 0 only by default: one rank is no degree.
		{name: "one rank says nothing", tp: 1, pp: 1, ep: 1},
		{name: "fleet file wins", fleet: fleet.Profile{TensorParallel: 8, GPU: "H100"}, tp: 2, ep: 8, wantTP: 8, wantEP: 8, wantGPU: "H100"},
	}
	for _, tc := range tests {
		o := source.Observation{
			Node:   fleet.Node{ID: "n", Profile: tc.fleet},
			Sample: &sample.Sample{DataParallel: tc.dp, TensorParallel: tc.tp, PipelineParallel: tc.pp, ExpertParallel: tc.ep},
		}
		p := refresh.Profile(o)
		if p.GetDataParallel() != tc.wantDP || p.GetTensorParallel() != tc.wantTP || p.GetPipelineParallel() != tc.wantPP ||
			p.GetExpertParallel() != tc.wantEP || p.GetGpu() != tc.wantGPU {
			t.Errorf("%s: profile %v, want DP %d TP %d PP %d EP %d GPU %q", tc.name, p, tc.wantDP, tc.wantTP, tc.wantPP, tc.wantEP, tc.wantGPU)
		}
	}
}

// TestFeedFollowsTheHold: the health feed a router watches changes routing
// only as the hysteresis allows: once into saturation and once out of it
// for a KV cache that dips below its critical level for one refresh in
// between, and never for a one-refresh spike.
func TestFeedFollowsTheHold(t *testing.T) {
	now := time.Unix(1000, 0)
	kv := func(v float64) func(*llmdiagv1.NodeMetrics) {
		return func(m *llmdiagv1.NodeMetrics) { m.KvPressure = sample.F(v) }
	}
	var states []func(*llmdiagv1.NodeMetrics)
	for _, run := range []struct {
		n  int
		kv float64
	}{{3, 0.5}, {3, 1.0}, {1, 0.875}, {3, 1.0}, {1, 0.875}, {2, 1.0}, {4, 0.5}, {1, 1.0}, {4, 0.5}} {
		for range run.n {
			states = append(states, kv(run.kv))
		}
	}
	src := &scripted{now: &now, states: states}
	st := memory.New(memory.Options{}, "t")
	loop := refresh.New(src, st, &nopRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return now }, refresh.Config{Thresholds: diagnose.DefaultThresholds()})
	ctx := context.Background()
	start, _ := st.LastToken(ctx)
	for range states {
		if err := loop.Once(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(5 * time.Second)
	}
	evs, err := st.Events(ctx, start, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var routable []bool
	for _, ev := range evs {
		if r := ev.Health.GetRoutable(); len(routable) == 0 || routable[len(routable)-1] != r {
			routable = append(routable, r)
		}
		if ev.Health.GetLoadScore() > 1 == ev.Health.GetRoutable() {
			t.Errorf("event %v: routable %v with load score %v", ev.Health.GetRootCause(), ev.Health.GetRoutable(), ev.Health.GetLoadScore())
		}
	}
	if want := []bool{true, false, true}; len(routable) != len(want) || routable[0] != want[0] || routable[1] != want[1] || routable[2] != want[2] {
		t.Errorf("routable along the feed %v, want %v (%d events)", routable, want, len(evs))
	}
}
