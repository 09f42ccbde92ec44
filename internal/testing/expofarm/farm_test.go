package expofarm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/sim"
)

// TestExpofarmChild is the farm of StartChild's tests, in the child
// process; elsewhere it skips.
func TestExpofarmChild(t *testing.T) { ServeChild(t) }

var testSteps = Steps{
	Period:  4 * time.Second,
	Stagger: time.Second,
	Low:     Gauges{Waiting: 0, Running: 13, KVUsage: 0.1},
	High:    Gauges{Waiting: 37, Running: 64, KVUsage: 0.9},
}

// read parses body as engine.Parse and Extract do in the scraper.
func read(t testing.TB, body []byte, at time.Time) *sample.Sample {
	t.Helper()
	exp, err := engine.Parse(bytes.NewReader(body), engine.Limits{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if len(exp.Warnings) > 0 {
		t.Errorf("parse warnings: %v", exp.Warnings)
	}
	eng := engine.Detect(exp.Families)
	if eng != llmdiagv1.Engine_ENGINE_VLLM {
		t.Fatalf("detected %v, want vLLM", eng)
	}
	return engine.Extract(eng, exp.Families, at)
}

func checkGauges(t testing.TB, s *sample.Sample, want Gauges) {
	t.Helper()
	for _, c := range []struct {
		name      string
		got       *float64
		want, tol float64
	}{
		{"Queue", s.Queue, float64(want.Waiting), 0},
		{"Running", s.Running, float64(want.Running), 0},
		{"KVUsage", s.KVUsage, want.KVUsage, 1e-12}, // capacity-weighted over the cores
	} {
		if c.got == nil {
			t.Errorf("%s unknown, want %v", c.name, c.want)
		} else if math.Abs(*c.got-c.want) > c.tol {
			t.Errorf("%s %v, want %v", c.name, *c.got, c.want)
		}
	}
}

// TestBody: at each time, a node's body parses into vLLM with its
// scheduled gauges, and into nothing else than the unpatched body does.
func TestBody(t *testing.T) {
	var now time.Time
	f, err := New(Config{Nodes: 3, Schedule: testSteps, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	seedAt := time.Unix(1e9, 0)
	seed := read(t, seedBody, seedAt)
	sec := func(s float64) time.Time { return time.Unix(0, 0).Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		node int
		at   time.Time
		want Gauges
	}{
		{0, sec(0.5), testSteps.High},
		{0, sec(2.5), testSteps.Low},
		{1, sec(0.5), testSteps.Low},
		{1, sec(1.5), testSteps.High},
		{2, sec(2.5), testSteps.High},
		{2, sec(4.5), testSteps.Low},
	} {
		t.Run(fmt.Sprintf("node%d@%s", tc.node, tc.at.Sub(sec(0))), func(t *testing.T) {
			body := f.AppendBody(nil, tc.node, tc.at)
			if d := len(body) - len(seedBody); d < -200 || d > 200 {
				t.Errorf("body of %d bytes, the seed's %d", len(body), len(seedBody))
			}
			s := read(t, body, seedAt)
			checkGauges(t, s, tc.want)
			// Everything else is the seed's.
			s.Queue, s.Running, s.KVUsage = seed.Queue, seed.Running, seed.KVUsage
			if !reflect.DeepEqual(s, seed) {
				t.Errorf("the patched body reads otherwise than the seed's beyond the three gauges")
			}
		})
	}
	// The gauges split over the 8 cores as evenly as integers allow.
	body := string(f.AppendBody(nil, 0, sec(0)))
	for _, line := range []string{
		`vllm:num_requests_waiting{engine="0",model_name="deepseek-v4"} 5` + "\n",
		`vllm:num_requests_waiting{engine="4",model_name="deepseek-v4"} 5` + "\n",
		`vllm:num_requests_waiting{engine="5",model_name="deepseek-v4"} 4` + "\n",
		`vllm:num_requests_running{engine="7",model_name="deepseek-v4"} 8` + "\n",
		`vllm:kv_cache_usage_perc{engine="3",model_name="deepseek-v4"} 0.9` + "\n",
	} {
		if !strings.Contains(body, line) {
			t.Errorf("no line %q", line)
		}
	}
}

// TestSeedFixture: the embedded body is the simulator's seed vLLM node,
// ~172 KB, with 8 engine cores behind each patched family.
func TestSeedFixture(t *testing.T) {
	f, err := New(Config{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(seedBody); n < 160<<10 || n > 180<<10 {
		t.Errorf("seed body of %d bytes, want ~172 KB", n)
	}
	if got := f.tpl.cores; got != [numKinds]int{8, 8, 8} {
		t.Errorf("cores per family %v, want 8 each", got)
	}
	if n := len(f.tpl.prefix) + len(f.tpl.suffix); n < len(seedBody)-4<<10 {
		t.Errorf("static parts of %d bytes of %d: the rendered region is over 4 KB", n, len(seedBody))
	}
}

// updateSeedEnv set to 1 makes TestUpdateSeedFixture write
// testdata/vllm-seed.prom afresh from the simulator.
const updateSeedEnv = "LLMDIAG_UPDATE_EXPOFARM_SEED"

// TestUpdateSeedFixture writes the seed body as the simulator serves it
// now (go test ./internal/testing/expofarm -run UpdateSeed with
// LLMDIAG_UPDATE_EXPOFARM_SEED=1); otherwise it skips.
func TestUpdateSeedFixture(t *testing.T) {
	if os.Getenv(updateSeedEnv) != "1" {
		t.Skip("set " + updateSeedEnv + "=1 to write testdata/vllm-seed.prom from the simulator")
	}
	cfg := simtest.Scenario(t, "seed", 1)
	cfg.Warmup = sim.SeedWarmup
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(sim.SeedWarmup)
	body, err := f.Metrics("deepseek-v4-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/vllm-seed.prom", body, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"too many nodes", Config{Nodes: MaxNodes + 1}, "nodes 10001: want 1..10000"},
		{"negative nodes", Config{Nodes: -1}, "nodes -1"},
		{"more listeners than nodes", Config{Nodes: 4, Listeners: 5}, "listeners 5: want 1..4"},
		{"bad steps", Config{Schedule: Steps{Period: time.Second, Low: Gauges{Waiting: -2}}}, "steps: low: waiting -2"},
		{"no gauges", Config{Body: []byte("# TYPE x gauge\nx 1\n")}, "no vllm:num_requests_waiting sample"},
		{"no kv usage", Config{Body: []byte("vllm:num_requests_waiting 1\nvllm:num_requests_running 2\n")}, "no vllm:kv_cache_usage_perc sample"},
		{"timestamp", Config{Body: []byte("vllm:num_requests_waiting{engine=\"0\"} 1 1700000000000\n")}, "timestamp in"},
		{"bad value", Config{Body: []byte("vllm:num_requests_waiting{a=\"}\"} one\n")}, "value of"},
		{"open labels", Config{Body: []byte("vllm:num_requests_waiting{a=\"1\" 1\n")}, "unterminated label set"},
		{"body too big", Config{Body: make([]byte, MaxBodyBytes+1)}, "at most 16777216"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestServe1000: a farm of 1,000 endpoints, each on its own listener,
// serves them all at once, each node its own body at the farm's clock.
func TestServe1000(t *testing.T) {
	for _, tc := range []struct {
		name      string
		listeners int
	}{{"listener per node", 0}, {"4 listeners", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			f, err := New(Config{Nodes: 1000, Listeners: tc.listeners, Schedule: testSteps, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := f.Close(); err != nil {
					t.Error(err)
				}
			})
			urls := f.URLs()
			if len(urls) != 1000 || !strings.HasPrefix(urls[42], "http://127.0.0.1:") || !strings.HasSuffix(urls[42], "/n/0042/metrics") {
				t.Fatalf("%d urls, the 43rd %q", len(urls), urls[42])
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 4}
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			var wg sync.WaitGroup
			errs := make(chan error, len(urls))
			next := make(chan int)
			for range 64 {
				wg.Go(func() {
					for i := range next {
						errs <- checkServed(t.Context(), client, urls[i], f.AppendBody(nil, i, now))
					}
				})
			}
			for i := range urls {
				next <- i
			}
			close(next)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if st := f.Stats(); st.Requests != 1000 || st.Connections < 1 {
				t.Errorf("stats %+v, want 1000 requests", st)
			}
			// Bodies differ by node: the stagger moves node 1 a second on.
			if bytes.Equal(f.AppendBody(nil, 0, now), f.AppendBody(nil, 1, now)) {
				t.Errorf("nodes 0 and 1 serve the same body at %v", now)
			}
		})
	}
}

// checkServed GETs u as the scraper does (Go's transport offering gzip)
// and compares the body with want.
func checkServed(ctx context.Context, client *http.Client, u string, want []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	req.Header.Set("Accept-Encoding", "gzip") // as Go's transport does on its own
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", u, err)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	case resp.Header.Get("Content-Encoding") != "":
		return fmt.Errorf("%s: content encoding %q, want identity", u, resp.Header.Get("Content-Encoding"))
	case !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"):
		return fmt.Errorf("%s: content type %q", u, resp.Header.Get("Content-Type"))
	case resp.ContentLength != int64(len(want)) || !bytes.Equal(body, want):
		return fmt.Errorf("%s: %d bytes (content length %d), not the %d of the node's body", u, len(body), resp.ContentLength, len(want))
	}
	return nil
}

// TestServeRefuses: what is not a node of the listener, or not a GET, is
// refused.
func TestServeRefuses(t *testing.T) {
	f, err := New(Config{Nodes: 10, Listeners: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	base := strings.TrimSuffix(f.URLs()[0], Path(0)) // listener 0: even nodes
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/n/0002/metrics", http.StatusOK},
		{http.MethodHead, "/n/0002/metrics", http.StatusOK},
		{http.MethodGet, "/n/0001/metrics", http.StatusNotFound}, // listener 1's
		{http.MethodGet, "/n/0010/metrics", http.StatusNotFound}, // beyond the nodes
		{http.MethodGet, "/n/00x2/metrics", http.StatusNotFound},
		{http.MethodGet, "/n/0002/metric", http.StatusNotFound},
		{http.MethodGet, "/metrics", http.StatusNotFound},
		{http.MethodPost, "/n/0002/metrics", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: HTTP %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
	if err := f.Start(); err == nil {
		t.Error("a second Start succeeded")
	}
}

// TestChild: a farm in a child process serves, and tells its stats.
func TestChild(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	c := StartChild(t, "TestExpofarmChild", Spec{Nodes: 20, Listeners: 5, Steps: testSteps})
	if len(c.URLs) != 20 {
		t.Fatalf("%d urls, want 20", len(c.URLs))
	}
	resp, err := http.Get(c.URLs[7])
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d, %v", resp.StatusCode, err)
	}
	at := time.Now()
	s := read(t, body, at)
	// The child serves testSteps: node 7's gauges are one of its two.
	if s.Queue == nil || (*s.Queue != float64(testSteps.Low.Waiting) && *s.Queue != float64(testSteps.High.Waiting)) {
		t.Errorf("queue %v, want %d or %d", s.Queue, testSteps.Low.Waiting, testSteps.High.Waiting)
	}
	st, err := c.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests != 1 || st.CPU <= 0 {
		t.Errorf("child stats %+v, want 1 request and some CPU", st)
	}
}
