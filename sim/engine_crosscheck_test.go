package sim_test

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/sim"
)

// exposes says which concepts a schema has; the others must read as
// UNKNOWN (nil), never as zero.
type exposes struct {
	kv, tokens, preemptions     bool
	ttft, e2e, itl, tpot, queue bool
	e2eTotal                    bool // E2E as cumulative sum and count only
	// aborts: requests aborted or failed are counted apart. lazyAborts:
	// the counter appears with the first abort (TGI), UNKNOWN before.
	aborts, lazyAborts bool
}

// engineSees is, per schema, what package engine must read off the
// simulator's exposition. Every schema the simulator speaks is listed:
// engine.Detect and engine.Extract handle all of them.
var engineSees = map[sim.Engine]exposes{
	sim.VLLM:         {kv: true, tokens: true, preemptions: true, ttft: true, e2e: true, itl: true, tpot: true, queue: true, aborts: true},
	sim.VLLMOTel:     {kv: true, tokens: true, preemptions: true, ttft: true, e2e: true, itl: true, tpot: true, queue: true, aborts: true},
	sim.SGLang:       {kv: true, tokens: true, preemptions: true, ttft: true, e2e: true, itl: true, queue: true, aborts: true},
	sim.SGLangLegacy: {kv: true, tokens: true, preemptions: true, ttft: true, e2e: true, itl: true, queue: true, aborts: true},
	sim.TRTLLM:       {kv: true, ttft: true, e2e: true, tpot: true, queue: true, aborts: true},
	sim.Triton:       {kv: true, e2eTotal: true, aborts: true},
	sim.TGI:          {tokens: true, e2e: true, tpot: true, queue: true, aborts: true, lazyAborts: true},
	sim.Dynamo:       {tokens: true, ttft: true, e2e: true, itl: true, aborts: true},
}

// TestEngineCrossCheck reads every schema's exposition with package engine,
// as llmdiag does: the engine is detected, each concept the schema has is
// read and agrees with the simulated state, and each it lacks is UNKNOWN.
// It runs the schemas scenario as it is and with more traffic than the
// nodes' 4 batch slots serve, so that the queues are not empty, and the
// loaded one also with a queue timeout, so that requests are abandoned.
func TestEngineCrossCheck(t *testing.T) {
	t.Parallel()
	healthy := simtest.Scenario(t, "schemas", 1)
	loaded := healthy
	loaded.Nodes = slices.Clone(healthy.Nodes)
	for i := range loaded.Nodes {
		n := &loaded.Nodes[i]
		n.Perf.MaxNumSeqs = 4
		n.Workload.Rate = 4
	}
	aborting := loaded
	aborting.Nodes = slices.Clone(loaded.Nodes)
	for i := range aborting.Nodes {
		aborting.Nodes[i].Workload.QueueTimeout = 3 * time.Second
	}
	for _, cfg := range []sim.Config{healthy, loaded, aborting} {
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Step(45 * time.Second)
		for _, n := range cfg.Nodes {
			want, ok := engineSees[n.Engine]
			if !ok {
				t.Errorf("%s: schema %s not in the cross-check table", n.ID, n.Engine)
				continue
			}
			body, err := f.Metrics(n.ID)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := engine.Parse(bytes.NewReader(body), engine.Limits{})
			if err != nil {
				t.Fatalf("%s: %v", n.ID, err)
			}
			if len(exp.Warnings) > 0 {
				t.Errorf("%s: exposition warnings %q", n.ID, exp.Warnings)
			}
			mfs := exp.Families
			st, _ := f.Stats(n.ID)
			crossCheckEngine(t, n, want, mfs, st)
			if cfg.Nodes[0].Workload.QueueTimeout == 3*time.Second && st.Aborted == 0 {
				t.Errorf("%s with a queue timeout: no request abandoned", n.ID)
			}
		}
		if s, _ := f.Stats("triton-0"); cfg.Nodes[0].Perf.MaxNumSeqs == 4 && s.Waiting < 5 {
			t.Errorf("loaded triton-0: queue %d, want a queue", s.Waiting)
		}
	}
}

