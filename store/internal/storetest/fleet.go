// Package storetest makes realistic store contents for tests and
// benchmarks: a fleet of vLLM nodes as refresh.Loop leaves them after running
// a while (NodeMetrics from two samples with all five of vLLM's latency
// histograms, the English Diagnosis of them with history and peers, and the
// history points of every refresh).
package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/refresh"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/store"
)

// vLLM V1's bucket bounds (vllm/v1/metrics/loggers.py), as sim uses them: 22
// TTFT buckets, 19 inter-token/TPOT buckets, 21 request-latency buckets (e2e,
// queue time), +Inf added by the exposition.
var (
	vllmTTFT    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	vllmITL     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	vllmLatency = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
)

// fleetModels are the models the nodes serve, node i serving model i mod 8.
var fleetModels = []struct {
	name         string
	active, tot  float64
	dp, tp, ep   uint32
	gpu          string
	tpot, prompt float64 // typical seconds per output token; prompt tokens
}{
	{"meta-llama/Llama-3.1-8B-Instruct", 8, 8, 1, 1, 0, "L40S", 0.012, 900},
	{"meta-llama/Llama-3.3-70B-Instruct", 70, 70, 1, 4, 0, "H100-80G", 0.035, 1800},
	{"Qwen/Qwen3-32B", 32, 32, 2, 2, 0, "H100-80G", 0.025, 1500},
	{"Qwen/Qwen3-235B-A22B", 22, 235, 1, 8, 8, "H200-141G", 0.03, 2500},
	{"deepseek-ai/DeepSeek-V3", 37, 671, 8, 1, 8, "H200-141G", 0.06, 4000},
	{"mistralai/Mistral-Small-24B-Instruct", 24, 24, 1, 2, 0, "A100-80G", 0.02, 1200},
	{"google/gemma-3-27b-it", 27, 27, 1, 2, 0, "H100-80G", 0.022, 1000},
	{"openai/gpt-oss-120b", 5.1, 117, 1, 4, 4, "H100-80G", 0.015, 2000},
}

// regime is how a node behaves over its history.
type regime int

const (
	healthy regime = iota
	idle
	bursty
	overloaded
	kvFull
	slowDecode
	heavyPrompts
	outlier
	down
)

// Node is one node's refresh-time state: what refresh.Loop would pass to
// Store.Put last, and the points of the refreshes before it.
type Node struct {
	Record *store.Record
	Points []diagnose.Point // oldest first; the last one goes with Record
}

// End is when the newest refresh of the fleet happened.
var End = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

