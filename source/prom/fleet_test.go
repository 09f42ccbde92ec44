package prom

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Bucket layouts of vLLM and SGLang (engine/testdata), +Inf implied.
var layouts = map[llmdiagv1.Engine]map[engine.Concept][]float64{
	llmdiagv1.Engine_ENGINE_VLLM: {
		engine.TTFT:      {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560},
		engine.E2E:       {0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680},
		engine.ITL:       {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80},
		engine.TPOT:      {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80},
		engine.QueueTime: {0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680},
	},
	llmdiagv1.Engine_ENGINE_SGLANG: {
		engine.TTFT:      {0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400},
		engine.E2E:       {0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400},
		engine.ITL:       {0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8},
		engine.TPOT:      {0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8},
		engine.QueueTime: {0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000},
	},
}

// synthNode is one simulated node: its engine and data-parallel degree.
type synthNode struct {
	id  string
	eng llmdiagv1.Engine
	dp  int
}

// synthFleet returns n nodes: vLLM with 2 engine cores, or, with mixed,
// every other node SGLang with 2 dp ranks of 2 tp ranks.
func synthFleet(n int, mixed bool) []synthNode {
	nodes := make([]synthNode, n)
	for i := range nodes {
		nodes[i] = synthNode{id: fmt.Sprintf("10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255), eng: llmdiagv1.Engine_ENGINE_VLLM, dp: 2}
		if mixed && i%2 == 1 {
			nodes[i].eng = llmdiagv1.Engine_ENGINE_SGLANG
		}
	}
	return nodes
}

// synthBodies answers every query of qs for nodes at at, with what
// Prometheus would return: values per node, per replica, per bucket.
func synthBodies(qs []query, nodes []synthNode, at time.Time) map[string]canned {
	out := make(map[string]canned, len(qs))
	ts := strconv.FormatFloat(float64(at.UnixMilli())/1e3, 'f', 3, 64)
	for _, q := range qs {
		var sb strings.Builder
		sb.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
		first := true
		emit := func(labels string, v float64) {
			if !first {
				sb.WriteByte(',')
			}
			first = false
			sb.WriteString(`{"metric":{`)
			sb.WriteString(labels)
			sb.WriteString(`},"value":[`)
			sb.WriteString(ts)
			sb.WriteString(`,"`)
			sb.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			sb.WriteString(`"]}`)
		}
		m, _ := engine.Lookup(q.engine)
		for i, n := range nodes {
			if n.eng != q.engine {
				continue
			}
			inst := `"instance":"` + n.id + `"`
			load := float64(i%17) + 1
			switch q.shape {
			case shapeIdentity:
				for r := range n.dp {
					if n.eng == llmdiagv1.Engine_ENGINE_SGLANG {
						for tp := range 2 {
							emit(fmt.Sprintf(`%s,"dp_rank":"%d","tp_rank":"%d","model_name":"deepseek-ai/DeepSeek-V3"`, inst, r, tp), float64(at.Unix()-2))
						}
						continue
					}
					emit(fmt.Sprintf(`%s,"%s":"%d","model_name":"Qwen/Qwen3-32B"`, inst, m.DPLabel, r), float64(at.Unix()-2))
				}
			case shapeNode:
				emit(inst, load*float64(q.concept+1))
			case shapeRanked:
				// Two tensor-parallel ranks per replica, reporting the same.
				for r := range n.dp {
					v := load * float64(q.concept+1)
					switch q.concept {
					case engine.KVUsage:
						v = 0.1 * float64(r+1)
					case engine.KVCapacityTokens, engine.KVUsedTokens:
						v = 100000 / float64(q.concept-engine.KVCapacityTokens+1)
					}
					for tp := range 2 {
						emit(fmt.Sprintf(`%s,"dp_rank":"%d","tp_rank":"%d"`, inst, r, 2*r+tp), v)
					}
				}
			case shapeReplica, shapeInfo:
				for r := range n.dp {
					labels := inst
					for _, l := range m.ReplicaLabels {
						labels += fmt.Sprintf(`,"%s":"%d"`, l, r)
					}
					v := 0.1 * float64(r+1)
					if q.concept != engine.KVUsage {
						v = 100000
					}
					if q.shape == shapeInfo {
						labels += `,"num_gpu_blocks":"6000","block_size":"16"`
						v = 1
					}
					emit(labels, v)
				}
			case shapeBuckets:
				bounds := layouts[q.engine][q.concept]
				for j, le := range bounds {
					// A rising cumulative count: a spread of observations.
					emit(inst+`,"le":"`+strconv.FormatFloat(le, 'g', -1, 64)+`"`, load*float64(j*j)/float64(len(bounds)))
				}
				emit(inst+`,"le":"+Inf"`, load*float64(len(bounds)))
			case shapeHistSum:
				emit(inst, load*3.5)
			case shapeHistCount:
				emit(inst, load*float64(len(layouts[q.engine][q.concept])))
			case shapeCreated:
				emit(inst, float64(at.Unix()-3600))
			}
		}
		sb.WriteString(`]}}`)
		out[q.expr] = canned{http.StatusOK, []byte(sb.String())}
	}
	return out
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
		if got := int(fake.queries.Load()); got != src.QueriesLastRefresh() {
			t.Errorf("%d nodes: server saw %d queries, QueriesLastRefresh = %d", n, got, src.QueriesLastRefresh())
		}
		counts[n] = src.QueriesLastRefresh()
		t.Logf("%d nodes (vLLM and SGLang): %d queries", n, counts[n])
	}
	if counts[10] != counts[1000] {
		t.Errorf("queries per refresh: %d for 10 nodes, %d for 1,000", counts[10], counts[1000])
	}
	// The identity of every engine, then the data of vLLM and SGLang.
	want := len(engine.Engines())
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
