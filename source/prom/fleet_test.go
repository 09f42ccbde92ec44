package prom

import (
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/promfake"
)

// synthFleet returns n nodes: vLLM with 2 engine cores, or, with mixed,
// every other node SGLang with 2 dp ranks of 2 tp ranks (promfake.Fleet).
func synthFleet(n int, mixed bool) []promfake.Node { return promfake.Fleet(n, mixed) }

// synthBodies answers every query of qs for nodes at at, with what
// Prometheus would return: values per node, per replica, per bucket
// (promfake.Synth).
func synthBodies(qs []query, nodes []promfake.Node, at time.Time) map[string]canned {
	fq := make([]promfake.Query, len(qs))
	for i, q := range qs {
		fq[i] = promfake.Query{Expr: q.expr, Engine: q.engine, Shape: q.shape.String(), Concept: q.concept}
	}
	return promfake.Bodies(fq, nodes, at)
}

// TestQueryBudget: the number of queries per refresh does not depend on the
// number of nodes.
func TestQueryBudget(t *testing.T) {
	counts := map[int]int{}
	for _, n := range []int{10, 1000} {
		nodes := synthFleet(n, true)
		fake := newFakeProm(t, synthBodies(plan(t, defaultBuilder("5m"), engine.Engines()...), nodes, testNow))
		src := newTestSource(t, fake.URL, nil)
		obs, err := src.Refresh(t.Context(), "5m")
		if err != nil {
			t.Fatal(err)
		}
		if len(obs) != n {
			t.Fatalf("%d nodes: got %d observations", n, len(obs))
		}
		for _, o := range obs {
			m := o.Metrics
			if len(m.GetErrors()) > 0 || m.Queue == nil || m.KvPressure == nil || m.GetTtft() == nil || m.GetE2E() == nil || o.Sample.DataParallel != 2 {
				t.Fatalf("%d nodes: incomplete metrics for %s: %v", n, o.Node.ID, m)
			}
		}
		if got := int(fake.Queries.Load()); got != src.QueriesLastRefresh() {
			t.Errorf("%d nodes: server saw %d queries, QueriesLastRefresh = %d", n, got, src.QueriesLastRefresh())
		}
		counts[n] = src.QueriesLastRefresh()
		t.Logf("%d nodes (vLLM and SGLang): %d queries", n, counts[n])
	}
	if counts[10] != counts[1000] {
		t.Errorf("queries per refresh: %d for 10 nodes, %d for 1,000", counts[10], counts[1000])
	}
	// The identity of every engine, then the data of vLLM and SGLang, and
	// the role query.
	want := len(engine.Engines()) + 1
	for _, e := range []llmdiagv1.Engine{llmdiagv1.Engine_ENGINE_VLLM, llmdiagv1.Engine_ENGINE_SGLANG} {
		m, _ := engine.Lookup(e)
		qs, err := defaultBuilder("5m").data(m)
		if err != nil {
			t.Fatal(err)
		}
		want += len(qs)
	}
	if counts[10] != want {
		t.Errorf("queries per refresh = %d, want %d", counts[10], want)
	}
}
