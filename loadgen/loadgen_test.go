package loadgen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/loadgen"
)

func dist(t *testing.T, s string) loadgen.Dist {
	t.Helper()
	d, err := loadgen.ParseDist(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseDist(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for s, in := range map[string][2]int{"7": {7, 7}, "10-20": {10, 20}, "0.5:3,0.5:100-200": {3, 200}} {
		d := dist(t, s)
		for range 1000 {
			if x := d.Sample(rng); x < in[0] || x > in[1] {
				t.Fatalf("%s drew %d", s, x)
			}
		}
	}
	d := dist(t, "100~0.5")
	below := 0
	for range 10000 {
		if d.Sample(rng) < 100 {
			below++
		}
	}
	if below < 4700 || below > 5300 {
		t.Errorf("log-normal median 100: %d of 10000 below it", below)
	}
	for _, bad := range []string{"", "0", "x", "5-2", "0:10", "100~0", "-1", "1:2:3"} {
		if _, err := loadgen.ParseDist(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// knownServer answers request i (from 0): i%5 == 0 with 429, i%5 == 1
// after 2 s (past the client's timeout), the others after 50 ms, streaming
// the first token at 20 ms.
func knownServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt    string `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
			Stream    bool   `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/completions" ||
			len(req.Prompt) != 4*8 || req.MaxTokens != 3 {
			http.Error(w, fmt.Sprintf("unexpected request %s %+v %v", r.URL.Path, req, err), 400)
			return
		}
		wait := func(d time.Duration) bool {
			select {
			case <-time.After(d):
				return true
			case <-r.Context().Done():
				return false
			}
		}
		switch (n.Add(1) - 1) % 5 {
		case 0:
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case 1:
			wait(2 * time.Second)
			return
		}
		if !req.Stream {
			if wait(50 * time.Millisecond) {
				io.WriteString(w, `{"choices":[{"text":" a b c"}]}`)
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"\"}]}\n\n") // no content yet
		w.(http.Flusher).Flush()
		if !wait(20 * time.Millisecond) {
			return
		}
		io.WriteString(w, "data: {\"choices\":[{\"text\":\" a\"}]}\n\n")
		w.(http.Flusher).Flush()
		if wait(30 * time.Millisecond) {
			io.WriteString(w, "data: {\"choices\":[{\"text\":\" b\"}]}\n\ndata: [DONE]\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestStatistics(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			srv, n := knownServer(t)
			res, err := loadgen.Run(context.Background(), loadgen.Config{
				URL: srv.URL, Rate: 200, Duration: 5 * time.Second, MaxRequests: 20,
				Prompt: dist(t, "8"), Output: dist(t, "3"), Stream: stream, Timeout: 300 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent != 20 || n.Load() != 20 || res.Skipped != 0 || res.Succeeded != 12 ||
				res.Failures["http 429"] != 4 || res.Failures["timeout"] != 4 || len(res.Failures) != 2 {
				t.Fatalf("result %+v, want 20 sent: 12 ok, 4 × 429, 4 timeouts", res)
			}
			if res.E2E.N != 12 || res.E2E.P50 < 0.050 || res.E2E.P99 > 0.300 || res.E2E.P50 > res.E2E.P90 || res.E2E.P90 > res.E2E.P99 {
				t.Errorf("E2E %+v, want 12 from 50 ms up", res.E2E)
			}
			if stream != (res.TTFT != nil) {
				t.Fatalf("TTFT %v with stream %v", res.TTFT, stream)
			}
			if stream && (res.TTFT.N != 12 || res.TTFT.P50 < 0.020 || res.TTFT.P50 >= res.E2E.P50) {
				t.Errorf("TTFT %+v, want 12 from 20 ms, under E2E %+v", res.TTFT, res.E2E)
			}
			// Over all 20: the 4 refused at once, the 12 answered, and
			// the 4 timeouts at the 300 ms they waited, the top 20%.
			if stream != (res.TTFTAll != nil) {
				t.Fatalf("TTFT over all %v with stream %v", res.TTFTAll, stream)
			}
			if stream && (res.TTFTAll.N != 20 || res.TTFTAll.P50 > res.TTFT.P90 || res.TTFTAll.P90 < 0.300 || res.TTFTAll.Max > 1) {
				t.Errorf("TTFT over all %+v, want 20, the top 20%% at the 300 ms timeout", res.TTFTAll)
			}
			if res.E2EAll.N != 20 || res.E2EAll.P90 < 0.300 || res.E2EAll.Max > 1 {
				t.Errorf("E2E over all %+v, want 20, the top 20%% at the 300 ms timeout", res.E2EAll)
			}
			var table, js bytes.Buffer
			res.WriteTable(&table)
			json.NewEncoder(&js).Encode(res)
			for _, want := range []string{"TTFT", "E2E", "failed: http 429", "failed: timeout"} {
				if want == "TTFT" && !stream {
					continue
				}
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
			if !strings.Contains(js.String(), `"e2e_seconds":{"n":12`) {
				t.Errorf("JSON %s", js.String())
			}
		})
	}
}

func TestConnectionErrorsAndInFlightCap(t *testing.T) {
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		URL: "http://" + testkit.ClosedAddr(t) + "/v1/completions", Rate: 500, Duration: time.Second, MaxRequests: 5,
		Prompt: dist(t, "8"), Output: dist(t, "3"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 5 || res.Failures["connection"] != 5 || res.Succeeded != 0 {
		t.Errorf("closed port: %+v, want 5 connection errors", res)
	}

	// Requests held 300 ms, arrivals for 200 ms, two in flight at most: the
	// first two are sent, every later arrival skipped.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(300 * time.Millisecond):
			io.WriteString(w, `{"choices":[{"text":"x"}]}`)
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	res, err = loadgen.Run(context.Background(), loadgen.Config{
		URL: srv.URL, Rate: 200, Duration: 200 * time.Millisecond, MaxInFlight: 2,
		Prompt: dist(t, "8"), Output: dist(t, "3"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 2 || res.Succeeded != 2 || res.Skipped < 10 {
		t.Errorf("in-flight cap 2: %+v, want 2 sent and the rest skipped", res)
	}
}

func TestBounds(t *testing.T) {
	ok := loadgen.Config{URL: "http://127.0.0.1:1/v1/completions", Rate: 1, Duration: time.Second,
		Prompt: loadgen.Dist{{Weight: 1, Lo: 1, Hi: 1}}, Output: loadgen.Dist{{Weight: 1, Lo: 1, Hi: 1}}}
	for name, edit := range map[string]func(*loadgen.Config){
		"rate":     func(c *loadgen.Config) { c.Rate = loadgen.MaxRate + 1 },
		"no rate":  func(c *loadgen.Config) { c.Rate = 0 },
		"duration": func(c *loadgen.Config) { c.Duration = 2 * loadgen.MaxDuration },
		"inflight": func(c *loadgen.Config) { c.MaxInFlight = loadgen.MaxInFlightLimit + 1 },
		"scheme":   func(c *loadgen.Config) { c.URL = "ftp://x/" },
	} {
		c := ok
		edit(&c)
		if _, err := loadgen.Run(context.Background(), c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
