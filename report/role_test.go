package report_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/report"
)

// TestRoleReports renders the prefill and the decode worker of a 1P1D
// deployment (the diagnoses of diagnose/testdata, golden there too) in
// both languages.
func TestRoleReports(t *testing.T) {
	for _, tc := range []struct {
		diagnosis, file string
		lang            llmdiagv1.Language
		want            []string
	}{
		{"prefill-worker.en.json", "prefill-worker.en.md", en, []string{
			"pd-prefill-0 · m · vLLM · prefill worker · 5m — WARN",
			"| Role | OK (prefill worker) |",
			"| Per-request decode speed | OK (0.5 tok/s per request) | Not judged: a prefill worker produces only the first token of each request |",
			"add prefill workers",
		}},
		{"prefill-worker.zh.json", "prefill-worker.zh.md", zh, []string{"Prefill 节点 · 5m — 警告", "不评判"}},
		{"decode-worker.en.json", "decode-worker.en.md", en, []string{
			"pd-decode-0 · m · vLLM · decode worker · 5m — WARN",
			"| KV transfer time | WARN (1.2 s) |",
			"not prefill: TTFT P99 12 s is high, but this is a decode worker",
		}},
		{"decode-worker.zh.json", "decode-worker.zh.md", zh, []string{"Decode 节点 · 5m — 警告", "KV 传输耗时"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "diagnose", "testdata", tc.diagnosis))
			if err != nil {
				t.Fatal(err)
			}
			d := &llmdiagv1.Diagnosis{}
			if err := protojson.Unmarshal(raw, d); err != nil {
				t.Fatal(err)
			}
			got := report.Render(d, markdown, tc.lang)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("report lacks %q", w)
				}
			}
			testkit.Golden(t, filepath.Join("testdata", tc.file), []byte(got))
		})
	}
}
