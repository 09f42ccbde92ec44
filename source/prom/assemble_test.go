package prom

import (
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// vec builds a decoded vector: each sample is its wanted labels then its
// value.
func vec(k int, samples ...[]any) *vector {
	v := &vector{k: k}
	for _, s := range samples {
		for _, l := range s[:k] {
			v.vals = append(v.vals, l.(string))
		}
		v.vs = append(v.vs, s[k].(float64))
	}
	return v
}

func newTestAssembly(t *testing.T, engines ...llmdiagv1.Engine) *assembly {
	t.Helper()
	cfg := Config{URL: "http://x"}
	cfg.defaults()
	a := newAssembly(cfg, false, "5m", 5*time.Minute, testNow)
	for _, e := range engines {
		m, ok := engine.Lookup(e)
		if !ok {
			t.Fatalf("no mapping for %s", e)
		}
		a.engine(m)
	}
	return a
}

func TestAssemblyEngineChoice(t *testing.T) {
	vllm, dynamo := llmdiagv1.Engine_ENGINE_VLLM, llmdiagv1.Engine_ENGINE_DYNAMO
	a := newTestAssembly(t, vllm, dynamo)
	b := defaultBuilder("5m")
	ts := float64(testNow.Unix())
	// Node x exposes the families of both engines; vLLM gives more concepts.
	for _, e := range []llmdiagv1.Engine{vllm, dynamo} {
		m, _ := engine.Lookup(e)
		id, _ := b.identity(m)
		k := len(id.want)
		a.add(id, vec(k, append(append([]any{"x"}, anys(k-1, "")...), ts), append(append([]any{"y"}, anys(k-1, "")...), ts)), nil)
		data, _ := b.data(m)
		for _, q := range data {
			if q.shape != shapeNode {
				continue
			}
			if e == vllm || q.concept == engine.Queue {
				a.add(q, vec(1, []any{"x", 1.0}), nil)
			}
		}
	}
	// Node y is seen by both identities only: the first engine in table order.
	obs := a.observations()
	if len(obs) != 2 || obs[0].Engine != vllm || obs[1].Engine != vllm {
		t.Fatalf("got %v", obs)
	}
}

// identify adds an identity result to a that lists the nodes ids of e as
// live, scraped at testNow.
func identify(a *assembly, e llmdiagv1.Engine, ids ...string) {
	rows := make([][]any, len(ids))
	for i, id := range ids {
		rows[i] = []any{id, float64(testNow.Unix())}
	}
	a.add(query{engine: e, shape: shapeIdentity, want: []string{"instance"}}, vec(1, rows...), nil)
}

func anys(n int, v any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestAssemblyRuns(t *testing.T) {
	a := newTestAssembly(t, llmdiagv1.Engine_ENGINE_VLLM)
	e := llmdiagv1.Engine_ENGINE_VLLM
	q := func(sh shape, c engine.Concept, run int, want ...string) query {
		return query{engine: e, shape: sh, concept: c, run: run, want: want}
	}
	identify(a, e, "n")
	// A later run does not replace an earlier one; an earlier one does.
	a.add(q(shapeNode, engine.Queue, 1, "instance"), vec(1, []any{"n", 7.0}), nil)
	a.add(q(shapeNode, engine.Queue, 0, "instance"), vec(1, []any{"n", 3.0}), nil)
	a.add(q(shapeNode, engine.Queue, 2, "instance"), vec(1, []any{"n", 9.0}), nil)
	a.add(q(shapeBuckets, engine.TTFT, 1, "instance", "le"), vec(2, []any{"n", "1", 1.0}, []any{"n", "+Inf", 2.0}), nil)
	a.add(q(shapeBuckets, engine.TTFT, 0, "instance", "le"), vec(2, []any{"n", "2", 4.0}, []any{"n", "+Inf", 4.0}), nil)
	a.add(q(shapeBuckets, engine.TTFT, 1, "instance", "le"), vec(2, []any{"n", "5", 1.0}), nil)
	// A bad bucket bound spoils the histogram, with an error.
	a.add(q(shapeBuckets, engine.E2E, 0, "instance", "le"), vec(2, []any{"n", "abc", 1.0}, []any{"n", "+Inf", 2.0}), nil)
	// Info labels that are not numbers.
	a.add(query{engine: e, shape: shapeInfo, concept: engine.KVCapacityTokens, want: []string{"instance", "engine", "num_gpu_blocks", "block_size"},
		info: []string{"num_gpu_blocks", "block_size"}}, vec(4, []any{"n", "0", "many", "16", 1.0}), nil)
	// NaN gauge.
	nan := 0.0
	nan /= nan
	a.add(q(shapeNode, engine.Running, 0, "instance"), vec(1, []any{"n", nan}), nil)
	obs := a.observations()
	if len(obs) != 1 {
		t.Fatalf("got %d observations", len(obs))
	}
	m := obs[0].Metrics
	if m.GetQueue() != 3 || m.Running != nil || m.KvCapacityTokens != nil {
		t.Errorf("queue %v running %v capacity %v", m.GetQueue(), m.Running, m.KvCapacityTokens)
	}
	if d := m.GetTtft(); d == nil || len(d.GetBucketBounds()) != 2 || d.GetBucketBounds()[0] != 2 {
		t.Errorf("ttft = %v, want run 0's buckets", d)
	}
	if m.GetE2E() != nil {
		t.Errorf("e2e = %v, want none", m.GetE2E())
	}
	errs := strings.Join(m.GetErrors(), "\n")
	for _, want := range []string{`e2e buckets: bucket le="abc"`, `kv_capacity_tokens: label num_gpu_blocks="many" is not a number`, "running: value is NaN"} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors %q lack %q", m.GetErrors(), want)
		}
	}
}

func TestAssemblyTotals(t *testing.T) {
	triton := llmdiagv1.Engine_ENGINE_TRITON
	a := newTestAssembly(t, triton)
	q := func(c engine.Concept) query {
		return query{engine: triton, shape: shapeNode, concept: c, want: []string{"instance"}}
	}
	identify(a, triton, "t")
	// 2 requests/s taking 1.5 s/s in all: a mean of 0.75 s, 600 requests in 5m.
	a.add(q(engine.E2ESum), vec(1, []any{"t", 1.5}), nil)
	a.add(q(engine.E2ECount), vec(1, []any{"t", 2.0}), nil)
	m := a.observations()[0].Metrics
	d := m.GetE2E()
	if d == nil || d.GetMean() != 0.75 || d.GetCount() != 600 || d.GetSum() != 450 || len(d.GetPercentiles()) != 0 {
		t.Errorf("e2e = %v", d)
	}
	if m.GetQueueTime() != nil {
		t.Errorf("queue time = %v", m.GetQueueTime())
	}
}
