package sim_test

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmdiag/llmdiag/sim"
)

// parse decodes an exposition with expfmt.
func parse(t testing.TB, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := parseErr(body)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return mfs
}

func scrape(t testing.TB, f *sim.Fleet, id string) map[string]*dto.MetricFamily {
	t.Helper()
	body, err := f.Metrics(id)
	if err != nil {
		t.Fatalf("metrics %s: %v", id, err)
	}
	return parse(t, body)
}

// hist is a histogram summed over all series of a family: upper bound →
// cumulative count, plus sum and count.
type hist struct {
	bounds []float64
	cum    []float64
	sum    float64
	count  float64
}

func histOf(mfs map[string]*dto.MetricFamily, name string) hist {
	var h hist
	mf := mfs[name]
	if mf == nil {
		return h
	}
	idx := map[float64]int{}
	for _, m := range mf.GetMetric() {
		hh := m.GetHistogram()
		h.sum += hh.GetSampleSum()
		h.count += float64(hh.GetSampleCount())
		for _, b := range hh.GetBucket() {
			i, ok := idx[b.GetUpperBound()]
			if !ok {
				i = len(h.bounds)
				idx[b.GetUpperBound()] = i
				h.bounds = append(h.bounds, b.GetUpperBound())
				h.cum = append(h.cum, 0)
			}
			h.cum[i] += float64(b.GetCumulativeCount())
		}
	}
	return h
}

// minus is the histogram of observations made between o and h.
func (h hist) minus(o hist) hist {
	r := hist{bounds: h.bounds, cum: make([]float64, len(h.cum)), sum: h.sum - o.sum, count: h.count - o.count}
	for i := range h.cum {
		r.cum[i] = h.cum[i]
		if i < len(o.cum) {
			r.cum[i] -= o.cum[i]
		}
	}
	return r
}

// quantile follows histogram_quantile: linear interpolation inside the
// bucket, the last finite bound for the +Inf bucket.
func (h hist) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * h.count
	prevB, prevC := 0.0, 0.0
	for i, b := range h.bounds {
		if h.cum[i] >= rank {
			if math.IsInf(b, 1) {
				return prevB
			}
			if h.cum[i] == prevC {
				return b
			}
			return prevB + (b-prevB)*(rank-prevC)/(h.cum[i]-prevC)
		}
		prevB, prevC = b, h.cum[i]
	}
	return prevB
}

func (h hist) mean() float64 { return h.sum / h.count }

// figures are a node's steady-state indicators over a measurement window.
type figures struct {
	kvMean, kvMin, kvMax    float64
	queueZero               float64 // fraction of samples with an empty queue
	queueOver5              float64 // fraction of samples with more than 5 waiting
	queueMean, queueMax     float64
	runningMean             float64
	promptRate, genRate     float64
	preemptions             uint64
	aborted                 uint64
	ttftP50, ttftP99        float64
	e2eP50, e2eP99, e2eMean float64
	itlP50, itlP99          float64
	tpotMean                float64
	queueTimeP99            float64
	samples                 []sim.NodeStats
}

// measure runs the fleet for d, sampling every node each `every`, and
// returns each node's figures over that window.
func measure(t testing.TB, f *sim.Fleet, d, every time.Duration) map[string]*figures {
	t.Helper()
	return measureWindows(t, f, every, d)[0]
}

// snap is a node's state and exposition at a window boundary.
type snap struct {
	s   sim.NodeStats
	mfs map[string]*dto.MetricFamily
}

func snapshot(t testing.TB, f *sim.Fleet) map[string]snap {
	t.Helper()
	out := map[string]snap{}
	for _, id := range f.Nodes() {
		s, _ := f.Stats(id)
		out[id] = snap{s, scrapeAny(t, f, id)}
	}
	return out
}

// measureWindows runs the fleet through consecutive windows of the given
// lengths, sampling every node each `every`, and returns each window's
// figures; a window's end snapshot is the next one's start.
func measureWindows(t testing.TB, f *sim.Fleet, every time.Duration, ds ...time.Duration) []map[string]*figures {
	t.Helper()
	start := snapshot(t, f)
	var all []map[string]*figures
	for _, d := range ds {
		var figs map[string]*figures
		figs, start = window(t, f, start, d, every)
		all = append(all, figs)
	}
	return all
}

