package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// TestInvalidExpositions: each problem leaves its family out with a warning
// naming it; the other families are read as usual.
func TestInvalidExpositions(t *testing.T) {
	const (
		running = "vllm:num_requests_running"
		waiting = "vllm:num_requests_waiting"
		ttft    = "vllm:time_to_first_token_seconds"
		e2e     = "vllm:e2e_request_latency_seconds"
	)
	tests := []struct {
		file    string
		warning string
		absent  string
		present []string
	}{
		{
			file:    "indented-line.prom",
			warning: `family vllm:num_requests_running left out: line 5 is indented: Prometheus reads the leading blanks as part of the metric name and fails the scrape`,
			absent:  running,
			present: []string{waiting, ttft},
		},
		{
			file:    "indented-tab.prom",
			warning: `family vllm:num_requests_waiting left out: line 8 is indented: Prometheus reads the leading blanks as part of the metric name and fails the scrape`,
			absent:  waiting,
			present: []string{running, ttft},
		},
		{
			file:    "histogram-no-inf.prom",
			warning: `family vllm:e2e_request_latency_seconds left out: histogram series {engine="0",model_name="m"}: no +Inf bucket`,
			absent:  e2e,
			present: []string{running, waiting, ttft},
		},
		{
			file:    "histogram-non-monotonic.prom",
			warning: `family vllm:e2e_request_latency_seconds left out: histogram series {engine="0",model_name="m"}: bucket le=5 counts 8, fewer than the bucket below it (9): cumulative counts must not fall`,
			absent:  e2e,
			present: []string{running, waiting, ttft},
		},
		{
			file:    "histogram-count-mismatch.prom",
			warning: `family vllm:e2e_request_latency_seconds left out: histogram series {engine="0",model_name="m"}: _count 12 differs from the +Inf bucket's 10`,
			absent:  e2e,
			present: []string{running, waiting, ttft},
		},
		{
			file:    "histogram-no-count.prom",
			warning: `family vllm:e2e_request_latency_seconds left out: histogram series {engine="0",model_name="m"}: no _count`,
			absent:  e2e,
			present: []string{running, waiting, ttft},
		},
		{
			file:    "histogram-negative.prom",
			warning: `family vllm:e2e_request_latency_seconds left out: histogram series {engine="0",model_name="m"}: bucket le=5 has count -1`,
			absent:  e2e,
			present: []string{running, waiting, ttft},
		},
		{
			file:    "histogram-stray-series.prom",
			warning: `family vllm:time_to_first_token_seconds left out: line 16: series vllm:time_to_first_token_seconds{engine="0",model_name="m"} is not a bucket, _sum or _count of the histogram`,
			absent:  ttft,
			present: []string{running, waiting},
		},
		{
			file:    "bucket-without-le.prom",
			warning: `family vllm:time_to_first_token_seconds left out: line 13: bucket vllm:time_to_first_token_seconds_bucket{engine="0",model_name="m"} has no numeric le`,
			absent:  ttft,
			present: []string{running, waiting},
		},
		{
			file:    "duplicate-series.prom",
			warning: `family vllm:num_requests_waiting left out: line 10: series vllm:num_requests_waiting{engine="1",model_name="m"} is given twice`,
			absent:  waiting,
			present: []string{running, ttft},
		},
		{
			file:    "refused-value.prom",
			warning: `family vllm:num_requests_running left out: line 5: Prometheus's parser refuses it (strconv.ParseFloat: parsing "two": invalid syntax) and fails the scrape: "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} two"`,
			absent:  running,
			present: []string{waiting, ttft},
		},
		{
			file:    "refused-labels.prom",
			warning: `family vllm:num_requests_waiting left out: line 9: Prometheus's parser refuses it (expected value after metric, got "{e" ("BOPEN")) and fails the scrape: "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"}{engine=\"x\"} 0.0"`,
			absent:  waiting,
			present: []string{running, ttft},
		},
		{
			// The histogram's lines after the refused TYPE line do not
			// become families of their own.
			file:    "refused-type.prom",
			warning: `family vllm:time_to_first_token_seconds left out: line 11: Prometheus's parser refuses it (invalid metric type "histgram") and fails the scrape: "# TYPE vllm:time_to_first_token_seconds histgram"`,
			absent:  ttft,
			present: []string{running, waiting},
		},
		{
			file:    "type-conflict.prom",
			warning: `family vllm:num_requests_waiting left out: line 10: TYPE vllm:num_requests_waiting counter contradicts an earlier TYPE gauge`,
			absent:  waiting,
			present: []string{running, ttft},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			exp := parseFileWarn(t, filepath.Join("invalid", tc.file))
			if len(exp.Warnings) != 1 || exp.Warnings[0] != tc.warning {
				t.Errorf("warnings %q\nwant [%q]", exp.Warnings, tc.warning)
			}
			want := append([]string{}, tc.present...)
			slices.Sort(want)
			var got []string
			for name := range exp.Families {
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("families %q, want %q (%s left out)", got, want, tc.absent)
			}
			// The family left out is a concept Extract reads: it is
			// unknown, and Extract has nothing to add about it.
			s := Extract(llmdiagv1.Engine_ENGINE_VLLM, exp.Families, time.Time{})
			concept := map[string]bool{
				running: s.Running != nil,
				waiting: s.Queue != nil,
				ttft:    s.Hists[sample.TTFT] != nil,
				e2e:     s.Hists[sample.E2E] != nil,
			}
			for name, known := range concept {
				if known != slices.Contains(tc.present, name) {
					t.Errorf("%s read %v, want %v", name, known, !known)
				}
			}
			if len(s.Errors) != 0 {
				t.Errorf("Extract errors %q, want none", s.Errors)
			}
		})
	}
}

