package promtest_test

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/internal/testing/promtest"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/sim"
)

// Exactness: for every engine schema, llmdiag's
// percentiles must be Prometheus's histogram_quantile, bit for bit up to
// float noise, NaN where it says NaN, on real engine histograms scraped by
// a real Prometheus.

// relTolerance is the largest relative difference accepted between
// llmdiag's and Prometheus's quantile.
const relTolerance = 1e-9

// exactFamilies is the one table of the latency histograms the exactness
// tests compare: every family a simulated schema exposes that engine/table.go
// reads as a Histogram, the schemas whose nodes expose it, and the concept
// (hence the NodeMetrics distribution, named by Concept.String) it feeds.
// checkFamilyTable holds it to engine.Lookup; the prom test fails on
// any distribution a node reports that no entry feeds.
var exactFamilies = []histFamily{
	{[]sim.Engine{sim.VLLM}, "vllm:time_to_first_token_seconds", engine.TTFT},
	{[]sim.Engine{sim.VLLM}, "vllm:e2e_request_latency_seconds", engine.E2E},
	{[]sim.Engine{sim.VLLM}, "vllm:inter_token_latency_seconds", engine.ITL},
	{[]sim.Engine{sim.VLLM}, "vllm:request_time_per_output_token_seconds", engine.TPOT},
	{[]sim.Engine{sim.VLLM}, "vllm:request_queue_time_seconds", engine.QueueTime},

	{[]sim.Engine{sim.VLLMOTel}, "vllm_time_to_first_token_seconds", engine.TTFT},
	{[]sim.Engine{sim.VLLMOTel}, "vllm_e2e_request_latency_seconds", engine.E2E},
	{[]sim.Engine{sim.VLLMOTel}, "vllm_inter_token_latency_seconds", engine.ITL},
	{[]sim.Engine{sim.VLLMOTel}, "vllm_request_time_per_output_token_seconds", engine.TPOT},
	{[]sim.Engine{sim.VLLMOTel}, "vllm_request_queue_time_seconds", engine.QueueTime},

	// SGLang's 2024 label scheme keeps the names (model in label name).
	{[]sim.Engine{sim.SGLang, sim.SGLangLegacy}, "sglang:time_to_first_token_seconds", engine.TTFT},
	{[]sim.Engine{sim.SGLang, sim.SGLangLegacy}, "sglang:e2e_request_latency_seconds", engine.E2E},
	{[]sim.Engine{sim.SGLang, sim.SGLangLegacy}, "sglang:inter_token_latency_seconds", engine.ITL},
	{[]sim.Engine{sim.SGLang, sim.SGLangLegacy}, "sglang:queue_time_seconds", engine.QueueTime},

	{[]sim.Engine{sim.TRTLLM}, "trtllm_time_to_first_token_seconds", engine.TTFT},
	{[]sim.Engine{sim.TRTLLM}, "trtllm_e2e_request_latency_seconds", engine.E2E},
	{[]sim.Engine{sim.TRTLLM}, "trtllm_time_per_output_token_seconds", engine.TPOT},
	{[]sim.Engine{sim.TRTLLM}, "trtllm_request_queue_time_seconds", engine.QueueTime},

	{[]sim.Engine{sim.TGI}, "tgi_request_duration", engine.E2E},
	{[]sim.Engine{sim.TGI}, "tgi_request_mean_time_per_token_duration", engine.TPOT},
	{[]sim.Engine{sim.TGI}, "tgi_request_queue_duration", engine.QueueTime},

	{[]sim.Engine{sim.Dynamo}, "dynamo_frontend_time_to_first_token_seconds", engine.TTFT},
	{[]sim.Engine{sim.Dynamo}, "dynamo_frontend_request_duration_seconds", engine.E2E},
	{[]sim.Engine{sim.Dynamo}, "dynamo_frontend_inter_token_latency_seconds", engine.ITL},
}

// meanFamilies are the latencies a schema exposes without buckets, as a
// cumulative sum and count (Triton, in microseconds): prom reports a
// mean, never a percentile. concept is the distribution they feed; sum and
// count the concepts of engine/table.go they are read as.
var meanFamilies = []meanFamily{
	{[]sim.Engine{sim.Triton}, engine.E2E, engine.E2ESum, engine.E2ECount,
		"nv_inference_request_duration_us", "nv_inference_request_success", 1e-6},
	{[]sim.Engine{sim.Triton}, engine.QueueTime, engine.QueueTimeSum, engine.QueueTimeCount,
		"nv_inference_queue_duration_us", "nv_inference_request_success", 1e-6},
}