// window runs one window from start; it returns the figures and the end
// snapshot.
func window(t testing.TB, f *sim.Fleet, start map[string]snap, d, every time.Duration) (map[string]*figures, map[string]snap) {
	t.Helper()
	ids := f.Nodes()
	out := map[string]*figures{}
	for _, id := range ids {
		out[id] = &figures{kvMin: 2}
	}
	for elapsed := time.Duration(0); elapsed < d; elapsed += every {
		f.Step(every)
		for _, id := range ids {
			s, _ := f.Stats(id)
			fg := out[id]
			fg.samples = append(fg.samples, s)
			fg.kvMean += s.KVUsage
			fg.kvMin = min(fg.kvMin, s.KVUsage)
			fg.kvMax = max(fg.kvMax, s.KVUsage)
			fg.queueMean += float64(s.Waiting)
			fg.queueMax = max(fg.queueMax, float64(s.Waiting))
			fg.runningMean += float64(s.Running)
			if s.Waiting == 0 {
				fg.queueZero++
			}
			if s.Waiting > 5 {
				fg.queueOver5++
			}
		}
	}
	end := snapshot(t, f)
	for _, id := range ids {
		fg := out[id]
		n := float64(len(fg.samples))
		fg.kvMean /= n
		fg.queueMean /= n
		fg.runningMean /= n
		fg.queueZero /= n
		fg.queueOver5 /= n
		s0, s1 := start[id].s, end[id].s
		secs := d.Seconds()
		fg.promptRate = float64(s1.PromptTokens-s0.PromptTokens) / secs
		fg.genRate = float64(s1.GenerationTokens-s0.GenerationTokens) / secs
		fg.preemptions = s1.Preemptions - s0.Preemptions
		fg.aborted = s1.Aborted - s0.Aborted
		mfs0, mfs1 := start[id].mfs, end[id].mfs
		if mfs0 == nil || mfs1 == nil {
			continue
		}
		pre := "vllm:"
		queueName := "vllm:request_queue_time_seconds"
		if _, ok := mfs1["sglang:num_queue_reqs"]; ok {
			pre, queueName = "sglang:", "sglang:queue_time_seconds"
		}
		d := func(name string) hist { return histOf(mfs1, pre+name).minus(histOf(mfs0, pre+name)) }
		ttft, e2e, itl := d("time_to_first_token_seconds"), d("e2e_request_latency_seconds"), d("inter_token_latency_seconds")
		fg.ttftP50, fg.ttftP99 = ttft.quantile(0.5), ttft.quantile(0.99)
		fg.e2eP50, fg.e2eP99, fg.e2eMean = e2e.quantile(0.5), e2e.quantile(0.99), e2e.mean()
		fg.itlP50, fg.itlP99 = itl.quantile(0.5), itl.quantile(0.99)
		if pre == "vllm:" {
			fg.tpotMean = d("request_time_per_output_token_seconds").mean()
		}
		q := histOf(mfs1, queueName).minus(histOf(mfs0, queueName))
		fg.queueTimeP99 = q.quantile(0.99)
	}
	return out, end
}

// scrapeAny parses a node's exposition, or returns nil when it is down.
func scrapeAny(t testing.TB, f *sim.Fleet, id string) map[string]*dto.MetricFamily {
	body, err := f.Metrics(id)
	if err != nil {
		return nil
	}
	return parse(t, body)
}

// perRequest is the decode speed one request sees over the window, as
// llmdiag derives it: generation rate ÷ running (here its mean).
func (fg *figures) perRequest() float64 { return fg.genRate / fg.runningMean }

// perRequestEnd is generation rate ÷ running at the window's end, the
// gauge a single scrape reads.
func (fg *figures) perRequestEnd() float64 {
	return fg.genRate / float64(max(fg.samples[len(fg.samples)-1].Running, 1))
}

func (fg *figures) String() string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }
	return "kv=" + g(fg.kvMean) + "[" + g(fg.kvMin) + "," + g(fg.kvMax) + "]" +
		" queue0=" + g(fg.queueZero) + " queue=" + g(fg.queueMean) + " max=" + g(fg.queueMax) +
		" running=" + g(fg.runningMean) + " perReq=" + g(fg.perRequest()) +
		" prompt=" + g(fg.promptRate) + "tok/s gen=" + g(fg.genRate) + "tok/s" +
		" preempt=" + strconv.FormatUint(fg.preemptions, 10) + " abort=" + strconv.FormatUint(fg.aborted, 10) +
		" ttft50=" + g(fg.ttftP50) + " ttft99=" + g(fg.ttftP99) +
		" e2e50=" + g(fg.e2eP50) + " e2e99=" + g(fg.e2eP99) + " e2eMean=" + g(fg.e2eMean) +
		" itl50=" + g(fg.itlP50) + " itl99=" + g(fg.itlP99) + " tpot=" + g(fg.tpotMean) +
		" q99=" + g(fg.queueTimeP99)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// parseErr decodes an exposition with expfmt, returning its error.
func parseErr(body []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(bytes.NewReader(body))
}