func crossCheckEngine(t *testing.T, n sim.Node, want exposes, mfs map[string]*dto.MetricFamily, st sim.NodeStats) {
	t.Helper()
	id := string(n.Engine) + " " + n.ID
	wantEngine, err := fleet.ParseEngine(n.Engine.FleetName())
	if err != nil {
		t.Fatal(err)
	}
	if got := engine.Detect(mfs); got != wantEngine {
		t.Errorf("%s: Detect = %v, want %v", id, got, wantEngine)
		return
	}
	s := engine.Extract(wantEngine, mfs, time.Unix(0, 0))
	if len(s.Errors) > 0 {
		t.Errorf("%s: Extract errors %v", id, s.Errors)
	}
	// known checks that a concept is read exactly when the schema has it.
	known := func(what string, v *float64, has bool) bool {
		t.Helper()
		if (v != nil) != has {
			t.Errorf("%s: %s = %v, want known: %v", id, what, fmtPtr(v), has)
		}
		return v != nil && has
	}
	eq := func(what string, v *float64, want float64) {
		t.Helper()
		if math.Abs(*v-want) > 1e-9*max(1, math.Abs(want)) {
			t.Errorf("%s: %s = %v, simulated %v", id, what, *v, want)
		}
	}
	in := func(what string, v *float64, lo, hi float64) {
		t.Helper()
		if *v < lo || *v > hi {
			t.Errorf("%s: %s = %v, want in [%v, %v]", id, what, *v, lo, hi)
		}
	}
	wait, run, fin := float64(st.Waiting), float64(st.Running), float64(st.Finished)

	// Queue and running are known for every schema. Dynamo's frontend
	// counts as queued every request without its first token (waiting or
	// in prefill), and as running the others it has not answered.
	if known("queue", s.Queue, true) && known("running", s.Running, true) {
		if n.Engine == sim.Dynamo {
			in("queue", s.Queue, wait-float64(st.Preemptions), wait+run)
			eq("queue+running", sample.F(*s.Queue+*s.Running), wait+run)
		} else {
			eq("queue", s.Queue, wait)
			eq("running", s.Running, run)
		}
	}
	if known("KV usage", s.KVUsage, want.kv) {
		eq("KV usage", s.KVUsage, st.KVUsage)
	}
	if known("KV capacity", s.KVCapacityTokens, n.Engine != sim.TGI) {
		eq("KV capacity", s.KVCapacityTokens, capacity(n))
	}
	if known("prompt tokens", s.PromptTokens, want.tokens) {
		eq("prompt tokens", s.PromptTokens, float64(st.PromptTokens))
	}
	if known("generation tokens", s.GenerationTokens, want.tokens) {
		if n.Engine == sim.TGI { // counted when a request ends
			in("generation tokens", s.GenerationTokens, 0, float64(st.GenerationTokens))
		} else {
			eq("generation tokens", s.GenerationTokens, float64(st.GenerationTokens))
		}
	}
	if known("preemptions", s.Preemptions, want.preemptions) {
		eq("preemptions", s.Preemptions, float64(st.Preemptions))
	}
	// Finished requests, with the abandoned ones where the schema counts
	// them among its requests (vLLM's and TRT-LLM's finished_reason=abort,
	// Dynamo's status=error).
	if known("requests finished", s.RequestsFinished, true) {
		in("requests finished", s.RequestsFinished, fin, fin+float64(st.Aborted))
	}
	// Abandoned requests, where the schema counts them apart; UNKNOWN
	// where it does not, or (lazyAborts) before the first one.
	if known("requests aborted", s.RequestsAborted, want.aborts && (!want.lazyAborts || st.Aborted > 0)) {
		eq("requests aborted", s.RequestsAborted, float64(st.Aborted))
	}
	hists := []struct {
		h   sample.Hist
		has bool
	}{
		{sample.TTFT, want.ttft}, {sample.E2E, want.e2e}, {sample.ITL, want.itl},
		{sample.TPOT, want.tpot}, {sample.QueueTime, want.queue},
	}
	for _, x := range hists {
		if got := s.Hists[x.h]; (got != nil) != x.has {
			t.Errorf("%s: %s histogram known: %v, want %v", id, x.h, got != nil, x.has)
		}
	}
	if h := s.Hists[sample.E2E]; h != nil {
		eq("E2E count", &h.Count, fin)
	}
	if tot := s.Totals[sample.E2E]; (tot != nil) != want.e2eTotal {
		t.Errorf("%s: E2E totals known: %v, want %v", id, tot != nil, want.e2eTotal)
	} else if tot != nil {
		eq("E2E total count", &tot.Count, fin)
		if fin > 0 {
			in("E2E mean", sample.F(tot.Sum/tot.Count), 0.01, 3600)
		}
	}
}

func fmtPtr(v *float64) any {
	if v == nil {
		return "nil"
	}
	return *v
}
