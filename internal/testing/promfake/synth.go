package promfake

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Query is one query to answer: prom.PlannedQuery's fields.
type Query struct {
	Expr   string
	Engine llmdiagv1.Engine
	// Shape is prom.PlannedQuery.Shape: "identity", "value", "replicas",
	// "info", "ranked", "buckets", "sum", "count", "created" or "effects".
	Shape   string
	Concept engine.Concept
}

// Layouts are the bucket bounds of vLLM and SGLang (engine/testdata), +Inf
// implied.
var Layouts = map[llmdiagv1.Engine]map[engine.Concept][]float64{
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

// Node is one simulated node: its engine and data-parallel degree.
type Node struct {
	ID     string
	Engine llmdiagv1.Engine
	DP     int
}

// Fleet returns n nodes: vLLM with 2 engine cores, or, with mixed, every
// other node SGLang with 2 dp ranks of 2 tp ranks. Ids are distinct
// addresses (10.a.b.c:8000).
func Fleet(n int, mixed bool) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{ID: fmt.Sprintf("10.%d.%d.%d:8000", i>>16&255, i>>8&255, i&255), Engine: llmdiagv1.Engine_ENGINE_VLLM, DP: 2}
		if mixed && i%2 == 1 {
			nodes[i].Engine = llmdiagv1.Engine_ENGINE_SGLANG
		}
	}
	return nodes
}

// Holes of a template: values that depend on the evaluation time, written
// as hole followed by one of the kinds.
const (
	hole       = 0
	holeTS     = 'T' // the sample timestamp: the evaluation time
	holeScrape = 'S' // the last scrape: 2 s before
	holeStart  = 'C' // when the counters started: an hour before
)

// Synth answers the queries of a synthetic fleet with what Prometheus would
// return: values per node, per replica, per bucket. The values do not
// depend on the time; the timestamps, the last scrape and the counters'
// start follow it. It is safe for concurrent use.
type Synth struct {
	tmpl map[string][]byte // by expression, with holes

	mu       sync.Mutex
	rendered map[string]renderedBody
}

type renderedBody struct {
	at   time.Time
	body []byte
}

// NewSynth makes the answers of qs for nodes.
func NewSynth(qs []Query, nodes []Node) *Synth {
	s := &Synth{tmpl: make(map[string][]byte, len(qs)), rendered: map[string]renderedBody{}}
	for _, q := range qs {
		s.tmpl[q.Expr] = template(q, nodes)
	}
	return s
}

// Size is the bytes of one answer to every query.
func (s *Synth) Size() int {
	n := 0
	for _, t := range s.tmpl {
		n += len(t) // holes are shorter than what fills them; close enough
	}
	return n
}

// Body returns the answer to expr evaluated at at; false when expr is not a
// query of s. The last rendering of each expression is kept, so that a
// refresh's queries at one time are rendered once.
func (s *Synth) Body(expr string, at time.Time) ([]byte, bool) {
	t, ok := s.tmpl[expr]
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	r, ok := s.rendered[expr]
	s.mu.Unlock()
	if ok && r.at.Equal(at) {
		return r.body, true
	}
	b := render(t, at)
	s.mu.Lock()
	s.rendered[expr] = renderedBody{at, b}
	s.mu.Unlock()
	return b, true
}

// At returns every answer evaluated at at, by expression, with status 200.
func (s *Synth) At(at time.Time) map[string]Canned {
	out := make(map[string]Canned, len(s.tmpl))
	for expr, t := range s.tmpl {
		out[expr] = Canned{http.StatusOK, render(t, at)}
	}
	return out
}

// Bodies returns the answers of qs for nodes evaluated at at.
func Bodies(qs []Query, nodes []Node, at time.Time) map[string]Canned {
	return NewSynth(qs, nodes).At(at)
}

// render fills the holes of t for at.
func render(t []byte, at time.Time) []byte {
	fill := map[byte][]byte{
		holeTS:     strconv.AppendFloat(nil, float64(at.UnixMilli())/1e3, 'f', 3, 64),
		holeScrape: strconv.AppendFloat(nil, float64(at.Unix()-2), 'g', -1, 64),
		holeStart:  strconv.AppendFloat(nil, float64(at.Unix()-3600), 'g', -1, 64),
	}
	out := make([]byte, 0, len(t)+len(t)/8)
	for {
		i := bytes.IndexByte(t, hole)
		if i < 0 || i+1 >= len(t) {
			return append(out, t...)
		}
		out = append(append(out, t[:i]...), fill[t[i+1]]...)
		t = t[i+2:]
	}
}