// MakeNode returns node i of a fleet with points refreshes, 5 s apart. peers
// are other nodes of the same model, as refresh passes them to Diagnose.
func MakeNode(i, points int, peers []*llmdiagv1.NodeMetrics) Node {
	r := rand.New(rand.NewPCG(uint64(i), 42))
	mod := fleetModels[i%len(fleetModels)]
	reg := regime(r.IntN(100))
	switch {
	case reg < 55:
		reg = healthy
	case reg < 70:
		reg = idle
	case reg < 78:
		reg = bursty
	case reg < 84:
		reg = overloaded
	case reg < 89:
		reg = kvFull
	case reg < 93:
		reg = slowDecode
	case reg < 96:
		reg = heavyPrompts
	case reg < 99:
		reg = outlier
	default:
		reg = down
	}
	id := ID(i)
	url := fmt.Sprintf("http://10.%d.%d.%d:8000/metrics", i>>16&255, i>>8&255, i&255)

	// Gauges drift from refresh to refresh; each refresh reads them anew.
	capacity := float64(200_000 + 1000*r.IntN(600))
	running := float64(4 + r.IntN(120))
	queue := 0.0
	kv := 0.1 + 0.5*r.Float64()
	e2eMean := mod.tpot*300 + 2*r.Float64()
	gen := running / mod.tpot * (0.6 + 0.1*r.Float64())
	switch reg {
	case idle:
		running = float64(r.IntN(3))
		kv = 0.01 * r.Float64()
		gen = running * 40
	case overloaded:
		running = 256
		queue = float64(60 + r.IntN(200))
		kv = 0.7 + 0.1*r.Float64()
	case kvFull:
		kv = 0.96 + 0.03*r.Float64()
	case slowDecode:
		running = 40
		gen = 121 + 10*r.Float64()
	}
	window := 5 * time.Minute
	at := End.Add(-time.Duration(points) * 5 * time.Second)
	var hist []diagnose.Point
	var m *llmdiagv1.NodeMetrics
	for k := range points {
		// Scrapes finish a few ms off the refresh tick, in nanoseconds.
		at = at.Add(5*time.Second + time.Duration(r.IntN(40_000_000)) - 20_000_000)
		last := k == points-1
		up := reg != down || k < points-20
		walk := func(v, step, lo, hi float64) float64 { return math.Min(hi, math.Max(lo, v+step*(2*r.Float64()-1))) }
		running = math.Round(walk(running, 3, 0, 256))
		kv = walk(kv, 0.02, 0, 1)
		switch {
		case reg == bursty && r.IntN(40) == 0:
			queue = float64(5 + r.IntN(30))
		case reg == bursty:
			queue = math.Max(0, math.Round(queue/3-1))
		case reg == overloaded:
			queue = math.Round(walk(queue, 10, 20, 600))
		case reg == healthy && r.IntN(200) == 0:
			queue = 1
		default:
			queue = 0
		}
		if reg == kvFull {
			kv = walk(kv, 0.005, 0.95, 1)
		}
		e2eMean = walk(e2eMean, 0.05*e2eMean, 0.5, 1e4)
		gen = walk(gen, 0.03*gen, 0, 1e6)
		smp := func(t time.Time) *sample.Sample {
			return &sample.Sample{At: t, Up: up, Engine: llmdiagv1.Engine_ENGINE_VLLM, Model: mod.name}
		}
		newest, base := smp(at), smp(at.Add(-window))
		if up {
			kvUsed := math.Round(kv*capacity/16) * 16 // block granularity
			newest.Queue, newest.Running = sample.F(queue), sample.F(running)
			newest.KVUsage, newest.KVCapacityTokens = sample.F(kvUsed/capacity), sample.F(capacity)
			newest.DataParallel = int(mod.dp)
			rps := running / e2eMean
			secs := window.Seconds()
			base.PromptTokens, base.GenerationTokens = sample.F(1e9), sample.F(3e8)
			base.RequestsFinished, base.Preemptions = sample.F(2e6), sample.F(120)
			prompt := mod.prompt
			if reg == heavyPrompts {
				prompt *= 10
			}
			newest.PromptTokens = sample.F(*base.PromptTokens + math.Round(rps*secs*prompt*(0.8+0.4*r.Float64())))
			newest.GenerationTokens = sample.F(*base.GenerationTokens + math.Round(gen*secs))
			newest.RequestsFinished = sample.F(*base.RequestsFinished + math.Round(rps*secs))
			newest.Preemptions = sample.F(*base.Preemptions)
			if reg == kvFull {
				*newest.Preemptions += float64(5 + r.IntN(50))
			}
			if last {
				// Only the last refresh's distributions are stored: the
				// history keeps their means.
				n := math.Max(1, math.Round(rps*secs))
				ttft := 0.15 + 0.4*r.Float64()
				switch reg {
				case heavyPrompts:
					ttft *= 40
				case outlier:
					ttft *= 8
				case overloaded:
					ttft *= 30
				}
				tpot := mod.tpot
				if reg == slowDecode {
					tpot = 0.3
				}
				e2e := e2eMean
				if reg == outlier {
					e2e *= 6
				}
				hist := func(h sample.Hist, bounds []float64, median, sigma float64) {
					base.Hists[h] = lognormal(bounds, 2e6, median, sigma, 2e6*median*1.2)
					w := lognormal(bounds, n, median, sigma, n*median*math.Exp(sigma*sigma/2)*(0.95+0.1*r.Float64()))
					newest.Hists[h] = &sample.Histogram{Bounds: append([]float64(nil), w.Bounds...), Sum: base.Hists[h].Sum + w.Sum, Count: base.Hists[h].Count + w.Count}
					for j, c := range w.Counts {
						newest.Hists[h].Counts = append(newest.Hists[h].Counts, base.Hists[h].Counts[j]+c)
					}
				}
				hist(sample.TTFT, vllmTTFT, ttft, 0.8)
				hist(sample.E2E, vllmLatency, e2e, 0.7)
				hist(sample.ITL, vllmITL, tpot, 0.5)
				hist(sample.TPOT, vllmITL, tpot*1.1, 0.3)
				hist(sample.QueueTime, vllmLatency, 0.01+queue/math.Max(rps, 0.1), 1.2)
			}
		} else {
			newest.Errors = []string{fmt.Sprintf("Get %q: dial tcp %s: connect: connection refused", url, url[7:len(url)-8])}
		}
		m = metrics.Compute(newest, base, "5m", nil, at.Add(time.Duration(r.IntN(3000))*time.Millisecond), 30*time.Second)
		m.Node = id
		if up {
			m.Covered = durationpb.New(window)
		}
		if !last {
			// The window's mean and P99, as PointOf keeps them: a P99 read
			// from buckets moves with the load like the mean, a new
			// full-precision value each refresh. (Derived, not drawn: the
			// random stream, and so the rest of the fleet, stays as it was.)
			p99 := e2eMean * 4.6 * (1 + 0.03*math.Sin(float64(k)))
			m.E2E = &llmdiagv1.Distribution{Mean: sample.F(e2eMean), Percentiles: []*llmdiagv1.Percentile{{Quantile: 0.99, Value: p99}}}
		}
		p := refresh.PointOf(m)
		if !last {
			// As refresh stores it: the status comes from that refresh's
			// verdict; the rules grade the queue first.
			p.Status = llmdiagv1.Status_STATUS_OK
			if queue > 5 || kv > 0.9 {
				p.Status = llmdiagv1.Status_STATUS_WARN
			}
			if !up {
				p.Status = llmdiagv1.Status_STATUS_DOWN
			}
		}
		hist = append(hist, p)
	}

	profile := &llmdiagv1.Profile{
		DataParallel: mod.dp, TensorParallel: mod.tp, ExpertParallel: mod.ep, Gpu: mod.gpu,
		ActiveParamsBillions: mod.active, TotalParamsBillions: mod.tot,
	}
	d := diagnose.Diagnose(diagnose.Input{Metrics: m, History: hist, Profile: profile, Peers: peers},
		diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
	hist[len(hist)-1].Status = d.GetStatus()
	node := &llmdiagv1.Node{
		Id: id, Model: m.GetModel(), Engine: m.GetEngine(), Profile: profile,
		Status: d.GetStatus(), RootCause: d.GetRootCause(), Routable: d.GetRoutable(), LoadScore: d.GetLoadScore(),
		Staleness: m.GetStaleness(), Url: url, LastSeen: m.GetObservedAt(),
	}
	if !m.GetUp() {
		node.LastSeen = timestamppb.New(at.Add(-100 * time.Second))
	}
	return Node{Record: &store.Record{Node: node, Metrics: m, Diagnosis: d}, Points: hist}
}

// lognormal is a cumulative histogram of n observations with the given
// median and spread, counted in whole observations.
func lognormal(bounds []float64, n, median, sigma, sum float64) *sample.Histogram {
	h := &sample.Histogram{Bounds: append(append([]float64(nil), bounds...), math.Inf(1)), Count: n, Sum: sum}
	for _, b := range bounds {
		h.Counts = append(h.Counts, math.Round(n*0.5*math.Erfc(-(math.Log(b)-math.Log(median))/(sigma*math.Sqrt2))))
	}
	h.Counts = append(h.Counts, n)
	return h
}

// ID is the id of node i.
func ID(i int) string {
	return fmt.Sprintf("vllm-%s-%05d", shortName(fleetModels[i%len(fleetModels)].name), i)
}

func shortName(model string) string {
	for i := len(model) - 1; i >= 0; i-- {
		if model[i] == '/' {
			model = model[i+1:]
			break
		}
	}
	if len(model) > 12 {
		model = model[:12]
	}
	return model
}

// Fleet makes nodes 0..n-1 in order, node i with points(i) refreshes, each
// diagnosed with up to 8 of the nodes made before it serving the same model
// as peers, and passes each to visit.
func Fleet(n int, points func(i int) int, visit func(i int, node Node)) {
	peers := map[string][]*llmdiagv1.NodeMetrics{}
	for i := range n {
		model := fleetModels[i%len(fleetModels)].name
		node := MakeNode(i, points(i), peers[model])
		peers[model] = append(peers[model], node.Record.Metrics)
		if len(peers[model]) > 8 {
			peers[model] = peers[model][1:]
		}
		visit(i, node)
	}
}
