package inferencepool

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

// TestReachCounts: a request the server failed or answered 5xx is counted
// failed, one it answered is counted answered, and one cancelled by its own
// context (an informer stopped to watch anew) is not counted at all.
func TestReachCounts(t *testing.T) {
	refused := errors.New("connection refused")
	cases := []struct {
		name     string
		cancel   bool
		status   int
		err      error
		failed   uint64
		answered uint64
	}{
		{name: "answered", status: 200, answered: 1},
		{name: "5xx", status: 503, failed: 1},
		{name: "no answer", err: refused, failed: 1},
		{name: "cancelled here", cancel: true, err: context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r reach
			rt := r.wrap(roundTripper(func(*http.Request) (*http.Response, error) {
				if c.err != nil {
					return nil, c.err
				}
				return &http.Response{StatusCode: c.status, Body: http.NoBody}, nil
			}))
			ctx, cancel := context.WithCancel(context.Background())
			if c.cancel {
				cancel()
			}
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.invalid/version", nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := rt.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
			if got := r.counts(); got.failed != c.failed || got.answered != c.answered {
				t.Errorf("counts %+v, want failed %d answered %d", got, c.failed, c.answered)
			}
		})
	}
}
