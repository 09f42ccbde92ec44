package combine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/combine"
)

type fake struct {
	obs []source.Observation
	err error
}

func (f fake) Refresh(context.Context, string) ([]source.Observation, error) { return f.obs, f.err }

func (f fake) Window(_ context.Context, node, _ string, _ time.Duration) (*llmdiagv1.NodeMetrics, error) {
	if f.err != nil {
		return nil, f.err
	}
	for _, o := range f.obs {
		if o.Node.ID == node {
			return o.Metrics, nil
		}
	}
	return nil, source.ErrUnknownNode
}

var t0 = time.Unix(1000, 0)

func obs(id string, at time.Time, m *llmdiagv1.NodeMetrics) source.Observation {
	m.Node, m.Up, m.ObservedAt = id, true, timestamppb.New(at)
	return source.Observation{Node: fleet.Node{ID: id}, Metrics: m}
}

func TestRefreshJoins(t *testing.T) {
	prom := fake{obs: []source.Observation{
		obs("a", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(9), Running: sample.F(10), GenerationTokensPerSecond: sample.F(100), E2E: &llmdiagv1.Distribution{Count: 5}}),
		obs("only-prom", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(1)}),
		obs("scrape-down", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(2)}),
	}}
	down := obs("scrape-down", t0.Add(time.Second), &llmdiagv1.NodeMetrics{Errors: []string{"connection refused"}})
	down.Metrics.Up = false
	scrape := fake{obs: []source.Observation{
		obs("a", t0.Add(4*time.Second), &llmdiagv1.NodeMetrics{Queue: sample.F(0), Running: sample.F(20), QueueRunningRatio: sample.F(0), KvPressure: sample.F(0.3)}),
		obs("only-scrape", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(3)}),
		down,
	}}
	got, err := combine.New(prom, scrape, combine.Options{}).Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]*llmdiagv1.NodeMetrics{}
	for _, o := range got {
		by[o.Node.ID] = o.Metrics
	}
	if len(by) != 4 {
		t.Fatalf("nodes %v", by)
	}
	a := by["a"]
	// Gauges from the scrape, history from Prometheus, per-request decode recomputed: 100/20.
	if a.GetQueue() != 0 || a.GetRunning() != 20 || a.GetKvPressure() != 0.3 || a.GetE2E().GetCount() != 5 || a.GetDecodeTokensPerSecondPerRequest() != 5 || !a.GetObservedAt().AsTime().Equal(t0.Add(4*time.Second)) {
		t.Fatalf("joined a = %v", a)
	}
	if by["scrape-down"].GetQueue() != 2 || !strings.Contains(strings.Join(by["scrape-down"].GetWarnings(), ""), "direct scrape failed") {
		t.Fatalf("a failed scrape must leave Prometheus's gauges, with a warning: %v", by["scrape-down"])
	}
	if by["only-prom"].GetQueue() != 1 || by["only-scrape"].GetQueue() != 3 {
		t.Fatalf("nodes one side knows: %v %v", by["only-prom"], by["only-scrape"])
	}
}

func TestPrometheusDownKeepsScrapedNodes(t *testing.T) {
	boom := errors.New("prometheus down")
	scrape := fake{obs: []source.Observation{obs("a", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(1)})}}
	c := combine.New(fake{err: boom}, scrape, combine.Options{})
	got, err := c.Refresh(context.Background(), "5m")
	if err != nil || len(got) != 1 || !strings.Contains(strings.Join(got[0].Metrics.GetWarnings(), ""), "prometheus down") {
		t.Fatalf("got %v, %v", got, err)
	}
	m, err := c.Window(context.Background(), "a", "1h", 0)
	if err != nil || !strings.Contains(strings.Join(m.GetWarnings(), ""), "prometheus down") {
		t.Fatalf("window fallback: %v, %v", m, err)
	}
	if _, err := combine.New(fake{err: boom}, fake{err: boom}, combine.Options{}).Refresh(context.Background(), "5m"); err == nil {
		t.Fatal("both down must fail the refresh")
	}
}

// TestWindowOverBudgetIsRefused: a request Prometheus refuses as over its
// query budget is refused, not quietly answered from the scrape ring.
func TestWindowOverBudgetIsRefused(t *testing.T) {
	over := fmt.Errorf("reading the 1h window: %w", source.ErrOverBudget)
	scrape := fake{obs: []source.Observation{obs("a", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(1)})}}
	m, err := combine.New(fake{err: over}, scrape, combine.Options{}).Window(context.Background(), "a", "1h", 0)
	if !errors.Is(err, source.ErrOverBudget) || m != nil {
		t.Fatalf("got %v, %v; want ErrOverBudget", m, err)
	}
}

func TestScrapeDownKeepsPrometheusNodes(t *testing.T) {
	boom := errors.New("scrape refresh cancelled")
	prom := fake{obs: []source.Observation{
		obs("a", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(1)}),
		{Node: fleet.Node{ID: "not-yet"}}, // known to Prometheus, nothing read yet
	}}
	got, err := combine.New(prom, fake{err: boom}, combine.Options{}).Refresh(context.Background(), "5m")
	if err != nil || len(got) != 2 {
		t.Fatalf("got %v, %v; want both Prometheus nodes", got, err)
	}
	if a := got[0].Metrics; a.GetQueue() != 1 || !strings.Contains(strings.Join(a.GetWarnings(), ""), "scrape refresh cancelled") {
		t.Fatalf("a: %v; want Prometheus's gauges with the scrape's failure in its warnings", a)
	}
	if len(prom.obs[0].Metrics.GetWarnings()) != 0 {
		t.Fatal("the warning was written into the history source's own observation")
	}
	if got[1].Node.ID != "not-yet" || got[1].Metrics != nil {
		t.Fatalf("not-yet: %v", got[1])
	}

	// A node Prometheus has nothing for yet takes the scrape's reading.
	scrape := fake{obs: []source.Observation{obs("not-yet", t0, &llmdiagv1.NodeMetrics{Queue: sample.F(4)})}}
	got, err = combine.New(prom, scrape, combine.Options{}).Refresh(context.Background(), "5m")
	if err != nil || len(got) != 2 || got[1].Metrics.GetQueue() != 4 {
		t.Fatalf("got %v, %v; want not-yet from the scrape", got, err)
	}
}