type histFamily struct {
	engines []sim.Engine
	family  string
	concept engine.Concept
}

type meanFamily struct {
	engines    []sim.Engine
	concept    engine.Concept
	sum, count engine.Concept
	sumFamily  string
	countFam   string
	scale      float64
}

func (f histFamily) covers(e sim.Engine, c engine.Concept) bool {
	return slices.Contains(f.engines, e) && (c < 0 || c == f.concept)
}

func (f meanFamily) covers(e sim.Engine, c engine.Concept) bool {
	return slices.Contains(f.engines, e) && (c < 0 || c == f.concept)
}

// feeds reports whether family table tab has an entry for schema e and
// concept c (any concept when c < 0).
func feeds[F interface {
	covers(sim.Engine, engine.Concept) bool
}](tab []F, e sim.Engine, c engine.Concept) bool {
	return slices.ContainsFunc(tab, func(f F) bool { return f.covers(e, c) })
}

// latencyConcepts are the histogram concepts, each with the NodeMetrics
// distribution it fills.
var latencyConcepts = []struct {
	concept engine.Concept
	get     func(*llmdiagv1.NodeMetrics) *llmdiagv1.Distribution
}{
	{engine.TTFT, (*llmdiagv1.NodeMetrics).GetTtft},
	{engine.E2E, (*llmdiagv1.NodeMetrics).GetE2E},
	{engine.ITL, (*llmdiagv1.NodeMetrics).GetInterToken},
	{engine.TPOT, (*llmdiagv1.NodeMetrics).GetTimePerOutputToken},
	{engine.QueueTime, (*llmdiagv1.NodeMetrics).GetQueueTime},
}

// distributionOf is the NodeMetrics distribution concept c fills.
func distributionOf(c engine.Concept) func(*llmdiagv1.NodeMetrics) *llmdiagv1.Distribution {
	for _, lc := range latencyConcepts {
		if lc.concept == c {
			return lc.get
		}
	}
	panic(fmt.Sprintf("concept %s fills no distribution", c))
}

// mappingOf is engine/table.go's mapping of schema e.
func mappingOf(t *testing.T, e sim.Engine) *engine.Mapping {
	t.Helper()
	id, err := fleet.ParseEngine(e.FleetName())
	if err != nil {
		t.Fatalf("schema %s: %v", e, err)
	}
	m, ok := engine.Lookup(id)
	if !ok {
		t.Fatalf("schema %s: engine %s has no mapping", e, id)
	}
	return m
}

// checkFamilyTable holds exactFamilies and meanFamilies to engine/table.go:
// each family is a source of its concept in the mapping of each schema
// listed, and every schema of the simulator has families to compare.
func checkFamilyTable(t *testing.T) {
	t.Helper()
	has := func(m *engine.Mapping, c engine.Concept, kind engine.Kind, family string, scale float64) bool {
		return slices.ContainsFunc(m.Concepts[c], func(s engine.Source) bool {
			return s.Family == family && s.Kind == kind && s.Scale == scale
		})
	}
	covered := map[sim.Engine]bool{}
	for _, f := range exactFamilies {
		for _, e := range f.engines {
			covered[e] = true
			if m := mappingOf(t, e); !has(m, f.concept, engine.Histogram, f.family, 0) {
				t.Errorf("exactFamilies: %s is not a %s histogram of %s in engine/table.go", f.family, f.concept, m.Engine)
			}
		}
	}
	for _, f := range meanFamilies {
		for _, e := range f.engines {
			covered[e] = true
			m := mappingOf(t, e)
			if !has(m, f.sum, engine.Counter, f.sumFamily, f.scale) || !has(m, f.count, engine.Counter, f.countFam, 0) {
				t.Errorf("meanFamilies: %s / %s (×%g) are not %s / %s of %s in engine/table.go",
					f.sumFamily, f.countFam, f.scale, f.sum, f.count, m.Engine)
			}
		}
	}
	for _, e := range sim.Engines() {
		if !covered[e] {
			t.Errorf("schema %s has no entry in exactFamilies or meanFamilies", e)
		}
	}
}