// TestRealExpositionsClean: every real and synthetic fixture but the
// deliberately inconsistent one parses without a warning.
func TestRealExpositionsClean(t *testing.T) {
	files, err := filepath.Glob("testdata/*.prom")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d fixtures", len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "vllm-inconsistent.prom" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			exp := parseFileWarn(t, name)
			if len(exp.Warnings) > 0 {
				t.Errorf("warnings %q", exp.Warnings)
			}
			if exp.Series == 0 || len(exp.Families) == 0 {
				t.Errorf("%d series in %d families", exp.Series, len(exp.Families))
			}
		})
	}
}

// TestWarningsBounded: a body with many problems keeps 20 warnings, the
// last counting the rest.
func TestWarningsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "# TYPE h%d histogram\nh%d_bucket{le=\"1\"} 1\nh%d_sum 1\nh%d_count 1\n", i, i, i, i)
	}
	exp, err := Parse(strings.NewReader(b.String()), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.Warnings) != maxWarnings || exp.Warnings[maxWarnings-1] != "and 31 more exposition problems" {
		t.Errorf("%d warnings, last %q", len(exp.Warnings), exp.Warnings[len(exp.Warnings)-1])
	}
	if len(exp.Families) != 0 {
		t.Errorf("%d families, want none", len(exp.Families))
	}
}

