package prom_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/source/prom"
)

// TestRuleExpressionsParse: every engine's rule expressions parse with the
// real PromQL parser, use the node label and window given, and exist where
// the mapping table has the concept.
func TestRuleExpressionsParse(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for _, e := range engine.Engines() {
		m, _ := engine.Lookup(e)
		x, err := prom.RuleExpressions(e, prom.RuleConfig{NodeLabel: "pod", Window: 90 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		for name, expr := range map[string]string{
			"model": x.Model, "queue": x.Queue, "running": x.Running, "kv": x.KVPressure,
			"preemptions": x.Preemptions, "ttft": x.TTFTBuckets, "e2e": x.E2EBuckets, "itl": x.ITLBuckets,
			"vanished": x.Vanished, "prompt": x.PromptTokens, "generation": x.GenerationTokens,
		} {
			if expr == "" {
				continue
			}
			if _, err := p.ParseExpr(expr); err != nil {
				t.Errorf("%s %s: %v\n%s", e, name, err, expr)
			}
			if !strings.Contains(expr, "pod") || strings.Contains(expr, "instance") {
				t.Errorf("%s %s: does not key by the node label pod: %s", e, name, expr)
			}
		}
		for _, c := range []struct {
			concept engine.Concept
			expr    string
		}{
			{engine.Queue, x.Queue}, {engine.Running, x.Running}, {engine.Preemptions, x.Preemptions},
			{engine.TTFT, x.TTFTBuckets}, {engine.E2E, x.E2EBuckets}, {engine.ITL, x.ITLBuckets},
			{engine.PromptTokens, x.PromptTokens}, {engine.GenerationTokens, x.GenerationTokens},
		} {
			if _, ok := m.Concepts[c.concept]; ok != (c.expr != "") {
				t.Errorf("%s %s: in the table %v, expression %q", e, c.concept, ok, c.expr)
			}
		}
		if strings.Contains(x.Preemptions+x.TTFTBuckets+x.GenerationTokens, "[5m]") {
			t.Errorf("%s: window 90s not used", e)
		}
		if x.Model == "" || x.Vanished == "" {
			t.Errorf("%s: no model or vanished expression", e)
		}
	}
	if _, err := prom.RuleExpressions(llmdiagv1.Engine_ENGINE_VLLM, prom.RuleConfig{NodeLabel: "a-b"}); err == nil {
		t.Error("invalid node label accepted")
	}
	if _, err := prom.RuleExpressions(llmdiagv1.Engine_ENGINE_UNSPECIFIED, prom.RuleConfig{}); err == nil {
		t.Error("engine without mapping accepted")
	}
}