var exactQuantiles = []float64{0.5, 0.9, 0.95, 0.99, 0.999}

// exactWindows turn a family into the per-instance bucket vector both sides
// compute the quantile of.
var exactWindows = []struct {
	name string
	// vector is the PromQL for the input vector of family f.
	vector func(f string) string
	// infOnly and empty mark inputs built to hit one branch of the
	// algorithm.
	infOnly, empty bool
}{
	{name: "rate5s", vector: func(f string) string { return fmt.Sprintf("sum by (instance, le) (rate(%s_bucket[5s]))", f) }},
	{name: "rate15s", vector: func(f string) string { return fmt.Sprintf("sum by (instance, le) (rate(%s_bucket[15s]))", f) }},
	// lifetime: the raw cumulative counters.
	{name: "cumulative", vector: func(f string) string { return fmt.Sprintf("sum by (instance, le) (%s_bucket)", f) }},
	// Every observation in the +Inf bucket: the quantile is the largest
	// finite bound.
	{name: "inf-only", infOnly: true, vector: func(f string) string {
		return fmt.Sprintf(`sum by (instance, le) (%[1]s_bucket{le!="+Inf"}) * 0 or sum by (instance, le) (%[1]s_bucket{le="+Inf"})`, f)
	}},
	// No observation (a window in which nothing finished): NaN.
	{name: "empty", empty: true, vector: func(f string) string { return fmt.Sprintf("sum by (instance, le) (%s_bucket) * 0", f) }},
}

// simFleet is one or more simulated fleets scraped by one real Prometheus.
type simFleet struct {
	prom *promtest.Prometheus
	// instance maps node id to instance label (host:port), node maps it
	// back.
	instance map[string]string
	node     map[string]string
	engine   map[string]sim.Engine // schema, by instance
}

// scenario is the named scenario served in real time after 5 simulated
// minutes of warm-up.
func scenario(t *testing.T, name string) sim.Config {
	t.Helper()
	cfg := simtest.Scenario(t, name, 1)
	cfg.Warmup = 5 * time.Minute
	cfg.Speed = 1
	return cfg
}

// startSeedFleet serves the seed scenario (see startFleet).
func startSeedFleet(t *testing.T, scrapes int) *simFleet {
	t.Helper()
	return startFleet(t, scrapes, scenario(t, "seed"))
}

// startFleet serves every fleet of cfgs (their node ids must differ) and
// has one Prometheus scrape every node each second, with target label
// node=<id>, until each has at least scrapes successful scrapes.
func startFleet(t *testing.T, scrapes int, cfgs ...sim.Config) *simFleet {
	t.Helper()
	sf := &simFleet{instance: map[string]string{}, node: map[string]string{}, engine: map[string]sim.Engine{}}
	var targets []string
	labels := map[string]map[string]string{}
	for _, cfg := range cfgs {
		f, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		simtest.Serve(t, f)
		// FleetFile lists the nodes in configuration order.
		for i, n := range f.FleetFile().Nodes {
			u, err := url.Parse(n.URL)
			if err != nil {
				t.Fatalf("node %s url %q: %v", n.ID, n.URL, err)
			}
			if _, dup := sf.instance[n.ID]; dup {
				t.Fatalf("node id %s in two fleets", n.ID)
			}
			targets = append(targets, u.Host)
			labels[u.Host] = map[string]string{"node": n.ID}
			sf.instance[n.ID], sf.node[u.Host], sf.engine[u.Host] = u.Host, n.ID, cfg.Nodes[i].Engine
		}
	}
	sf.prom = promtest.Start(t, promtest.Options{Targets: targets, TargetLabels: labels, ScrapeInterval: time.Second})
	wctx, wcancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer wcancel()
	if err := sf.prom.WaitForScrapes(wctx, scrapes); err != nil {
		t.Fatal(err)
	}
	return sf
}

// instancesOf counts the nodes running one of the schemas es.
func (sf *simFleet) instancesOf(es ...sim.Engine) int {
	n := 0
	for _, got := range sf.engine {
		if slices.Contains(es, got) {
			n++
		}
	}
	return n
}

