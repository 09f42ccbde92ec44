package engine

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
)

func TestParseFiles(t *testing.T) {
	tests := []struct {
		file string
		// TYPE lines with at least one sample line; the parser drops
		// families declared without samples.
		families int
	}{
		// 119 TYPE lines, 21 of them lmcache gauges without samples.
		{"vllm-v1-dynamo-metrics_examples.prom", 98},
		// 52 TYPE lines, all with samples.
		{"sglang-dynamo-metrics_examples.prom", 52},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			families := parseFile(t, tc.file)
			if len(families) != tc.families {
				t.Errorf("%d families, want %d", len(families), tc.families)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	vllm, err := os.ReadFile("testdata/vllm-v1-dynamo-metrics_examples.prom")
	if err != nil {
		t.Fatal(err)
	}
	cut := func(marker string) string {
		i := bytes.Index(vllm, []byte(marker))
		if i < 0 {
			t.Fatalf("marker %q not in file", marker)
		}
		return string(vllm[:i])
	}
	tests := []struct {
		name, body string
		empty      bool
	}{
		{name: "empty", body: "", empty: true},
		{name: "comments only", body: "# HELP x y\n# TYPE x gauge\n", empty: true},
		{name: "html", body: "<html><body>502 Bad Gateway</body></html>\n"},
		{name: "json", body: `{"status":"error"}` + "\n"},
		{name: "binary", body: "\x00\x01\x02\xff\xfe"},
		{name: "no final newline", body: "vllm:num_requests_waiting 1"},
		{name: "cut inside labels", body: cut(`model_name="Qwen/Qwen3-0.6B"} 66.0`)},
		{name: "cut inside a value", body: cut(`.4143967628479004`)},
		{name: "text value", body: "vllm:num_requests_waiting{engine=\"0\"} many\n"},
		{name: "unterminated label value", body: "vllm:num_requests_waiting{engine=\"0} 1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := Parse(strings.NewReader(tc.body), Limits{})
			if err == nil {
				t.Fatalf("Parse succeeded with %d families, want an error", len(exp.Families))
			}
			if exp != nil {
				t.Errorf("Parse returned an exposition with its error")
			}
			if errors.Is(err, ErrEmpty) != tc.empty {
				t.Errorf("error %v, want ErrEmpty %v", err, tc.empty)
			}
		})
	}
}

// TestTruncatedAtLineBoundary: a body cut between lines parses; the
// histogram it cut loses its +Inf bucket: a warning, and the family is left
// out, so Extract has no error to report and TTFT is unknown. The families
// before it are read, the ones after it are absent.
func TestTruncatedAtLineBoundary(t *testing.T) {
	vllm, err := os.ReadFile("testdata/vllm-v1-dynamo-metrics_examples.prom")
	if err != nil {
		t.Fatal(err)
	}
	marker := []byte(`vllm:time_to_first_token_seconds_bucket{engine="0",le="0.75"`)
	i := bytes.Index(vllm, marker)
	exp, err := Parse(bytes.NewReader(vllm[:i]), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	s := Extract(llmdiagv1.Engine_ENGINE_UNSPECIFIED, exp.Families, time.Time{})
	if s.Engine != llmdiagv1.Engine_ENGINE_VLLM || s.Queue == nil || *s.Queue != 0 || s.GenerationTokens == nil || *s.GenerationTokens != 600 {
		t.Errorf("families before the cut not read: %+v", s)
	}
	if s.Hists[0] != nil || s.Hists[1] != nil {
		t.Errorf("TTFT %v E2E %v, want both nil", s.Hists[0], s.Hists[1])
	}
	want := `family vllm:time_to_first_token_seconds left out: histogram series {engine="0",model_name="Qwen/Qwen3-0.6B"}: no +Inf bucket`
	if len(exp.Warnings) != 1 || exp.Warnings[0] != want {
		t.Errorf("warnings %q, want [%q]", exp.Warnings, want)
	}
	if len(s.Errors) != 0 {
		t.Errorf("Extract errors %q, want none: the family is absent", s.Errors)
	}
}

func FuzzParseExtract(f *testing.F) {
	files, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range files {
		if !strings.HasSuffix(e.Name(), ".prom") {
			continue
		}
		body, err := os.ReadFile("testdata/" + e.Name())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
		f.Add(body[:len(body)/2])
	}
	f.Add([]byte("# TYPE sglang:queue_time_seconds histogram\nsglang:queue_time_seconds_bucket{le=\"0.0\",tp_rank=\"x\"} 1e400\n"))
	f.Add([]byte("# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"1e308\",num_gpu_blocks=\"1e308\"} 1\n"))
	f.Add([]byte("# TYPE trtllm_kv_cache_max_blocks gauge\ntrtllm_kv_cache_max_blocks 1e308\n# TYPE trtllm_kv_cache_tokens_per_block gauge\ntrtllm_kv_cache_tokens_per_block 1e308\n"))
	f.Add([]byte("# TYPE nv_inference_request_duration_us counter\nnv_inference_request_duration_us{model=\"a\"} 1e308\nnv_inference_request_duration_us{model=\"b\"} NaN\n# TYPE nv_inference_request_success counter\nnv_inference_request_success{model=\"a\"} 0\n"))
	engines := append(Engines(), llmdiagv1.Engine_ENGINE_UNSPECIFIED, unmapped)
	f.Fuzz(func(t *testing.T, body []byte) {
		exp, err := Parse(bytes.NewReader(body), Limits{})
		if err != nil {
			return
		}
		families := exp.Families
		for _, e := range engines {
			s := Extract(e, families, time.Unix(1, 0))
			for _, v := range []*float64{s.Queue, s.Running, s.KVUsage, s.KVCapacityTokens, s.PromptTokens, s.GenerationTokens, s.Preemptions, s.RequestsFinished} {
				if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
					t.Errorf("%v: non-finite value %v", e, *v)
				}
			}
			for _, tot := range s.Totals {
				if tot != nil && (math.IsNaN(tot.Sum) || math.IsInf(tot.Sum, 0) || math.IsNaN(tot.Count) || math.IsInf(tot.Count, 0)) {
					t.Errorf("%v: non-finite total %+v", e, *tot)
				}
			}
			for _, h := range s.Hists {
				if h != nil {
					if err := histogram.Validate(h); err != nil {
						t.Errorf("%v: extracted histogram invalid: %v", e, err)
					}
				}
			}
		}
	})
}

// TestParseSummary: a summary's quantile, _sum and _count lines make one
// metric per label set, as a Prometheus client writes them.
func TestParseSummary(t *testing.T) {
	exp, err := Parse(strings.NewReader(`# TYPE rpc_seconds summary
rpc_seconds{code="200",quantile="0.5"} 0.1
rpc_seconds{code="200",quantile="0.99"} 0.4
rpc_seconds_sum{code="200"} 12
rpc_seconds_count{code="200"} 60
rpc_seconds{code="500",quantile="0.5"} 1
rpc_seconds_sum{code="500"} 3
rpc_seconds_count{code="500"} 2
`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f := exp.Families["rpc_seconds"]
	if len(exp.Warnings) != 0 || len(exp.Families) != 1 || f.GetType() != dto.MetricType_SUMMARY || len(f.GetMetric()) != 2 {
		t.Fatalf("warnings %q families %v", exp.Warnings, exp.Families)
	}
	s := f.GetMetric()[0].GetSummary()
	if len(s.GetQuantile()) != 2 || s.GetQuantile()[1].GetQuantile() != 0.99 || s.GetQuantile()[1].GetValue() != 0.4 || s.GetSampleSum() != 12 || s.GetSampleCount() != 60 {
		t.Errorf("code=200 summary %v", s)
	}
	if exp.Series != 7 {
		t.Errorf("%d series, want 7", exp.Series)
	}
}
