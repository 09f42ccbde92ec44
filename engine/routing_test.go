package engine

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/sim"
)

var readAt = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// routingOf is the routing part of a Sample Extract filled.
func routingOf(s *sample.Sample) [4]*float64 {
	return [4]*float64{s.Queue, s.Running, s.KVUsage, s.KVCapacityTokens}
}

func (r *Routing) values() [4]*float64 {
	return [4]*float64{r.Queue, r.Running, r.KVUsage, r.KVCapacityTokens}
}

var routingNames = [4]string{"queue", "running", "kv usage", "kv capacity"}

// sameValues reports how a and b differ: presence, then the float's bits.
func sameValues(a, b [4]*float64) error {
	for i := range a {
		switch {
		case (a[i] == nil) != (b[i] == nil):
			return fmt.Errorf("%s: %s vs %s", routingNames[i], testkit.Show(a[i]), testkit.Show(b[i]))
		case a[i] != nil && math.Float64bits(*a[i]) != math.Float64bits(*b[i]):
			return fmt.Errorf("%s: %v vs %v (bits %x vs %x)", routingNames[i], *a[i], *b[i], math.Float64bits(*a[i]), math.Float64bits(*b[i]))
		}
	}
	return nil
}

// isRoutingError reports whether an Extract error is about a routing
// concept (they read "family (concept): …").
func isRoutingError(e string) bool {
	for _, c := range routingConcepts {
		if strings.Contains(e, "("+c.String()+"): ") {
			return true
		}
	}
	return false
}

// fullRead is Parse then Extract, as the scraper does.
func fullRead(body []byte, e llmdiagv1.Engine, lim Limits) (*sample.Sample, *Exposition, error) {
	exp, err := Parse(bytes.NewReader(body), lim)
	if err != nil {
		return nil, nil, err
	}
	return Extract(e, exp.Families, readAt), exp, nil
}

// checkSame fails t unless ReadRouting reads from body what Parse then
// Extract read: the same values (bits and absence), the same routing
// errors, warnings among Parse's, and the same refusal; or, when the full
// parse refuses a body for what lies after the fast reader's stop, a
// read that stopped. It returns the fast read (nil when refused).
func checkSame(t *testing.T, body []byte, e llmdiagv1.Engine, lim Limits) *Routing {
	t.Helper()
	full, exp, perr := fullRead(body, e, lim)
	r, rerr := ReadRouting(bytes.NewReader(body), e, lim, readAt, nil)
	checkMemo(t, body, e, lim, r, rerr)
	switch {
	case perr != nil && rerr != nil:
		if perr.Error() != rerr.Error() {
			t.Errorf("%s: full parse refuses with %q, fast reader with %q", e, perr, rerr)
		}
		var pl, rl *LimitError
		if errors.As(perr, &pl) != errors.As(rerr, &rl) || errors.Is(perr, ErrEmpty) != errors.Is(rerr, ErrEmpty) {
			t.Errorf("%s: error types differ: %T vs %T", e, perr, rerr)
		}
		return nil
	case rerr != nil:
		t.Errorf("%s: fast reader refuses (%v), full parse does not", e, rerr)
		return nil
	case perr != nil:
		// The full parse refuses: either for what the fast reader did not
		// read (it stopped before), or for lines Prometheus refuses, which
		// the fast reader does not parse: then no routing value is read
		// from them.
		var le *LimitError
		switch {
		case r.Stopped:
		case errors.As(perr, &le) || strings.Contains(perr.Error(), "cut short") || errors.Is(perr, ErrEmpty):
			t.Errorf("%s: full parse refuses (%v), fast reader read the whole body without", e, perr)
		case sameValues(r.values(), [4]*float64{}) != nil:
			t.Errorf("%s: full parse finds no series (%v), fast reader reads %v", e, perr, r.values())
		}
		return r
	}
	if err := sameValues(routingOf(full), r.values()); err != nil {
		t.Errorf("%s: full vs fast: %v", e, err)
	}
	if r.At != readAt || r.Engine != e {
		t.Errorf("At %v Engine %s, want %v %s", r.At, r.Engine, readAt, e)
	}
	var want []string
	for _, msg := range full.Errors {
		if isRoutingError(msg) {
			want = append(want, msg)
		}
	}
	if !slices.Equal(r.Errors, want) {
		t.Errorf("%s: fast reader errors %q, full %q", e, r.Errors, want)
	}
	for _, w := range r.Warnings {
		if !slices.Contains(exp.Warnings, w) && len(exp.Warnings) < maxWarnings {
			t.Errorf("%s: fast reader warns %q, the full parse does not (%q)", e, w, exp.Warnings)
		}
	}
	if r.Series > exp.Series || (!r.Stopped && r.Series != exp.Series) {
		t.Errorf("%s: fast reader counted %d series (stopped %v), full %d", e, r.Series, r.Stopped, exp.Series)
	}
	return r
}