// floodBody is an exposition of n series of vllm:num_requests_running,
// distinct in label (so not a rank label: the series cap refuses it, or a
// rank label: the rank cap does).
func floodBody(n int, label string) []byte {
	var b strings.Builder
	b.WriteString("# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\n")
	for i := range n {
		fmt.Fprintf(&b, "vllm:num_requests_running{%s=\"%d\",model_name=\"m\"} 1\n", label, i)
	}
	return []byte(b.String())
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		lim  Limits
		want string // the error; "" for none
	}{
		{name: "series at the cap", body: floodBody(100, "pod"), lim: Limits{MaxSeries: 100}},
		{
			name: "series over the cap",
			body: floodBody(101, "pod"),
			lim:  Limits{MaxSeries: 100},
			want: "exposition refused at line 103: more than the limit of 100 series",
		},
		{
			// A histogram's bucket lines are series, as Prometheus counts.
			name: "histogram buckets count",
			body: []byte("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"),
			lim:  Limits{MaxSeries: 3},
			want: "exposition refused at line 5: more than the limit of 3 series",
		},
		{
			// Refused lines count too: a flood of garbage is bounded.
			name: "refused lines count",
			body: []byte("a 1\nb one\nc two\n"),
			lim:  Limits{MaxSeries: 2},
			want: "exposition refused at line 3: more than the limit of 2 series",
		},
		{name: "engine values at the cap", body: floodBody(8, "engine"), lim: Limits{MaxRankValues: 8}},
		{
			name: "engine values over the cap",
			body: floodBody(9, "engine"),
			lim:  Limits{MaxRankValues: 8},
			want: `exposition refused at line 11: more than the limit of 8 values of label "engine"`,
		},
		{
			name: "sglang tp_rank over the cap",
			body: []byte("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{tp_rank=\"0\"} 1\nsglang:num_running_reqs{tp_rank=\"1\"} 1\nsglang:num_running_reqs{tp_rank=\"2\"} 1\n"),
			lim:  Limits{MaxRankValues: 2},
			want: `exposition refused at line 4: more than the limit of 2 values of label "tp_rank"`,
		},
		{
			// Another exporter's engine label is not a rank.
			name: "foreign family",
			body: []byte("# TYPE process_x gauge\nprocess_x{engine=\"a\"} 1\nprocess_x{engine=\"b\"} 1\nprocess_x{engine=\"c\"} 1\n"),
			lim:  Limits{MaxRankValues: 2},
		},
		{
			name: "line too long",
			body: []byte("a{x=\"" + strings.Repeat("y", maxLine) + "\"} 1\n"),
			want: "exposition refused at line 1: more than the limit of 1048576 bytes in one line",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := Parse(strings.NewReader(string(tc.body)), tc.lim)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(exp.Warnings) > 0 {
					t.Errorf("warnings %q", exp.Warnings)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || err.Error() != tc.want {
				t.Fatalf("error %v, want LimitError %q", err, tc.want)
			}
			if exp != nil {
				t.Error("an exposition with the error")
			}
		})
	}
}

// A 264,000-series exposition: every series a distinct
// value of a non-rank label (the series cap refuses it) or of vLLM's engine
// label (the rank cap refuses it, long before). Either way the parse stops
// at the cap, and it allocates well under 64 MiB in all (so the heap never
// grew more than that) where reading the whole body cost 413 MiB of RSS.
func TestFloodRefusedWithinMemory(t *testing.T) {
	const n = 264_000
	tests := []struct {
		label, want string
	}{
		{"pod", "exposition refused at line 50003: more than the limit of 50000 series"},
		{"engine", `exposition refused at line 1027: more than the limit of 1024 values of label "engine"`},
	}
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			body := string(floodBody(n, tc.label))
			if len(body) >= 16<<20 {
				t.Fatalf("body %d bytes, want under the 16 MiB body cap", len(body))
			}
			var err error
			peak, total := measureHeap(func() {
				_, err = Parse(strings.NewReader(body), Limits{})
			})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			t.Logf("%d-byte body: allocated %.1f MiB, peak heap growth %.1f MiB", len(body), mib(total), mib(peak))
			if total >= 64<<20 {
				t.Errorf("allocated %.1f MiB while parsing, want under 64 MiB", mib(total))
			}
		})
	}
}

// measureHeap runs f and returns the largest heap growth seen by a sampler
// and the bytes f allocated (an upper bound of the growth, whatever the
// sampler missed).
func measureHeap(f func()) (peak, total uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	sampled := make(chan uint64)
	go func() {
		var ms runtime.MemStats
		var top uint64
		for {
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapAlloc)
			select {
			case <-done:
				sampled <- top
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	top := <-sampled
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	top = max(top, after.HeapAlloc)
	if top > before.HeapAlloc {
		peak = top - before.HeapAlloc
	}
	return peak, after.TotalAlloc - before.TotalAlloc
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// BenchmarkParseFlood reports what refusing the 264,000-series exposition
// costs: time, bytes allocated and peak heap growth per parse.
func BenchmarkParseFlood(b *testing.B) {
	body := string(floodBody(264_000, "pod"))
	parse := func() {
		if _, err := Parse(strings.NewReader(body), Limits{}); err == nil {
			b.Fatal("flood accepted")
		}
	}
	peak, _ := measureHeap(parse)
	b.ReportAllocs()
	for b.Loop() {
		parse()
	}
	b.ReportMetric(mib(peak), "peak-heap-MiB")
}

// BenchmarkParseVLLM is the cost of one real vLLM exposition.
func BenchmarkParseVLLM(b *testing.B) {
	body, err := os.ReadFile("testdata/vllm-v1-dynamo-metrics_examples.prom")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(strings.NewReader(string(body)), Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