// template is the answer to q for nodes, with holes for what depends on
// the evaluation time.
func template(q Query, nodes []Node) []byte {
	var sb bytes.Buffer
	sb.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	first := true
	emitRaw := func(labels string, v []byte) {
		if !first {
			sb.WriteByte(',')
		}
		first = false
		sb.WriteString(`{"metric":{`)
		sb.WriteString(labels)
		sb.WriteString(`},"value":[`)
		sb.Write([]byte{hole, holeTS})
		sb.WriteString(`,"`)
		sb.Write(v)
		sb.WriteString(`"]}`)
	}
	emit := func(labels string, v float64) { emitRaw(labels, strconv.AppendFloat(nil, v, 'g', -1, 64)) }
	m, _ := engine.Lookup(q.Engine)
	for i, n := range nodes {
		if n.Engine != q.Engine {
			continue
		}
		inst := `"instance":"` + n.ID + `"`
		load := float64(i%17) + 1
		switch q.Shape {
		case "identity":
			for r := range n.DP {
				if n.Engine == llmdiagv1.Engine_ENGINE_SGLANG {
					for tp := range 2 {
						emitRaw(fmt.Sprintf(`%s,"dp_rank":"%d","tp_rank":"%d","model_name":"deepseek-ai/DeepSeek-V3"`, inst, r, tp), []byte{hole, holeScrape})
					}
					continue
				}
				emitRaw(fmt.Sprintf(`%s,"%s":"%d","model_name":"Qwen/Qwen3-32B"`, inst, m.DPLabel, r), []byte{hole, holeScrape})
			}
		case "value":
			emit(inst, load*float64(q.Concept+1))
		case "ranked":
			// Two tensor-parallel ranks per replica, reporting the same.
			for r := range n.DP {
				v := load * float64(q.Concept+1)
				switch q.Concept {
				case engine.KVUsage:
					v = 0.1 * float64(r+1)
				case engine.KVCapacityTokens, engine.KVUsedTokens:
					v = 100000 / float64(q.Concept-engine.KVCapacityTokens+1)
				}
				for tp := range 2 {
					emit(fmt.Sprintf(`%s,"dp_rank":"%d","tp_rank":"%d"`, inst, r, 2*r+tp), v)
				}
			}
		case "replicas", "info":
			for r := range n.DP {
				labels := inst
				for _, l := range m.ReplicaLabels {
					labels += fmt.Sprintf(`,"%s":"%d"`, l, r)
				}
				v := 0.1 * float64(r+1)
				if q.Concept != engine.KVUsage {
					v = 100000
				}
				if q.Shape == "info" {
					labels += `,"num_gpu_blocks":"6000","block_size":"16"`
					v = 1
				}
				emit(labels, v)
			}
		case "buckets":
			bounds := Layouts[q.Engine][q.Concept]
			for j, le := range bounds {
				// A rising cumulative count: a spread of observations.
				emit(inst+`,"le":"`+strconv.FormatFloat(le, 'g', -1, 64)+`"`, load*float64(j*j)/float64(len(bounds)))
			}
			emit(inst+`,"le":"+Inf"`, load*float64(len(bounds)))
		case "sum":
			emit(inst, load*3.5)
		case "count":
			emit(inst, load*float64(len(Layouts[q.Engine][q.Concept])))
		case "created":
			emitRaw(inst, []byte{hole, holeStart})
		case "effects":
			effects(n, inst, load, m, emit)
		}
	}
	sb.WriteString(`]}}`)
	return sb.Bytes()
}

// effects emits the answer of an effects query for node n: every effect
// concept of m (labelled llmdiag_effect with its name; per replica and
// rank for an engine with ranks), each replica's newest LoRA info series,
// and every offload tier, as from an engine exporting all of them.
func effects(n Node, inst string, load float64, m *engine.Mapping, emit func(string, float64)) {
	effect := func(name string) string { return inst + `,"llmdiag_effect":"` + name + `"` }
	for c, srcs := range m.Effects {
		v := load * float64(c+1)
		if len(srcs) > 0 && srcs[0].Kind == engine.Gauge {
			v = 0.5 // a rate or a hit rate; an accept length above it
			if c == engine.SpecAcceptLength {
				v = 2.5
			}
		}
		if len(m.RankLabels) == 0 || len(srcs) == 0 || srcs[0].Kind != engine.Gauge {
			emit(effect(c.String()), v)
			continue
		}
		for r := range n.DP {
			for tp := range 2 {
				emit(fmt.Sprintf(`%s,"dp_rank":"%d","tp_rank":"%d"`, effect(c.String()), r, 2*r+tp), v)
			}
		}
	}
	if len(m.LoRAInfo) > 0 {
		for r := range n.DP {
			labels := effect("lora")
			for _, l := range m.ReplicaLabels {
				labels += fmt.Sprintf(`,"%s":"%d"`, l, r)
			}
			emit(labels+`,"running_lora_adapters":"sql,chat","waiting_lora_adapters":"code"`, 1.7682644e+09)
		}
	}
	for _, o := range m.Offload {
		emit(effect("offload:"+o.Tier), 1)
	}
}
