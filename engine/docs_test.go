package engine_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/engine"
)

// TestEngineMetricsPage: docs/engine-metrics.md names every family the
// mapping table (and the KV-transfer table) reads, and names no engine family the table does not. The
// OpenTelemetry aliases of vLLM's families (vllm_ for vllm:) are covered by
// one sentence of the page rather than listed.
func TestEngineMetricsPage(t *testing.T) {
	page, err := os.ReadFile("../docs/engine-metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	var prefixes []string
	for _, e := range engine.Engines() {
		m, _ := engine.Lookup(e)
		prefixes = append(prefixes, m.Prefixes()...)
		for _, concepts := range []map[engine.Concept][]engine.Source{m.Concepts, m.Effects} {
			for _, srcs := range concepts {
				for _, src := range srcs {
					for _, f := range src.Families() {
						read[f] = true
					}
				}
			}
		}
		for _, f := range m.LoRAInfo {
			read[f] = true
		}
	}
	for _, f := range engine.KVTransferFamilies() {
		read[f] = true
	}
	prefixes = append(prefixes, "nv_inference_") // Triton's, shared with non-LLM models

	// Backticked names on the page, a selector {…} dropped.
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z_]+[:_][a-z0-9_:]+)(?:\\{[^`]*\\})?`").FindAllStringSubmatch(string(page), -1) {
		named[m[1]] = true
	}
	for f := range read {
		if strings.HasPrefix(f, "vllm_") {
			continue
		}
		if !named[f] {
			t.Errorf("docs/engine-metrics.md does not name %s, which engine/table.go reads", f)
		}
	}
	for n := range named {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) && len(n) > len(p) && !read[n] {
				t.Errorf("docs/engine-metrics.md names %s, which engine/table.go does not read", n)
				break
			}
		}
	}
	if len(read) == 0 || len(named) == 0 {
		t.Fatalf("read %d families from the table and %d names from the page", len(read), len(named))
	}
}
