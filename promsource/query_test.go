package promsource

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

// plan returns every query of one refresh of engines, identity first.
func plan(t testing.TB, b builder, engines ...llmdiagv1.Engine) []query {
	t.Helper()
	var qs []query
	for _, e := range engines {
		m, ok := engine.Lookup(e)
		if !ok {
			t.Fatalf("no mapping for %s", e)
		}
		id, err := b.identity(m)
		if err != nil {
			t.Fatalf("identity of %s: %v", e, err)
		}
		data, err := b.data(m)
		if err != nil {
			t.Fatalf("data of %s: %v", e, err)
		}
		qs = append(append(qs, id...), data...)
	}
	return qs
}

func defaultBuilder(rng string) builder {
	return builder{node: "instance", models: []string{"model_name", "model", "name"}, rng: rng, lookback: "10m"}
}

// TestQueriesGolden pins the query list of one refresh of vLLM and SGLang,
// for a 5m window and for the lifetime.
func TestQueriesGolden(t *testing.T) {
	for _, tc := range []struct{ file, rng string }{
		{"queries-5m.golden", "5m"},
		{"queries-lifetime.golden", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var sb strings.Builder
			for _, q := range plan(t, defaultBuilder(tc.rng), llmdiagv1.Engine_ENGINE_VLLM, llmdiagv1.Engine_ENGINE_SGLANG) {
				fmt.Fprintf(&sb, "# %s %s\n%s\n", q.engine, q.what(), q.expr)
			}
			golden(t, filepath.Join("testdata", tc.file), sb.String())
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n%s", path, got)
	}
}

// TestQueriesParse checks that every query of every engine, for every kind
// of window and with a node matcher, is valid PromQL.
func TestQueriesParse(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for _, rng := range []string{"5m", "1h", ""} {
		for _, node := range []string{"", "10.0.0.1:8000", `we"ird\node{}`} {
			b := defaultBuilder(rng)
			if node != "" {
				var err error
				if b, err = b.forNode(node); err != nil {
					t.Fatal(err)
				}
			}
			for _, q := range plan(t, b, engine.Engines()...) {
				if _, err := p.ParseExpr(q.expr); err != nil {
					t.Errorf("%s %s (window %q, node %q): %v\n%s", q.engine, q.what(), rng, node, err, q.expr)
				}
			}
		}
	}
}