// evalTime picks the one timestamp every comparison is evaluated at. It is
// 2 s in the past, so every scrape stamped at or before it has been
// committed and queries at it see fixed data. And at it, every node's last
// scrape succeeded (a failed one, as under heavy CPU load, marks the node's
// series stale, and instant selectors find nothing) and every rate window
// has samples enough. It retries for up to 30 s.
func (sf *simFleet) evalTime(t *testing.T) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	q := fmt.Sprintf(`up{job=%[1]q} == 1 and sum_over_time(up{job=%[1]q}[5s]) >= 3 and sum_over_time(up{job=%[1]q}[15s]) >= 10`, sf.prom.Job())
	for {
		at := time.Now().Add(-2 * time.Second).Truncate(time.Millisecond)
		vec, err := sf.prom.QueryVector(ctx, q, at)
		if err == nil && len(vec) == len(sf.instance) {
			return at
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no evaluation time at which every node was up with enough samples: last %v, %v", vec, err)
		case <-time.After(time.Second):
		}
	}
}

// bucketsBy groups a `sum by (label, le)` vector into buckets per value of
// label.
func bucketsBy(t *testing.T, vec model.Vector, label model.LabelName) map[string][]histogram.Bucket {
	t.Helper()
	out := map[string][]histogram.Bucket{}
	for _, s := range vec {
		key := string(s.Metric[label])
		le, err := strconv.ParseFloat(string(s.Metric[model.BucketLabel]), 64)
		if key == "" || err != nil {
			t.Fatalf("sample %v: want %s and a numeric le", s, label)
		}
		out[key] = append(out[key], histogram.Bucket{UpperBound: le, Count: float64(s.Value)})
	}
	return out
}

// valuesBy maps a vector by label, which must tell its samples apart.
func valuesBy(t *testing.T, vec model.Vector, label model.LabelName) map[string]float64 {
	t.Helper()
	out := make(map[string]float64, len(vec))
	for _, s := range vec {
		key := string(s.Metric[label])
		if _, dup := out[key]; dup || key == "" {
			t.Fatalf("vector %v: want one sample per %s", vec, label)
		}
		out[key] = float64(s.Value)
	}
	return out
}

// relErr is the relative difference of a and b, 0 when they are equal
// (both NaN included) and +Inf when only one is NaN or infinite.
func relErr(a, b float64) float64 {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		if math.IsNaN(a) && math.IsNaN(b) {
			return 0
		}
		return math.Inf(1)
	case a == b:
		return 0
	case math.IsInf(a, 0) || math.IsInf(b, 0):
		return math.Inf(1)
	}
	return math.Abs(a-b) / math.Max(math.Abs(a), math.Abs(b))
}

// exactStats summarises the comparisons of one engine on one path.
type exactStats struct {
	comparisons, exact, nan, infBucket, infSynthetic, lowest int
	maxRel                                                   float64
	maxRelAt                                                 string
}

func (s *exactStats) add(what string, ours histogram.Estimate, theirs float64, synthetic bool) {
	s.comparisons++
	rel := relErr(ours.Value, theirs)
	switch {
	case math.IsNaN(theirs) && math.IsNaN(ours.Value):
		s.nan++
	case ours.Value == theirs:
		s.exact++
	}
	if math.IsInf(ours.Upper, 1) {
		if synthetic {
			s.infSynthetic++
		} else {
			s.infBucket++
		}
	}
	if ours.Lower == 0 || math.IsInf(ours.Lower, -1) {
		s.lowest++
	}
	if rel > s.maxRel {
		s.maxRel, s.maxRelAt = rel, what
	}
}

// exactReport collects the stats of every engine and path; safe for
// concurrent use.
type exactReport struct {
	mu    sync.Mutex
	stats map[reportKey]*exactStats
}

type reportKey struct {
	engine sim.Engine
	path   string // histogram, refresh, window; "… mean" for meanFamilies
}

func (r *exactReport) add(e sim.Engine, path, what string, ours histogram.Estimate, theirs float64, synthetic bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := reportKey{e, path}
	if r.stats[k] == nil {
		r.stats[k] = &exactStats{}
	}
	r.stats[k].add(what, ours, theirs, synthetic)
}

func (r *exactReport) get(e sim.Engine, path string) *exactStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats[reportKey{e, path}]
}

