package prom

import (
	"errors"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/llmdiag/llmdiag/engine"
)

// FuzzQueryBuilder: whatever the node id, every query built for it either
// is refused (ErrInvalidValue) or parses with the real PromQL parser into
// exactly the structure the same query has for a harmless id, with the id
// only as the value of the node matcher of every selector.
func FuzzQueryBuilder(f *testing.F) {
	for _, seed := range []string{
		"10.0.0.1:8000", "node-1", `a"b`, `a\"} or vector(1) #`, "x\\", "é😀", `"} + on() group_left() up{x="`,
		"\u2028", "a\x7fb", "${x}", "`", "'", "[]{}()", "x\"\n", "\\u0022",
	} {
		f.Add(seed)
	}
	p := parser.NewParser(parser.Options{})
	const placeholder = "placeholder"
	base := defaultBuilder("5m")
	ref, err := base.forNode(placeholder)
	if err != nil {
		f.Fatal(err)
	}
	want := plan(f, ref, engine.Engines()...)
	f.Fuzz(func(t *testing.T, node string) {
		b, err := base.forNode(node)
		if err != nil {
			if !errors.Is(err, ErrInvalidValue) || (node != "" && checkValue(node) == nil) {
				t.Fatalf("node %q refused with %v", node, err)
			}
			return
		}
		for i, q := range plan(t, b, engine.Engines()...) {
			expr, err := p.ParseExpr(q.expr)
			if err != nil {
				t.Fatalf("node %q: %s %s does not parse: %v\n%s", node, q.engine, q.what(), err, q.expr)
			}
			for _, vs := range selectors(expr) {
				n := 0
				for _, m := range vs.LabelMatchers {
					if m.Name != "instance" {
						continue
					}
					if m.Type.String() != "=" || m.Value != node {
						t.Fatalf("node %q: selector %s has matcher %s", node, vs, m)
					}
					m.Value = placeholder
					n++
				}
				if n != 1 {
					t.Fatalf("node %q: selector %s has %d node matchers", node, vs, n)
				}
			}
			if got, ref := expr.String(), mustParse(t, p, want[i].expr).String(); got != ref {
				t.Fatalf("node %q changed the structure of %s %s:\n got %s\nwant %s", node, q.engine, q.what(), got, ref)
			}
		}
	})
}

func selectors(expr parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

func mustParse(t *testing.T, p parser.Parser, q string) parser.Expr {
	t.Helper()
	e, err := p.ParseExpr(q)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