// TestReadRoutingFixtures: every exposition in testdata, read as each
// engine of the table, gives the full path's routing values.
func TestReadRoutingFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.prom")
	if err != nil {
		t.Fatal(err)
	}
	invalid, err := filepath.Glob("testdata/invalid/*.prom")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, invalid...)
	if len(files) < 30 {
		t.Fatalf("only %d fixtures", len(files))
	}
	read := 0
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.TrimPrefix(file, "testdata/"), func(t *testing.T) {
			for _, e := range Engines() {
				if r := checkSame(t, body, e, Limits{}); r != nil && r.Queue != nil {
					read++
				}
			}
		})
	}
	if read < 15 {
		t.Errorf("a queue read from only %d fixture × engine pairs", read)
	}
}

// simBodies returns, per scenario of the simulator, every node's
// exposition after 45 s, with the engine its fleet file names; and each
// schema's exposition loaded (more traffic than its 4 slots serve, so
// queues are not empty), cut short and as an HTML page.
func simBodies(t *testing.T) map[string]struct {
	body []byte
	e    llmdiagv1.Engine
} {
	t.Helper()
	out := map[string]struct {
		body []byte
		e    llmdiagv1.Engine
	}{}
	add := func(cfg sim.Config, tag string, garbage ...sim.Garbage) {
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Step(45 * time.Second)
		for _, n := range cfg.Nodes {
			e, err := fleet.ParseEngine(n.Engine.FleetName())
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range append([]sim.Garbage{sim.GarbageNone}, garbage...) {
				if err := f.SetGarbage(n.ID, g); err != nil {
					t.Fatal(err)
				}
				body, err := f.Metrics(n.ID)
				if errors.Is(err, sim.ErrNodeDown) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				out[fmt.Sprintf("%s/%s/%s/garbage%d", tag, n.ID, n.Engine, g)] = struct {
					body []byte
					e    llmdiagv1.Engine
				}{body, e}
			}
		}
	}
	for _, name := range sim.Scenarios() {
		cfg := simtest.Scenario(t, name, 1)
		add(cfg, name)
	}
	loaded := simtest.Scenario(t, "schemas", 1)
	for i := range loaded.Nodes {
		n := &loaded.Nodes[i]
		n.Perf.MaxNumSeqs = 4
		n.Workload.Rate = 4
		n.Quirks = sim.FieldQuirks()
	}
	add(loaded, "schemas-loaded-quirks", sim.GarbageTruncated, sim.GarbageJunk)
	return out
}

