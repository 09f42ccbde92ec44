package promtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sim"
)

// effectsScenario is the schemas fleet with speculative decoding (3 draft
// tokens, acceptance 0.7) and four LoRA adapters, two loaded at most, on
// every node: each schema exports what it has of them (vLLM its counters
// and lora_requests_info, SGLang its gauges, the others nothing).
func effectsScenario(t *testing.T) sim.Config {
	return schemasTwin(t, "effects", func(n *sim.Node) {
		n.SpecDecode = &sim.SpecDecode{DraftTokens: 3, AcceptRate: 0.7}
		n.LoRA = &sim.LoRA{Adapters: []string{"sql", "chat", "code", "math"}, MaxLoaded: 2}
	})
}

// effectsSeries are, per schema, the cache and decoding effects as
// Prometheus computes them per node, written here apart from
// engine/table.go; a schema without an entry exports none, and prom must
// report them absent.
var effectsSeries = map[sim.Engine]struct {
	// ratio counters: hits / queries, accepted / draft tokens, accepted /
	// drafts (the accept length less 1).
	hits, queries, accepted, draftTokens, drafts string
	// gauges, averaged over a node's schedulers.
	hitRate, acceptRate, acceptLength string
	lora                              string
}{
	sim.VLLM: {hits: "vllm:prefix_cache_hits_total", queries: "vllm:prefix_cache_queries_total",
		accepted: "vllm:spec_decode_num_accepted_tokens_total", draftTokens: "vllm:spec_decode_num_draft_tokens_total",
		drafts: "vllm:spec_decode_num_drafts_total", lora: "vllm:lora_requests_info"},
	sim.VLLMOTel: {hits: "vllm_prefix_cache_hits", queries: "vllm_prefix_cache_queries",
		accepted: "vllm_spec_decode_num_accepted_tokens", draftTokens: "vllm_spec_decode_num_draft_tokens",
		drafts: "vllm_spec_decode_num_drafts", lora: "vllm_lora_requests_info"},
	sim.SGLang:       {acceptRate: "sglang:spec_accept_rate", acceptLength: "sglang:spec_accept_length"},
	sim.SGLangLegacy: {acceptRate: "sglang:spec_accept_rate", acceptLength: "sglang:spec_accept_length"},
}

// testEffects checks the cache and decoding effects prom reports, through
// Refresh and Window, against Prometheus's own figures over the same
// series at the same time: the counter ratios (rates over the window, or
// cumulative for the lifetime), the gauges' mean, and the LoRA adapters of
// each engine core's newest lora_requests_info series, counted here; and
// that they are absent, never 0, on every schema that does not export
// them. Every effect must be compared on some node.
func testEffects(t *testing.T, ctx context.Context, sf *simFleet, at time.Time, counter func(string) string,
	got map[string]map[string]*llmdiagv1.NodeMetrics) {
	query := func(expr string) map[string]float64 {
		if expr == "" {
			return nil
		}
		res, err := sf.prom.QueryVector(ctx, expr, at)
		if err != nil {
			t.Fatal(err)
		}
		return valuesBy(t, res, "node")
	}
	// ratio is num / den per node, at most 1 unless plus (the accept
	// length: 1 + accepted per draft); none where den did not move.
	ratio := func(num, den string, plus float64) map[string]float64 {
		if num == "" {
			return nil
		}
		out := map[string]float64{}
		n := query(fmt.Sprintf("sum by (node) (%s)", counter(num)))
		for node, d := range query(fmt.Sprintf("sum by (node) (%s)", counter(den))) {
			switch {
			case d <= 0:
			case plus > 0:
				out[node] = plus + n[node]/d
			default:
				out[node] = min(n[node]/d, 1)
			}
		}
		return out
	}
	mean := func(g string) map[string]float64 {
		if g == "" {
			return nil
		}
		out := map[string]float64{}
		for node, v := range query(fmt.Sprintf("avg by (node) (%s)", g)) {
			if v > 0 { // 0: speculative decoding off
				out[node] = v
			}
		}
		return out
	}
	compared := map[string]int{}
	for _, e := range sim.Engines() {
		s := effectsSeries[e]
		want := map[string]map[string]float64{
			"prefix cache hit rate": ratio(s.hits, s.queries, 0),
			"spec acceptance rate":  ratio(s.accepted, s.draftTokens, 0),
			"spec accept length":    ratio(s.accepted, s.drafts, 1),
		}
		if s.acceptRate != "" {
			want["spec acceptance rate"], want["spec accept length"] = mean(s.acceptRate), mean(s.acceptLength)
		}
		running, waiting := loraCounts(t, ctx, sf, at, s.lora)
		want["lora running"], want["lora waiting"] = running, waiting
		for id, inst := range sf.instance {
			if sf.engine[inst] != e {
				continue
			}
			for _, via := range promPaths {
				m := got[via][id]
				for name, gotV := range map[string]*float64{
					"prefix cache hit rate": m.PrefixCacheHitRate,
					"spec acceptance rate":  m.SpecDecodeAcceptanceRate,
					"spec accept length":    m.SpecDecodeAcceptLength,
					"lora running":          m.LoraAdaptersRunning,
					"lora waiting":          m.LoraAdaptersWaiting,
				} {
					w, ok := want[name][id]
					switch {
					case !ok && gotV != nil:
						t.Errorf("%s %s (%s): %s = %v, prometheus has none: want it absent", via, id, e, name, *gotV)
					case ok && gotV == nil:
						t.Errorf("%s %s (%s): no %s, prometheus says %v", via, id, e, name, w)
					case ok && relErr(*gotV, w) > relTolerance:
						t.Errorf("%s %s (%s): %s = %v, prometheus says %v", via, id, e, name, *gotV, w)
					case ok:
						compared[name]++
					}
				}
			}
		}
	}
	t.Logf("effects compared (nodes × paths): %v", compared)
	for _, name := range []string{"prefix cache hit rate", "spec acceptance rate", "spec accept length", "lora running", "lora waiting"} {
		if compared[name] == 0 {
			t.Errorf("no node compared on %s", name)
		}
	}
}

// loraCounts counts per node the distinct adapters named running and
// waiting by the newest series (largest value) of each engine core of the
// LoRA info family; nil maps when family is "".
func loraCounts(t *testing.T, ctx context.Context, sf *simFleet, at time.Time, family string) (running, waiting map[string]float64) {
	if family == "" {
		return nil, nil
	}
	vec, err := sf.prom.QueryVector(ctx, family, at)
	if err != nil {
		t.Fatal(err)
	}
	newest := map[[2]string]*model.Sample{}
	for _, s := range vec {
		k := [2]string{string(s.Metric["node"]), string(s.Metric["engine"])}
		if o := newest[k]; o == nil || s.Value > o.Value {
			newest[k] = s
		}
	}
	run, wait := map[string]map[string]bool{}, map[string]map[string]bool{}
	for k, s := range newest {
		for set, label := range map[*map[string]map[string]bool]model.LabelName{&run: "running_lora_adapters", &wait: "waiting_lora_adapters"} {
			if (*set)[k[0]] == nil {
				(*set)[k[0]] = map[string]bool{}
			}
			for n := range strings.SplitSeq(string(s.Metric[label]), ",") {
				if n != "" {
					(*set)[k[0]][n] = true
				}
			}
		}
	}
	running, waiting = map[string]float64{}, map[string]float64{}
	for node := range run {
		running[node], waiting[node] = float64(len(run[node])), float64(len(wait[node]))
	}
	return running, waiting
}
