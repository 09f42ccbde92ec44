package scrape_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/source"
	"github.com/llmdiag/llmdiag/source/scrape"
)

// TestSetTargets: a target added is scraped from the next Refresh; one
// removed is no longer observed and its samples are forgotten; one kept
// keeps its samples.
func TestSetTargets(t *testing.T) {
	srv := serveFile(t, "../../engine/testdata/vllm-dp2.prom")
	url := srv.URL + "/metrics"
	s := scrape.New([]fleet.Node{{ID: "a", URL: url}, {ID: "b", URL: url}}, nil, slog.New(slog.DiscardHandler), time.Now, scrape.Options{Timeout: 2 * time.Second})
	ids := func() []string {
		t.Helper()
		obs, err := s.Refresh(context.Background(), "5m")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range obs {
			if !o.Metrics.GetUp() {
				t.Errorf("%s not up: %v", o.Node.ID, o.Metrics.GetErrors())
			}
			out = append(out, o.Node.ID)
		}
		return out
	}
	if got := ids(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first refresh: %v", got)
	}
	s.SetTargets([]fleet.Node{{ID: "c", URL: url}, {ID: "b", URL: url}})
	if got := ids(); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("after SetTargets: %v, want [b c]", got)
	}
	if _, err := s.Window(context.Background(), "a", "5m", 0); !errors.Is(err, source.ErrUnknownNode) {
		t.Errorf("Window of a removed target: %v, want ErrUnknownNode", err)
	}
	// b kept its first sample: two now, so a window has a base.
	m, err := s.Window(context.Background(), "b", "5m", 0)
	if err != nil || m.GetCovered() == nil {
		t.Errorf("Window of a kept target: %v, covered %v; want two samples", err, m.GetCovered())
	}
	if got := s.Targets(); len(got) != 2 || got[0].ID != "b" {
		t.Errorf("Targets: %v", got)
	}
}
