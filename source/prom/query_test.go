package prom

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/testkit"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// plan returns every query of one refresh of engines, identity first, the
// role query last (as Plan lists them).
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
		qs = append(append(qs, id), data...)
	}
	if len(engines) > 0 {
		q, err := b.role()
		if err != nil {
			t.Fatalf("role: %v", err)
		}
		qs = append(qs, q)
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
			testkit.Golden(t, filepath.Join("testdata", tc.file), []byte(sb.String()))
		})
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

// TestAbortSelectors: the aborted-requests concept costs at most one query
// per engine that exposes it, and its selectors keep exactly the series of
// the mapping's Match and MatchAny: equality for Match, an anchored regular
// expression for MatchAny that accepts each listed value and nothing else.
func TestAbortSelectors(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for _, rng := range []string{"5m", ""} {
		for _, e := range engine.Engines() {
			m, _ := engine.Lookup(e)
			srcs := m.Concepts[engine.RequestsAborted]
			var aborted []query
			for _, q := range plan(t, defaultBuilder(rng), e) {
				if q.concept == engine.RequestsAborted && q.shape != shapeIdentity && q.shape != shapeCreated {
					aborted = append(aborted, q)
				}
			}
			if want := min(len(srcs), 1); len(aborted) != want {
				t.Errorf("%s window %q: %d aborted queries, want %d", e, rng, len(aborted), want)
				continue
			}
			if len(srcs) == 0 {
				continue
			}
			expr := mustParse(t, p, aborted[0].expr)
			vss := selectors(expr)
			if len(vss) != len(srcs) {
				t.Fatalf("%s: %d selectors for %d sources:\n%s", e, len(vss), len(srcs), aborted[0].expr)
			}
			for i, vs := range vss {
				checkSelector(t, e, vs, srcs[i])
			}
		}
	}
}

// checkSelector checks that vs selects the series of src: its family and
// exactly its Match and MatchAny labels.
func checkSelector(t *testing.T, e llmdiagv1.Engine, vs *parser.VectorSelector, src engine.Source) {
	t.Helper()
	got := map[string]*labels.Matcher{}
	for _, m := range vs.LabelMatchers {
		got[m.Name] = m
	}
	if n := got[labels.MetricName]; n == nil || n.Value != src.Family {
		t.Errorf("%s: selector %s, want family %s", e, vs, src.Family)
	}
	if len(got) != 1+len(src.Match)+len(src.MatchAny) {
		t.Errorf("%s: selector %s has %d matchers, want the name, %v and %v", e, vs, len(got), src.Match, src.MatchAny)
	}
	for k, v := range src.Match {
		if m := got[k]; m == nil || m.Type != labels.MatchEqual || m.Value != v {
			t.Errorf("%s: selector %s, want %s=%q", e, vs, k, v)
		}
	}
	for k, vals := range src.MatchAny {
		m := got[k]
		if m == nil || m.Type != labels.MatchRegexp {
			t.Errorf("%s: selector %s, want %s=~ one of %q", e, vs, k, vals)
			continue
		}
		for _, v := range vals {
			if !m.Matches(v) || m.Matches(v+"x") || m.Matches("x"+v) {
				t.Errorf("%s: %s: %q must match exactly, not %q or %q", e, m, v, v+"x", "x"+v)
			}
		}
		if m.Matches("") || m.Matches("stop") || m.Matches(strings.Join(vals, "|")) {
			t.Errorf("%s: %s matches a value not listed", e, m)
		}
	}
}

// FuzzMatchAnySelector: whatever two values a source lists for a label,
// the selector is refused (ErrInvalidValue) or parses into one anchored
// regular-expression matcher that accepts exactly those values.
func FuzzMatchAnySelector(f *testing.F) {
	for _, seed := range [][2]string{
		{"abort", "error"}, {"a|b", "c"}, {".*", "x"}, {`a"b`, `\`}, {"(", ")"}, {"é😀", "^$"}, {"", "x"}, {"a\nb", "c"},
	} {
		f.Add(seed[0], seed[1])
	}
	p := parser.NewParser(parser.Options{})
	f.Fuzz(func(t *testing.T, a, b string) {
		sel, err := defaultBuilder("5m").srcSel("fam", engine.Source{MatchAny: map[string][]string{"l": {a, b}}})
		if err != nil {
			if !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("%q, %q refused with %v", a, b, err)
			}
			return
		}
		vs := selectors(mustParse(t, p, sel))
		if len(vs) != 1 || len(vs[0].LabelMatchers) != 2 {
			t.Fatalf("%q, %q: %s is not one selector with a name and one matcher", a, b, sel)
		}
		var m *labels.Matcher
		for _, lm := range vs[0].LabelMatchers {
			if lm.Name == "l" {
				m = lm
			}
		}
		if m == nil || m.Type != labels.MatchRegexp || !m.Matches(a) || !m.Matches(b) {
			t.Fatalf("%q, %q: %s does not match both values", a, b, sel)
		}
		for _, other := range []string{a + "x", "x" + b, a + b, a + "|" + b} {
			if other != a && other != b && m.Matches(other) {
				t.Fatalf("%q, %q: %s matches %q", a, b, sel, other)
			}
		}
	})
}
