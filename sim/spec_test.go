package sim_test

import (
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// lightNode is the kv-offload scenario's node without its offload tier:
// a vLLM Qwen3-8B with light chat traffic, decode-bound per request.
func lightNode(t *testing.T) sim.Config {
	t.Helper()
	cfg := simtest.Scenario(t, "kv-offload", testSeed())
	cfg.Nodes[0].KVOffload = ""
	cfg.Warmup = 3 * time.Minute
	return cfg
}

// sumOf is the sum of a family's counter or gauge values.
func sumOf(mfs map[string]*dto.MetricFamily, name string) (float64, bool) {
	mf, ok := mfs[name]
	var v float64
	for _, m := range mf.GetMetric() {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return v, ok
}

// TestSpecDecode: with speculative decoding (3 draft tokens, each accepted
// with probability 0.7 after an accepted one), vLLM's counters give the
// acceptance the draws imply (E[accepted] = Σ 0.7^i, i = 1..3 = 1.533 of
// 3 tokens: 0.511; 2.53 tokens per step and request), decode per request
// gets faster than the same node's without it, by less than the tokens
// per step (each step verifies 4 tokens per request and runs 3 draft
// passes), and engine.Extract reads the counters back. SGLang exports
// the same acceptance as its gauges. Without it, no spec family exists.
func TestSpecDecode(t *testing.T) {
	const k, alpha = 3, 0.7
	wantAccepted := alpha * (1 - math.Pow(alpha, k)) / (1 - alpha) // per draft
	tpot := map[bool]float64{}
	for _, on := range []bool{false, true} {
		cfg := lightNode(t)
		if on {
			cfg.Nodes[0].SpecDecode = &sim.SpecDecode{DraftTokens: k, AcceptRate: alpha}
		}
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Step(cfg.Warmup)
		mfs := scrape(t, f, "qwen3-8b-0")
		tpot[on] = histOf(mfs, "vllm:request_time_per_output_token_seconds").mean()
		drafts, has := sumOf(mfs, "vllm:spec_decode_num_drafts_total")
		if has != on {
			t.Fatalf("spec on %v: spec_decode counters present %v", on, has)
		}
		if !on {
			continue
		}
		draftTokens, _ := sumOf(mfs, "vllm:spec_decode_num_draft_tokens_total")
		accepted, _ := sumOf(mfs, "vllm:spec_decode_num_accepted_tokens_total")
		rate, length := accepted/draftTokens, 1+accepted/drafts
		t.Logf("drafts %.0f, draft tokens %.0f, accepted %.0f: acceptance %.3f, accept length %.2f", drafts, draftTokens, accepted, rate, length)
		// Draft tokens are cut near a request's end: slightly fewer than k per draft.
		if draftTokens > k*drafts || draftTokens < 0.9*k*drafts {
			t.Errorf("draft tokens %.0f for %.0f drafts, want just under %d each", draftTokens, drafts, k)
		}
		if math.Abs(accepted/drafts-wantAccepted) > 0.1 {
			t.Errorf("accepted per draft %.3f, want %.3f ± 0.1", accepted/drafts, wantAccepted)
		}
		s := engine.Extract(llmdiagv1.Engine_ENGINE_VLLM, mfs, time.Now())
		if e := s.Effects; e.SpecDrafts == nil || *e.SpecDrafts != drafts || *e.SpecAcceptedTokens != accepted {
			t.Errorf("engine.Extract reads drafts %v accepted %v, want %v %v", e.SpecDrafts, e.SpecAcceptedTokens, drafts, accepted)
		}
	}
	speedup := tpot[false] / tpot[true]
	t.Logf("mean TPOT %.4f s without, %.4f s with: ×%.2f", tpot[false], tpot[true], speedup)
	if speedup < 1.3 || speedup > 1+wantAccepted {
		t.Errorf("decode speed-up ×%.2f, want between ×1.3 and the tokens per step ×%.2f", speedup, 1+wantAccepted)
	}

	// SGLang: the gauges over the last window, absent without it.
	cfg := sim.WithEngine(lightNode(t), sim.SGLang)
	cfg.Nodes[0].SpecDecode = &sim.SpecDecode{DraftTokens: k, AcceptRate: alpha}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(cfg.Warmup)
	mfs := scrape(t, f, "qwen3-8b-0")
	length, _ := sumOf(mfs, "sglang:spec_accept_length")
	rate, _ := sumOf(mfs, "sglang:spec_accept_rate")
	t.Logf("sglang: accept length %.2f, rate %.3f", length, rate)
	if math.Abs(length-(1+wantAccepted)) > 0.35 || math.Abs(rate-wantAccepted/k) > 0.12 {
		t.Errorf("sglang accept length %.2f rate %.3f, want %.2f and %.3f", length, rate, 1+wantAccepted, wantAccepted/k)
	}
}

// TestLoRA: requests name one of four adapters and at most two may be in
// the running batch: vLLM's lora_requests_info names at most two running,
// requests whose adapter is not loaded wait while others run, and
// engine.Extract counts the adapters; without LoRA the family is absent.
func TestLoRA(t *testing.T) {
	cfg := lightNode(t)
	f0, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f0.Step(time.Minute)
	if _, ok := scrape(t, f0, "qwen3-8b-0")["vllm:lora_requests_info"]; ok {
		t.Fatal("lora_requests_info without LoRA")
	}

	cfg.Nodes[0].LoRA = &sim.LoRA{Adapters: []string{"sql", "chat", "code", "math"}, MaxLoaded: 2}
	cfg.Nodes[0].Workload.Rate *= 3
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Step(cfg.Warmup)
	var waitedWhileRunning, series int
	for range 60 {
		f.Step(2 * time.Second)
		mfs := scrape(t, f, "qwen3-8b-0")
		info := mfs["vllm:lora_requests_info"]
		series = len(info.GetMetric())
		s := engine.Extract(llmdiagv1.Engine_ENGINE_VLLM, mfs, time.Now())
		run, wait := s.Effects.LoRAAdaptersRunning, s.Effects.LoRAAdaptersWaiting
		if run == nil || wait == nil || *run > 2 {
			t.Fatalf("adapters running %v waiting %v: want at most 2 running", run, wait)
		}
		st, _ := f.Stats("qwen3-8b-0")
		if st.Waiting > 0 && st.Running > 0 && st.Running < cfg.Nodes[0].Perf.MaxNumSeqs {
			// Slots free and yet requests wait: for an adapter.
			waitedWhileRunning++
		}
		for _, m := range info.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "running_lora_adapters" && strings.Count(l.GetValue(), ",") > 1 {
					t.Fatalf("running adapters %q: more than 2", l.GetValue())
				}
			}
		}
	}
	t.Logf("%d lora_requests_info series; %d of 60 reads with free slots and requests waiting", series, waitedWhileRunning)
	if waitedWhileRunning == 0 {
		t.Error("no request ever waited for its adapter while slots were free")
	}
}