// TestReadRoutingSimulator: every node of every simulator scenario, and
// every schema loaded, cut short and garbled, gives the full path's
// routing values.
func TestReadRoutingSimulator(t *testing.T) {
	bodies := simBodies(t)
	engines := map[llmdiagv1.Engine]bool{}
	queued := 0
	for _, name := range sortedKeys(bodies) {
		b := bodies[name]
		t.Run(name, func(t *testing.T) {
			r := checkSame(t, b.body, b.e, Limits{})
			if r != nil && r.Queue != nil {
				engines[b.e] = true
				if *r.Queue > 0 {
					queued++
				}
			}
		})
	}
	for _, e := range Engines() {
		if !engines[e] {
			t.Errorf("no simulated node of %s read", e)
		}
	}
	if queued < 5 {
		t.Errorf("only %d simulated bodies with a queue", queued)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// vllmRouting is a vLLM exposition with two engine cores whose routing
// families (marked by a comment) lie between others.
const vllmRouting = `# HELP vllm:num_preemptions_total Preemptions.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3
vllm:num_preemptions_total{engine="1",model_name="m"} 4
# HELP vllm:num_requests_waiting Requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2
vllm:num_requests_waiting{engine="1",model_name="m"} 5
# HELP vllm:num_requests_running Requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7
vllm:num_requests_running{engine="1",model_name="m"} 8
# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.1
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.7
# HELP vllm:cache_config_info Cache config.
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="3000"} 1
# HELP vllm:prompt_tokens_total Prompt tokens.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 100
vllm:prompt_tokens_total{engine="1",model_name="m"} 200
`

// TestReadRoutingCases: bodies that probe the reader's edges. Each must
// read as the full path does (checkSame), and the reader must have
// stopped early or not, and read what is listed.
func TestReadRoutingCases(t *testing.T) {
	vllm := llmdiagv1.Engine_ENGINE_VLLM
	sglang := llmdiagv1.Engine_ENGINE_SGLANG
	lines := strings.SplitAfter(vllmRouting, "\n")
	// without drops the lines of vllmRouting holding any of names.
	without := func(names ...string) string {
		var b strings.Builder
		for _, l := range lines {
			if !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(l, n) }) {
				b.WriteString(l)
			}
		}
		return b.String()
	}
	replace := func(old, new string) string {
		if !strings.Contains(vllmRouting, old) {
			t.Fatalf("%q not in the body", old)
		}
		return strings.Replace(vllmRouting, old, new, 1)
	}
	tests := []struct {
		name    string
		body    string
		e       llmdiagv1.Engine
		lim     Limits
		stopped bool
		// queue is the queue read (nil: absent); errs are substrings of
		// the errors, err of the refusal.
		queue *float64
		kv    *float64
		errs  []string
		err   string
	}{
		{
			// 0.1×16000 + 0.7×48000 over 64000: capacity-weighted.
			name: "stops after the routing families", body: vllmRouting, e: vllm,
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			// Without cache_config_info no source of capacity has been
			// read before the end: the read goes on to it, then the mean.
			name: "missing capacity: read to the end", body: without("cache_config_info"), e: vllm,
			queue: f(7), kv: f(0.4),
		},
		{
			name: "missing queue", body: without("num_requests_waiting"), e: vllm,
			kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "NaN queue", body: replace(`model_name="m"} 5`, `model_name="m"} NaN`), e: vllm,
			stopped: true, kv: f((0.1*16000 + 0.7*48000) / 64000), errs: []string{"(queue): value is NaN"},
		},
		{
			name: "+Inf running", body: replace(`model_name="m"} 8`, `model_name="m"} +Inf`), e: vllm,
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000), errs: []string{"(running): value is +Inf"},
		},
		{
			// A duplicated series leaves its family out: the OpenTelemetry
			// name, later in preference, is not there: read to the end.
			name: "duplicate series", e: vllm,
			body: replace("vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5\n",
				"vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5\nvllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 6\n"),
			kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "duplicate with a fallback", e: vllm,
			body: replace("vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5\n",
				"vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5\nvllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 6\n") +
				"# TYPE vllm_num_requests_waiting gauge\nvllm_num_requests_waiting{engine=\"0\"} 9\n",
			queue: f(9), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "routing family typed histogram", e: vllm,
			body: replace("# TYPE vllm:num_requests_waiting gauge", "# TYPE vllm:num_requests_waiting histogram"),
			kv:   f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			// Running is left out; its OpenTelemetry names may follow.
			name: "TYPE contradicts", e: vllm,
			body:  replace("# TYPE vllm:num_requests_running gauge\n", "# TYPE vllm:num_requests_running gauge\n# TYPE vllm:num_requests_running counter\n"),
			queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "indented routing line", e: vllm,
			body:    replace("vllm:num_requests_waiting{engine=\"0\"", " vllm:num_requests_waiting{engine=\"0\""),
			stopped: false, kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "refused routing line", e: vllm,
			body: replace(`model_name="m"} 5`, `model_name="m"} five`),
			kv:   f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			// Prometheus refuses a line of another family; the fast reader
			// does not parse it and reads the routing values regardless.
			name: "refused line elsewhere", e: vllm,
			body:    replace(`{engine="1",model_name="m"} 200`, `{engine="1",model_name="m"} two hundred`),
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			// A family given in two groups, the second before the read
			// stops: both are read, as Parse reads them.
			name: "split family before the stop", e: vllm,
			body: vllmRouting[:strings.Index(vllmRouting, "# HELP vllm:kv_cache")] +
				"vllm:num_requests_waiting{engine=\"2\",model_name=\"m\"} 10\n" +
				vllmRouting[strings.Index(vllmRouting, "# HELP vllm:kv_cache"):],
			stopped: true, queue: f(17), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "quoted names", e: vllm,
			body: replace("vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5",
				`{"vllm:num_requests_waiting",engine="1",model_name="m"} 5`),
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			// Read as a histogram's, the gauge lines leave the family out.
			name: "quoted TYPE", e: vllm,
			body: replace(`# TYPE vllm:num_requests_waiting gauge`, `# TYPE "vllm:num_requests_waiting" histogram`),
			kv:   f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			// The family is present, as a histogram: unusable, and the
			// OpenTelemetry name after it is not read.
			name: "routing family with histogram lines", e: vllm,
			body: without("num_requests_waiting") +
				"# TYPE vllm:num_requests_waiting histogram\nvllm:num_requests_waiting_bucket{le=\"+Inf\"} 1\nvllm:num_requests_waiting_sum 1\nvllm:num_requests_waiting_count 1\n" +
				"# TYPE vllm_num_requests_waiting gauge\nvllm_num_requests_waiting{engine=\"0\"} 9\n",
			kv:   f((0.1*16000 + 0.7*48000) / 64000),
			errs: []string{"vllm:num_requests_waiting (queue): family is a histogram, want a gauge or counter"},
		},
		{
			name: "CRLF", e: vllm, body: strings.ReplaceAll(vllmRouting, "\n", "\r\n"),
		},
		{
			name: "blank lines and comments inside a group", e: vllm,
			body:    replace("vllm:num_requests_waiting{engine=\"1\"", "\n# a comment\n  \t\nvllm:num_requests_waiting{engine=\"1\""),
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "a routing line longer than the read buffer", e: vllm,
			body:    replace(`block_size="16",engine="1"`, `block_size="16",cache_note="`+strings.Repeat("x", 3*routingBuffer)+`",engine="1"`),
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "a skipped line longer than the read buffer", e: vllm,
			body:    replace(`{engine="1",model_name="m"} 4`, `{engine="1",model_name="m",note="`+strings.Repeat("x", 3*routingBuffer)+`"} 4`),
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "OpenMetrics", e: vllm,
			body:    vllmRouting + "# EOF\n",
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "cut short before the stop", e: vllm,
			body: vllmRouting[:strings.Index(vllmRouting, "vllm:kv_cache_usage_perc{engine=\"1\"")+20],
			err:  "parse metrics: line 16 ends without a newline: the body is cut short",
		},
		{
			// Parse refuses the body; the fast reader stopped before the
			// cut.
			name: "cut short after the stop", e: vllm,
			body:    vllmRouting[:len(vllmRouting)-5],
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			// HELP and TYPE lines apart from their samples: the format
			// forbids it, Prometheus's parser does not.
			name: "metadata first", e: llmdiagv1.Engine_ENGINE_TGI,
			body: "# TYPE tgi_queue_size gauge\n# TYPE tgi_batch_current_size gauge\n# TYPE tgi_x counter\ntgi_x 1\n" +
				"tgi_queue_size 3\ntgi_batch_current_size 2\n# TYPE tgi_y counter\ntgi_y 1\n",
			stopped: true, queue: f(3),
		},
		{name: "empty", e: vllm, body: "", err: ErrEmpty.Error()},
		{name: "comments only", e: vllm, body: "# HELP x y\n# TYPE x gauge\n\n", err: ErrEmpty.Error()},
		{name: "HTML", e: vllm, body: junkHTML},
		{
			name: "series over the cap before the stop", e: vllm, lim: Limits{MaxSeries: 3},
			body: vllmRouting,
			err:  "exposition refused at line 8: more than the limit of 3 series",
		},
		{
			// 10 series before the stop, 12 in all.
			name: "series over the cap after the stop", e: vllm, lim: Limits{MaxSeries: 10},
			body:    vllmRouting,
			stopped: true, queue: f(7), kv: f((0.1*16000 + 0.7*48000) / 64000),
		},
		{
			name: "rank values over the cap", e: vllm, lim: Limits{MaxRankValues: 1},
			body: without("num_preemptions"),
			err:  `exposition refused at line 4: more than the limit of 1 values of label "engine"`,
		},
		{
			name: "line too long", e: vllm,
			body: replace(`{engine="1",model_name="m"} 4`, `{engine="1",model_name="m",note="`+strings.Repeat("x", maxLine)+`"} 4`),
			err:  "exposition refused at line 4: more than the limit of 1048576 bytes in one line",
		},
		{
			// SGLang: used tokens over capacity; the ranks of a replica
			// deduplicated.
			name: "sglang", e: sglang,
			body: "# TYPE sglang:num_queue_reqs gauge\n" +
				"sglang:num_queue_reqs{dp_rank=\"0\",tp_rank=\"0\"} 3\nsglang:num_queue_reqs{dp_rank=\"0\",tp_rank=\"1\"} 3\nsglang:num_queue_reqs{dp_rank=\"1\",tp_rank=\"0\"} 4\n" +
				"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{dp_rank=\"0\",tp_rank=\"0\"} 1\n" +
				"# TYPE sglang:token_usage gauge\nsglang:token_usage{dp_rank=\"0\",tp_rank=\"0\"} 0.5\n" +
				"# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{dp_rank=\"0\",tp_rank=\"0\"} 1000\n" +
				"# TYPE sglang:num_used_tokens gauge\nsglang:num_used_tokens{dp_rank=\"0\",tp_rank=\"0\"} 250\n" +
				"# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total 5\n",
			stopped: true, queue: f(7), kv: f(0.25),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := checkSame(t, []byte(tc.body), tc.e, tc.lim)
			_, rerr := ReadRouting(strings.NewReader(tc.body), tc.e, tc.lim, readAt, nil)
			if tc.err != "" {
				if rerr == nil || rerr.Error() != tc.err {
					t.Fatalf("error %v, want %q", rerr, tc.err)
				}
				return
			}
			if rerr != nil {
				t.Fatal(rerr)
			}
			if tc.name == "CRLF" {
				return // whatever Prometheus makes of it, as long as both agree
			}
			if r.Stopped != tc.stopped {
				t.Errorf("stopped %v, want %v (%d of %d lines read)", r.Stopped, tc.stopped, r.Lines, strings.Count(tc.body, "\n"))
			}
			if !samePtr(r.Queue, tc.queue) || !samePtr(r.KVUsage, tc.kv) {
				t.Errorf("queue %s, KV usage %s; want %s, %s", testkit.Show(r.Queue), testkit.Show(r.KVUsage), testkit.Show(tc.queue), testkit.Show(tc.kv))
			}
			if len(r.Errors) != len(tc.errs) {
				t.Fatalf("errors %q, want %q", r.Errors, tc.errs)
			}
			for i, e := range tc.errs {
				if !strings.Contains(r.Errors[i], e) {
					t.Errorf("error %q, want %q in it", r.Errors[i], e)
				}
			}
		})
	}
}

