package sim_test

import (
	"bytes"
	"maps"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// failure is a family, or with a label the family's series of one label
// value, that counts preemptions or failed requests.
type failure struct{ family, label, value string }

// failures lists the series Quirks.NoFailureCounters removes, per engine.
func failures(e sim.Engine) []failure {
	switch e {
	case sim.VLLM:
		return []failure{{"vllm:num_preemptions_total", "", ""},
			{"vllm:request_success_total", "finished_reason", "abort"}, {"vllm:request_success_total", "finished_reason", "error"}}
	case sim.VLLMOTel:
		return []failure{{"vllm_num_preemptions", "", ""},
			{"vllm_request_success", "finished_reason", "abort"}, {"vllm_request_success", "finished_reason", "error"}}
	case sim.SGLang, sim.SGLangLegacy:
		return []failure{{"sglang:num_retracted_requests_total", "", ""}, {"sglang:num_aborted_requests_total", "", ""}}
	case sim.TRTLLM:
		return []failure{{"trtllm_request_success_total", "finished_reason", "abort"},
			{"trtllm_request_success_total", "finished_reason", "error"}}
	case sim.Triton:
		return []failure{{"nv_inference_request_failure", "", ""}}
	case sim.TGI:
		return []failure{{"tgi_request_failure", "", ""}}
	case sim.Dynamo:
		return []failure{{"dynamo_frontend_requests_total", "status", "error"}}
	}
	return nil
}

// seriesOf counts the exposed series of f.
func seriesOf(mfs map[string]*dto.MetricFamily, f failure) int {
	n := 0
	for _, m := range mfs[f.family].GetMetric() {
		if f.label == "" || labelsOf(m)[f.label] == f.value {
			n++
		}
	}
	return n
}

// schemaNode is the schemas scenario's node of engine e.
func schemaNode(t *testing.T, e sim.Engine) sim.Node {
	t.Helper()
	cfg := simtest.Scenario(t, "schemas", 1)
	for _, n := range cfg.Nodes {
		if n.Engine == e {
			return n
		}
	}
	t.Fatalf("schemas has no %s node", e)
	return sim.Node{}
}

func newNodeFleet(t *testing.T, n sim.Node) *sim.Fleet {
	t.Helper()
	f, err := sim.New(sim.Config{Seed: 1, Nodes: []sim.Node{n}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestLazySeries checks Quirks.LazySeries with the field quirks, in every
// schema: a fresh node exposes its gauges only; once its first request has
// finished, every other family is there but the failure ones, each with the
// series its events created (finished_reason "stop", not "length"), and
// the values agree with the simulated state.
func TestLazySeries(t *testing.T) {
	for _, e := range sim.Engines() {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			n := schemaNode(t, e)
			n.Quirks = sim.FieldQuirks()
			n.Workload.Prompt, n.Workload.Output = sim.LogNormal(1000, 0), sim.LogNormal(50, 0)
			f := newNodeFleet(t, n)
			all := families(e, n)

			fresh := scrape(t, f, n.ID)
			gauges := map[string]family{}
			for name, fam := range all {
				if fam.typ == dto.MetricType_GAUGE {
					gauges[name] = fam
				}
			}
			checkFamilies(t, e, gauges, fresh) // no counter, no histogram
			for name := range gauges {
				if fresh[name] == nil {
					t.Errorf("fresh node: gauge %s missing", name)
				}
			}

			var st sim.NodeStats
			for range 600 {
				if st, _ = f.Stats(n.ID); st.Finished > 0 {
					break
				}
				f.Step(100 * time.Millisecond)
			}
			if st.Finished == 0 {
				t.Fatalf("no request finished in a minute: %+v", st)
			}
			mfs := scrape(t, f, n.ID)
			want := maps.Clone(all)
			for _, fl := range failures(e) {
				if seriesOf(mfs, fl) != 0 {
					t.Errorf("after the first request: %v exposed", fl)
				}
				if fl.label == "" {
					delete(want, fl.family)
				}
			}
			for name, fam := range want {
				fam.lazy = false // every remaining family has had its first event
				want[name] = fam
			}
			checkFamilies(t, e, want, mfs)
			checkValues(t, e, n, mfs, st)
			for _, fl := range []failure{
				{"vllm:request_success_total", "finished_reason", "length"},
				{"vllm_request_success", "finished_reason", "length"},
				{"trtllm_request_success_total", "finished_reason", "length"},
			} {
				if seriesOf(mfs, fl) != 0 {
					t.Errorf("%v exposed before any request hit its length limit", fl)
				}
			}
		})
	}
}

// TestTTFTExcludesQueue overloads a node (2 batch slots, ~3× the arrivals
// they serve) with and without Quirks.TTFTExcludesQueue: the physics is
// the same; with the quirk the mean TTFT is the prefill alone, far below
// the mean queue time, without it TTFT includes the queue. Schemas without a
// TTFT histogram (Triton, TGI) expose the same bytes either way.
func TestTTFTExcludesQueue(t *testing.T) {
	ttftOf := map[sim.Engine]string{
		sim.VLLM: "vllm:time_to_first_token_seconds", sim.VLLMOTel: "vllm_time_to_first_token_seconds",
		sim.SGLang: "sglang:time_to_first_token_seconds", sim.SGLangLegacy: "sglang:time_to_first_token_seconds",
		sim.TRTLLM: "trtllm_time_to_first_token_seconds", sim.Dynamo: "dynamo_frontend_time_to_first_token_seconds",
	}
	queueOf := map[sim.Engine]string{
		sim.VLLM: "vllm:request_queue_time_seconds", sim.VLLMOTel: "vllm_request_queue_time_seconds",
		sim.SGLang: "sglang:queue_time_seconds", sim.SGLangLegacy: "sglang:queue_time_seconds",
		sim.TRTLLM: "trtllm_request_queue_time_seconds",
	}
	for _, e := range sim.Engines() {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			n := schemaNode(t, e)
			n.Perf.MaxNumSeqs = 2
			n.Workload.Rate = 3
			run := func(q sim.Quirks) (*sim.Fleet, sim.NodeStats) {
				n := n
				n.Quirks = q
				f := newNodeFleet(t, n)
				f.Step(2 * time.Minute)
				st, _ := f.Stats(n.ID)
				return f, st
			}
			ref, refSt := run(sim.Quirks{})
			quirk, st := run(sim.Quirks{TTFTExcludesQueue: true})
			if st != refSt {
				t.Fatalf("state %+v with the quirk, %+v without", st, refSt)
			}
			if st.Waiting < 50 {
				t.Fatalf("queue %d: not overloaded", st.Waiting)
			}
			name, ok := ttftOf[e]
			if !ok {
				a, _ := ref.Metrics(n.ID)
				b, _ := quirk.Metrics(n.ID)
				if !bytes.Equal(a, b) {
					t.Error("no TTFT in this schema, yet the quirk changed the exposition")
				}
				return
			}
			withQ, without := histOf(scrape(t, quirk, n.ID), name), histOf(scrape(t, ref, n.ID), name)
			if withQ.count == 0 || withQ.count != without.count {
				t.Fatalf("TTFT count %v with the quirk, %v without", withQ.count, without.count)
			}
			if withQ.mean() > 1 || without.mean() < 10 {
				t.Errorf("TTFT mean %.3gs with the quirk (want the prefill, < 1s), %.3gs without (want the queue in it, > 10s)",
					withQ.mean(), without.mean())
			}
			if qn, ok := queueOf[e]; ok {
				q := histOf(scrape(t, quirk, n.ID), qn)
				if !(withQ.mean() < q.mean()/10) {
					t.Errorf("TTFT mean %.3gs with the quirk, queue time mean %.3gs: want TTFT below a tenth of it", withQ.mean(), q.mean())
				}
			}
		})
	}
}