// String is the per-engine table, schemas in sim.Engines order.
func (r *exactReport) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]reportKey, 0, len(r.stats))
	for k := range r.stats {
		keys = append(keys, k)
	}
	order := sim.Engines()
	slices.SortFunc(keys, func(a, b reportKey) int {
		if c := slices.Index(order, a.engine) - slices.Index(order, b.engine); c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "engine\tpath\tcomparisons\tidentical\tNaN both\tmax rel err\t+Inf natural\t+Inf synthetic\tlowest bucket\t")
	for _, k := range keys {
		s := r.stats[k]
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%.3g\t%d\t%d\t%d\t\n",
			k.engine, k.path, s.comparisons, s.exact, s.nan, s.maxRel, s.infBucket, s.infSynthetic, s.lowest)
	}
	w.Flush()
	for _, k := range keys {
		if s := r.stats[k]; s.maxRel > 0 {
			fmt.Fprintf(&b, "%s %s: max relative error at %s\n", k.engine, k.path, s.maxRelAt)
		}
	}
	return b.String()
}

// schemasTwin is the schemas scenario named name, its node ids prefixed
// with name-, every node changed by edit.
func schemasTwin(t *testing.T, name string, edit func(n *sim.Node)) sim.Config {
	t.Helper()
	cfg := scenario(t, "schemas")
	cfg.Name = name
	cfg.Nodes = slices.Clone(cfg.Nodes)
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		n.ID = name + "-" + n.ID
		edit(n)
	}
	return cfg
}

// idleScenario is the schemas scenario without traffic, its node ids
// prefixed with idle-: servers that have finished no request, whose
// histograms are all zero, so that Prometheus answers NaN for every
// quantile over every window, and so must llmdiag.
func idleScenario(t *testing.T) sim.Config {
	return schemasTwin(t, "idle", func(n *sim.Node) { n.Workload.Rate = 0 })
}

// abortingScenario is the schemas fleet with more traffic than its 4 batch
// slots serve and a 3 s queue timeout: every node abandons requests.
func abortingScenario(t *testing.T) sim.Config {
	return schemasTwin(t, "aborting", func(n *sim.Node) {
		n.Perf.MaxNumSeqs = 4
		n.Workload.Rate = 4
		n.Workload.QueueTimeout = 3 * time.Second
	})
}

// TestExactness runs the seed fleet (vLLM, SGLang), the schemas fleet (one
// node per schema), its idle twin, its aborting twin and its twin with
// speculative decoding and LoRA adapters (effectsScenario) behind one
// Prometheus and compares, at one evaluation time, histogram.Quantile and
// prom's percentiles with histogram_quantile for every histogram
// family of every schema, prom's aborted-request rates with Prometheus's
// rate, and prom's cache and decoding effects with Prometheus's figures.
func TestExactness(t *testing.T) {
	t.Parallel()
	checkFamilyTable(t)
	// 16 scrapes at 1 s: a full 15 s window before evalTime.
	sf := startFleet(t, 16, scenario(t, "seed"), scenario(t, "schemas"), idleScenario(t), abortingScenario(t), effectsScenario(t))
	at := sf.evalTime(t)
	t.Logf("evaluation time %s, %d nodes", at.Format(time.RFC3339Nano), len(sf.instance))

	report := &exactReport{stats: map[reportKey]*exactStats{}}
	t.Run("families", func(t *testing.T) { testExposedFamilies(t, sf, at) })
	t.Run("histogram", func(t *testing.T) { testHistogramExactness(t, sf, at, report) })
	t.Run("prom", func(t *testing.T) { testPromExactness(t, sf, at, report) })
	t.Logf("exactness per schema (within %g relative, NaN = NaN):\n%v", relTolerance, report)
}