const junkHTML = "<html><head><title>502 Bad Gateway</title></head>\n<body><center><h1>502 Bad Gateway</h1></center></body></html>\n"

// TestReadRoutingSplitAfterStop: a family split in two groups, the second
// after every routing family has been read. The text format forbids it;
// Prometheus's parser and Parse accept it and merge the groups. The fast
// reader has stopped before the second group: it reads the first alone.
func TestReadRoutingSplitAfterStop(t *testing.T) {
	body := vllmRouting + "vllm:num_requests_waiting{engine=\"2\",model_name=\"m\"} 10\n"
	full, _, err := fullRead([]byte(body), llmdiagv1.Engine_ENGINE_VLLM, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadRouting(strings.NewReader(body), llmdiagv1.Engine_ENGINE_VLLM, Limits{}, readAt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *full.Queue != 17 || *r.Queue != 7 || !r.Stopped {
		t.Errorf("queue: full %v, fast %v (stopped %v); want 17 and 7, stopped", *full.Queue, *r.Queue, r.Stopped)
	}
}

// TestReadRoutingForeignRanks: MaxRankValues counts the rank labels of the
// routing families only; Parse counts every family of the engine's, and
// refuses a body the fast reader reads.
func TestReadRoutingForeignRanks(t *testing.T) {
	body := vllmRouting + "# TYPE vllm:x gauge\nvllm:x{engine=\"2\"} 1\nvllm:x{engine=\"3\"} 1\n"
	lim := Limits{MaxRankValues: 2}
	if _, err := Parse(strings.NewReader(body), lim); err == nil {
		t.Fatal("Parse accepts 4 engine values over a cap of 2")
	}
	r, err := ReadRouting(strings.NewReader(body), llmdiagv1.Engine_ENGINE_VLLM, lim, readAt, nil)
	if err != nil || r.Queue == nil || *r.Queue != 7 {
		t.Fatalf("ReadRouting: %v, %+v", err, r)
	}
}

// TestReadRoutingEngine: the engine must be one of the table's.
func TestReadRoutingEngine(t *testing.T) {
	for _, e := range []llmdiagv1.Engine{llmdiagv1.Engine_ENGINE_UNSPECIFIED, unmapped} {
		_, err := ReadRouting(strings.NewReader(vllmRouting), e, Limits{}, readAt, nil)
		if err == nil || !strings.Contains(err.Error(), "no metric mapping for engine") {
			t.Errorf("%s: error %v", e, err)
		}
	}
}

// TestReadRoutingGzip: the reader takes the body as net/http hands it
// over, a gzip encoding undone, as the scraper hands it to Parse.
func TestReadRoutingGzip(t *testing.T) {
	body, err := os.ReadFile("testdata/vllm-v1-dynamo-metrics_examples.prom")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.Contains(req.Header.Get("Accept-Encoding"), "gzip") {
			t.Error("the client does not ask for gzip")
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write(body)
		_ = zw.Close()
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !resp.Uncompressed {
		t.Fatal("the transport did not undo the gzip encoding")
	}
	r, err := ReadRouting(io.LimitReader(resp.Body, 16<<20+1), llmdiagv1.Engine_ENGINE_VLLM, Limits{}, readAt, nil)
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := fullRead(body, llmdiagv1.Engine_ENGINE_VLLM, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sameValues(routingOf(full), r.values()); err != nil {
		t.Error(err)
	}
	if r.KVCapacityTokens == nil || *r.KVCapacityTokens != 95088 {
		t.Errorf("capacity %s, want 95088", testkit.Show(r.KVCapacityTokens))
	}
}

// TestRoutingPlans: every engine of the table has a plan, and every family
// a routing concept reads is in it.
func TestRoutingPlans(t *testing.T) {
	for _, e := range Engines() {
		p, ok := routingPlans[e]
		if !ok {
			t.Fatalf("%s: no plan", e)
		}
		m, _ := Lookup(e)
		for _, c := range routingConcepts {
			for _, src := range m.sources(c) {
				for _, name := range src.Families() {
					if fam, ok := p.lookup([]byte(name)); !ok || p.families[fam] != name {
						t.Errorf("%s: family %s of %s not planned", e, name, c)
					}
					if _, ok := p.lookup([]byte(name + "_bucket")); !ok {
						t.Errorf("%s: %s_bucket not filed under %s", e, name, name)
					}
				}
			}
		}
		for _, other := range []string{"vllm:e2e_request_latency_seconds_bucket", "process_cpu_seconds_total", ""} {
			if _, ok := p.lookup([]byte(other)); ok {
				t.Errorf("%s: %q is read", e, other)
			}
		}
	}
}

// seedVLLM is the exposition of the seed fleet's first vLLM node (8
// engine cores, about 170 KB), after warm-up.
func seedVLLM(tb testing.TB) []byte {
	tb.Helper()
	cfg := simtest.Scenario(tb, "seed", 1)
	fl, err := sim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	fl.Step(2 * time.Minute)
	body, err := fl.Metrics(cfg.Nodes[0].ID)
	if err != nil {
		tb.Fatal(err)
	}
	if len(body) < 150_000 {
		tb.Fatalf("seed body %d bytes, want about 170 KB", len(body))
	}
	return body
}

// BenchmarkRoutingFull is what the full path costs for the routing values:
// Parse then Extract of the seed's vLLM exposition.
func BenchmarkRoutingFull(b *testing.B) {
	body := seedVLLM(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		exp, err := Parse(bytes.NewReader(body), Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if s := Extract(llmdiagv1.Engine_ENGINE_VLLM, exp.Families, readAt); s.Queue == nil {
			b.Fatal("no queue")
		}
	}
}

// BenchmarkRoutingFullMemo is BenchmarkRoutingFull through a warm memo, as
// the scraper parses: every scrape after the first of the model's.
func BenchmarkRoutingFullMemo(b *testing.B) {
	body := seedVLLM(b)
	memo := NewSeriesMemo()
	if _, err := ParseMemo(bytes.NewReader(body), Limits{}, memo); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		exp, err := ParseMemo(bytes.NewReader(body), Limits{}, memo)
		if err != nil {
			b.Fatal(err)
		}
		if s := Extract(llmdiagv1.Engine_ENGINE_VLLM, exp.Families, readAt); s.Queue == nil {
			b.Fatal("no queue")
		}
	}
}

// BenchmarkRoutingFast is ReadRouting of the same exposition.
func BenchmarkRoutingFast(b *testing.B) {
	body := seedVLLM(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ReadRouting(bytes.NewReader(body), llmdiagv1.Engine_ENGINE_VLLM, Limits{}, readAt, nil)
		if err != nil || r.Queue == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoutingFastMemo is ReadRouting of the same exposition through
// the memo a fast lane keeps per node, warm: every read after a node's
// first.
func BenchmarkRoutingFastMemo(b *testing.B) {
	body := seedVLLM(b)
	memo := NewSeriesMemo()
	if _, err := ReadRouting(bytes.NewReader(body), llmdiagv1.Engine_ENGINE_VLLM, Limits{}, readAt, memo); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ReadRouting(bytes.NewReader(body), llmdiagv1.Engine_ENGINE_VLLM, Limits{}, readAt, memo)
		if err != nil || r.Queue == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoutingFastToEnd is ReadRouting of the seed's vLLM exposition
// with its cache_config_info moved to the end, where vLLM registers it
// (engine/testdata/vllm-v1-dynamo-metrics_examples.prom): the read cannot
// stop before the last vLLM family.
func BenchmarkRoutingFastToEnd(b *testing.B) {
	body := seedVLLM(b)
	i := bytes.Index(body, []byte("# HELP vllm:cache_config_info"))
	j := i + bytes.Index(body[i:], []byte("# HELP vllm:e2e"))
	if i < 0 || j < i {
		b.Fatal("no cache_config_info group")
	}
	moved := slices.Concat(body[:i], body[j:], body[i:j])
	b.SetBytes(int64(len(moved)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ReadRouting(bytes.NewReader(moved), llmdiagv1.Engine_ENGINE_VLLM, Limits{}, readAt, nil)
		if err != nil || r.KVCapacityTokens == nil || r.Stopped {
			b.Fatal(err)
		}
	}
}

// groups splits an exposition into its families' groups of lines: a group
// starts at a HELP or TYPE line whose name (classify's key, line suffix
// dropped) differs from the group's.
func groups(body []byte) [][]byte {
	var out [][]byte
	var name string
	for _, l := range bytes.SplitAfter(body, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		kind, key := classify(l)
		for _, s := range lineSuffixes {
			key = bytes.TrimSuffix(key, s)
		}
		if len(out) == 0 || kind == lineMeta && string(key) != name {
			out = append(out, nil)
			name = string(key)
		}
		out[len(out)-1] = append(out[len(out)-1], l...)
	}
	return out
}

// TestReadRoutingOrders: every fixture and simulated exposition, its
// families in shuffled orders (so the read stops at other places, or
// not), reads as the full path does.
func TestReadRoutingOrders(t *testing.T) {
	files, err := filepath.Glob("testdata/*.prom")
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		bodies[file] = body
	}
	for name, b := range simBodies(t) {
		bodies[name] = b.body
	}
	stopped, whole := 0, 0
	for _, name := range sortedKeys(bodies) {
		gs := groups(bodies[name])
		if len(gs) < 2 {
			continue
		}
		rng := rand.New(rand.NewPCG(uint64(len(gs)), 17))
		t.Run(name, func(t *testing.T) {
			for range 4 {
				rng.Shuffle(len(gs), func(i, j int) { gs[i], gs[j] = gs[j], gs[i] })
				body := bytes.Join(gs, nil)
				for _, e := range Engines() {
					if r := checkSame(t, body, e, Limits{}); r != nil && r.Queue != nil {
						if r.Stopped {
							stopped++
						} else {
							whole++
						}
					}
				}
			}
		})
	}
	t.Logf("%d reads stopped early, %d read whole", stopped, whole)
	if stopped < 20 || whole < 20 {
		t.Errorf("%d reads stopped early, %d read whole: want both common", stopped, whole)
	}
}
