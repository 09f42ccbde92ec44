package scrape_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/source/scrape"
)

// TestScrapeTimedWhenTheNodeAnswered: a scrape is timed when the node
// answered (its headers came), not when its body had been read: values
// read late (a trickling body, a busy llmdiag, a wait for a parse slot)
// must not look newer than a read begun after them. The node sends its
// headers, then its body only once the scraper has read the clock after
// them (or after 2 s), having moved the clock on by 30 s.
func TestScrapeTimedWhenTheNodeAnswered(t *testing.T) {
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	late := early.Add(30 * time.Second)
	var clock atomic.Pointer[time.Time]
	clock.Store(&early)
	var answered atomic.Bool
	read := make(chan struct{}, 1) // the clock was read after the headers were sent
	now := func() time.Time {
		if answered.Load() {
			select {
			case read <- struct{}{}:
			default:
			}
		}
		return *clock.Load()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		answered.Store(true)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
			return
		}
		clock.Store(&late)
		io.WriteString(w, truncatedHistogram)
	}))
	t.Cleanup(srv.Close)
	s := scrape.New([]fleet.Node{{ID: "a", URL: srv.URL, Model: "m"}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), now, scrape.Options{Timeout: 10 * time.Second})
	obs, err := s.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 1 || !obs[0].Metrics.GetUp() {
		t.Fatalf("observations %v, want node a up", obs)
	}
	if got := obs[0].Metrics.GetObservedAt().AsTime(); !got.Equal(early) {
		t.Errorf("observed at %v, want %v, when the node answered (the body was read at %v)", got, early, late)
	}
}