// testExposedFamilies holds exactFamilies to what the nodes expose: every
// bucketed family a node has that engine/table.go reads as a latency
// histogram of its schema is in the table, and the schemas without an
// entry (Triton) expose no buckets at all.
func testExposedFamilies(t *testing.T, sf *simFleet, at time.Time) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	vec, err := sf.prom.QueryVector(ctx, fmt.Sprintf(`group by (instance, __name__) ({__name__=~".+_bucket", job=%q})`, sf.prom.Job()), at)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[sim.Engine]int{}
	for _, s := range vec {
		inst, name := string(s.Metric[model.InstanceLabel]), string(s.Metric[model.MetricNameLabel])
		e := sf.engine[inst]
		family := strings.TrimSuffix(name, "_bucket")
		if !feeds(exactFamilies, e, -1) {
			t.Errorf("%s (%s) exposes %s: a schema without histograms in exactFamilies should expose none", sf.node[inst], e, name)
			continue
		}
		m := mappingOf(t, e)
		for _, lc := range latencyConcepts {
			for _, src := range m.Concepts[lc.concept] {
				if src.Kind != engine.Histogram || src.Family != family {
					continue
				}
				seen[e]++
				if !slices.ContainsFunc(exactFamilies, func(f histFamily) bool {
					return f.family == family && f.concept == lc.concept && slices.Contains(f.engines, e)
				}) {
					t.Errorf("%s (%s) exposes %s, which engine/table.go reads as %s: add it to exactFamilies", sf.node[inst], e, family, lc.concept)
				}
			}
		}
	}
	for _, e := range sim.Engines() {
		if feeds(exactFamilies, e, -1) && seen[e] == 0 {
			t.Errorf("no node of %s exposes a latency histogram", e)
		}
	}
}

// testHistogramExactness compares histogram.Quantile over Prometheus's own
// input vector with Prometheus's histogram_quantile of it, at one time.
func testHistogramExactness(t *testing.T, sf *simFleet, at time.Time, report *exactReport) {
	ctx := t.Context() // each query its own deadline, as in testPromExactness
	for _, fam := range exactFamilies {
		for _, w := range exactWindows {
			vector := w.vector(fam.family)
			vec, err := sf.prom.QueryVector(ctx, vector, at)
			if err != nil {
				t.Fatal(err)
			}
			buckets := bucketsBy(t, vec, "instance")
			for inst := range buckets {
				if !slices.Contains(fam.engines, sf.engine[inst]) {
					t.Fatalf("%s: instance %s (%s) is not a %v node", vector, inst, sf.node[inst], fam.engines)
				}
			}
			if want := sf.instancesOf(fam.engines...); len(buckets) != want {
				t.Fatalf("%s: %d instances, want %d (%v)", vector, len(buckets), want, vec)
			}
			for _, q := range exactQuantiles {
				name := fmt.Sprintf("%s/%s/q=%g", fam.family, w.name, q)
				t.Run(name, func(t *testing.T) {
					expr := fmt.Sprintf("histogram_quantile(%s, %s)", strconv.FormatFloat(q, 'g', -1, 64), vector)
					res, err := sf.prom.QueryVector(ctx, expr, at)
					if err != nil {
						t.Fatal(err)
					}
					theirs := valuesBy(t, res, "instance")
					if len(theirs) != len(buckets) {
						t.Fatalf("histogram_quantile gave %d instances, input vector %d", len(theirs), len(buckets))
					}
					for inst, bs := range buckets {
						want, ok := theirs[inst]
						if !ok {
							t.Fatalf("no histogram_quantile for instance %s", inst)
						}
						got := histogram.Quantile(q, bs)
						node := sf.node[inst]
						report.add(sf.engine[inst], "histogram", name+" "+node, got, want, w.infOnly)
						if rel := relErr(got.Value, want); rel > relTolerance {
							t.Errorf("%s: llmdiag %v (bucket %v..%v), prometheus %v: relative error %.3g > %g; buckets %v",
								node, got.Value, got.Lower, got.Upper, want, rel, relTolerance, bs)
						}
						if w.infOnly && !math.IsNaN(want) && !math.IsInf(got.Upper, 1) {
							t.Errorf("%s: synthetic +Inf-only histogram gave bucket %v..%v, want the +Inf bucket", node, got.Lower, got.Upper)
						}
						if w.empty && !math.IsNaN(want) {
							t.Errorf("%s: prometheus gave %v for an empty histogram, want NaN", node, want)
						}
					}
				})
			}
		}
	}
	for _, e := range sim.Engines() {
		if !feeds(exactFamilies, e, -1) {
			continue
		}
		s := report.get(e, "histogram")
		if s == nil || s.comparisons == 0 {
			t.Errorf("%s: no comparisons", e)
			continue
		}
		if s.infSynthetic == 0 {
			t.Errorf("%s: the +Inf-bucket case was never exercised", e)
		}
		if s.nan == 0 {
			t.Errorf("%s: the NaN case was never exercised", e)
		}
	}
}