// TestNoFailureCounters drives a tight node into preemptions and queue
// timeouts in every schema: without the quirk its failure series count
// them, with Quirks.NoFailureCounters (alone or with the other field
// quirks) none is exposed, and the state is the same.
func TestNoFailureCounters(t *testing.T) {
	for _, e := range sim.Engines() {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			n := sim.Node{ID: "tight", Model: "m", Engine: e,
				Profile: fleet.Profile{DataParallel: 2},
				Perf: sim.Perf{StepBase: 10 * time.Millisecond, StepPerSeq: time.Millisecond,
					PrefillTokensPerSec: 20000, MaxBatchedTokens: 2048, MaxNumSeqs: 16,
					KVCapacityTokens: 16384, MaxModelLen: 8192, ReserveRatio: 0.01},
				Workload: sim.Workload{Rate: 6, Prompt: sim.LogNormal(1000, 0.5), Output: sim.LogNormal(800, 0.6),
					QueueTimeout: 5 * time.Second},
			}
			var refSt sim.NodeStats
			for i, q := range []sim.Quirks{{}, {NoFailureCounters: true}, sim.FieldQuirks()} {
				n.Quirks = q
				f := newNodeFleet(t, n)
				f.Step(time.Minute)
				st, _ := f.Stats(n.ID)
				mfs := scrape(t, f, n.ID)
				if i == 0 {
					refSt = st
					if st.Preemptions == 0 || st.Aborted == 0 {
						t.Fatalf("preemptions %d, aborted %d: want both", st.Preemptions, st.Aborted)
					}
					exposed := 0
					for _, fl := range failures(e) {
						exposed += seriesOf(mfs, fl)
					}
					if exposed == 0 {
						t.Fatal("without the quirk no failure series is exposed: the test checks nothing")
					}
					continue
				}
				if st != refSt {
					t.Errorf("%+v: state %+v, want %+v", q, st, refSt)
				}
				for _, fl := range failures(e) {
					if k := seriesOf(mfs, fl); k != 0 {
						t.Errorf("%+v: %d series of %v exposed", q, k, fl)
					}
				}
			}
		})
	}
}
