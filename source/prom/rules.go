package prom

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/metrics"
)

// RuleConfig configures RuleExpressions. Zero values take the defaults of
// Config and of `llmdiag serve`.
type RuleConfig struct {
	// NodeLabel identifies a node (default DefaultNodeLabel).
	NodeLabel string
	// ModelLabels may carry the model, after the engine's own label
	// (default DefaultModelLabels).
	ModelLabels []string
	// Window is the rate range (default 5m).
	Window time.Duration
	// Lookback is how long a node that stopped reporting counts as down
	// (default 10m, as Config.Lookback).
	Lookback time.Duration
}

// RuleExprs are one engine's per-node indicators in PromQL, for recording
// and alerting rules: the queries a refresh sends, built by the same query
// builder, with the per-node combination a refresh does in Go (run
// preference, rank collapse, KV combination) written in PromQL. Each
// expression is "" when the engine does not expose the indicator.
type RuleExprs struct {
	Engine llmdiagv1.Engine
	// Model has one series of value 1 per node, labelled with the node
	// label and "model": the value of the first model label (engine's own,
	// its fallbacks, then RuleConfig.ModelLabels) any of the node's series
	// carries; no model label when none does.
	Model string
	// Queue, Running, KVPressure (0..1) and Preemptions (per second over
	// the window) have one series per node, labelled with the node label.
	Queue, Running, KVPressure, Preemptions string
	// PromptTokens and GenerationTokens are token rates per node (per
	// second over the window), labelled with the node label, as a refresh
	// reads them.
	PromptTokens, GenerationTokens string
	// TTFTBuckets, E2EBuckets and ITLBuckets are bucket rates per node and
	// le, the argument of histogram_quantile.
	TTFTBuckets, E2EBuckets, ITLBuckets string
	// Vanished has one series per node that had the engine's series within
	// the lookback and has none now: the nodes a refresh reports down.
	Vanished string
	// Notes say where the PromQL can only approximate what a refresh
	// computes in Go.
	Notes []string
}

// RuleExpressions returns the rule expressions of engine e.
func RuleExpressions(e llmdiagv1.Engine, cfg RuleConfig) (RuleExprs, error) {
	m, ok := engine.Lookup(e)
	if !ok {
		return RuleExprs{}, fmt.Errorf("engine %s: no mapping", e)
	}
	if cfg.NodeLabel == "" {
		cfg.NodeLabel = DefaultNodeLabel
	}
	if cfg.ModelLabels == nil {
		cfg.ModelLabels = DefaultModelLabels()
	}
	if cfg.Window <= 0 {
		cfg.Window = metrics.DefaultWindow.Duration()
	}
	if cfg.Lookback <= 0 {
		cfg.Lookback = 10 * time.Minute
	}
	if !validLabelName(cfg.NodeLabel) {
		return RuleExprs{}, fmt.Errorf("node label %q: not a valid label name", cfg.NodeLabel)
	}
	for _, l := range cfg.ModelLabels {
		if !validLabelName(l) {
			return RuleExprs{}, fmt.Errorf("model label %q: not a valid label name", l)
		}
	}
	b := builder{
		node:     cfg.NodeLabel,
		models:   cfg.ModelLabels,
		rng:      model.Duration(cfg.Window).String(),
		lookback: model.Duration(cfg.Lookback).String(),
	}
	qs, err := b.data(m)
	if err != nil {
		return RuleExprs{}, fmt.Errorf("engine %s: %w", e, err)
	}
	byConcept := map[engine.Concept][]query{}
	for _, q := range qs {
		byConcept[q.concept] = append(byConcept[q.concept], q)
	}
	for _, c := range byConcept {
		slices.SortStableFunc(c, func(x, y query) int { return x.run - y.run })
	}
	r := RuleExprs{Engine: e}
	note := func(format string, args ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, args...)) }
	if len(m.RankLabels) > 0 {
		note("ranks of one replica (%s) count once by their largest value, where a refresh reads the lowest rank: equal when the ranks agree",
			strings.Join(m.RankLabels, ", "))
	}
	scalar := func(c engine.Concept) (string, error) {
		var alts []string
		for _, q := range byConcept[c] {
			switch q.shape {
			case shapeNode:
				alts = append(alts, q.expr)
			case shapeRanked:
				d, err := dedupe(m, q.expr)
				if err != nil {
					return "", err
				}
				by, err := labelList(b.node)
				if err != nil {
					return "", err
				}
				alts = append(alts, aggregator(q.agg)+" by ("+by+") ("+d+")")
			}
		}
		if len(alts) == 0 {
			return "", nil
		}
		return b.or(alts), nil
	}
	if r.Queue, err = scalar(engine.Queue); err != nil {
		return r, err
	}
	if r.Running, err = scalar(engine.Running); err != nil {
		return r, err
	}
	if r.Preemptions, err = scalar(engine.Preemptions); err != nil {
		return r, err
	}
	if r.PromptTokens, err = scalar(engine.PromptTokens); err != nil {
		return r, err
	}
	if r.GenerationTokens, err = scalar(engine.GenerationTokens); err != nil {
		return r, err
	}
	if r.KVPressure, err = b.ruleKV(m, byConcept, note); err != nil {
		return r, err
	}
	buckets := func(c engine.Concept) string {
		var alts []string
		for _, q := range byConcept[c] {
			if q.shape == shapeBuckets {
				alts = append(alts, q.expr)
			}
		}
		if len(alts) == 0 {
			return ""
		}
		return strings.Join(alts, " or on ("+b.node+") ")
	}
	r.TTFTBuckets, r.E2EBuckets, r.ITLBuckets = buckets(engine.TTFT), buckets(engine.E2E), buckets(engine.ITL)
	if r.Vanished, err = b.vanished(m); err != nil {
		return r, err
	}
	if r.Model, err = b.ruleModel(m); err != nil {
		return r, err
	}
	return r, nil
}

// ruleKV is KV pressure per node as nodeState.kv combines it: tokens used /
// capacity summed over replicas; else the usage gauge weighted by each
// replica's capacity when every replica's is known (CapacityWeighted);
// else its mean over replicas.
func (b builder) ruleKV(m *engine.Mapping, byConcept map[engine.Concept][]query, note func(string, ...any)) (string, error) {
	type run struct {
		expr string
		agg  engine.Agg
	}
	replicas := func(c engine.Concept) ([]run, error) {
		var out []run
		for _, q := range byConcept[c] {
			switch q.shape {
			case shapeReplica:
				out = append(out, run{q.expr, q.agg})
			case shapeRanked:
				d, err := dedupe(m, q.expr)
				if err != nil {
					return nil, err
				}
				out = append(out, run{d, q.agg})
			case shapeInfo:
				note("%s is read from the labels of %s, which PromQL cannot turn into numbers: KV usage is the mean over replicas, not weighted by capacity",
					c, strings.Join(q.info, " × "))
			}
		}
		return out, nil
	}
	joined := func(rs []run) string {
		alts := make([]string, len(rs))
		for i, r := range rs {
			alts[i] = r.expr
		}
		if len(alts) == 0 {
			return ""
		}
		return strings.Join(alts, " or on ("+b.node+") ")
	}
	usage, err := replicas(engine.KVUsage)
	if err != nil {
		return "", err
	}
	caps, err := replicas(engine.KVCapacityTokens)
	if err != nil {
		return "", err
	}
	used, err := replicas(engine.KVUsedTokens)
	if err != nil {
		return "", err
	}
	node, err := labelList(b.node)
	if err != nil {
		return "", err
	}
	on, err := labelList(uniq(slices.Concat([]string{b.node}, m.ReplicaLabels)...)...)
	if err != nil {
		return "", err
	}
	c := joined(caps)
	var terms []string
	for _, u := range usage {
		mean := "avg by (" + node + ") (" + u.expr + ")"
		if u.agg != engine.CapacityWeighted || c == "" {
			terms = append(terms, mean)
			continue
		}
		weighted := "(sum by (" + node + ") ((" + u.expr + ") * on (" + on + ") (" + c + ")) / " +
			"(sum by (" + node + ") ((" + c + ") and on (" + on + ") (" + u.expr + ")) > 0)) " +
			"and on (" + node + ") (count by (" + node + ") (" + u.expr + ") == " +
			"count by (" + node + ") ((" + u.expr + ") and on (" + on + ") (" + c + ")))"
		terms = append(terms, "("+weighted+") or on ("+node+") "+mean)
	}
	if u := joined(used); u != "" && c != "" {
		ratio := "sum by (" + node + ") (" + u + ") / (sum by (" + node + ") (" + c + ") > 0)"
		terms = append([]string{ratio}, terms...)
	}
	if len(terms) == 0 {
		return "", nil
	}
	for i, t := range terms {
		terms[i] = "(" + t + ")"
	}
	return strings.Join(terms, " or on ("+node+") "), nil
}

// ruleModel is one series per node labelled with its model, read from the
// series a refresh finds nodes by, the model labels in order of preference.
func (b builder) ruleModel(m *engine.Mapping) (string, error) {
	node, err := labelList(b.node)
	if err != nil {
		return "", err
	}
	srcs := familySources(m, concepts(m))
	var alts []string
	for _, l := range b.modelLabels(m) {
		if !validLabelName(l) {
			return "", fmt.Errorf("invalid label name %q", l)
		}
		with := b
		with.match = l + `!=""`
		sels, err := with.selectors(srcs)
		if err != nil {
			return "", err
		}
		alts = append(alts, "group by ("+node+", model) (label_replace("+strings.Join(sels, " or ")+`, "model", "$1", "`+l+`", "(.+)"))`)
	}
	sels, err := b.selectors(srcs)
	if err != nil {
		return "", err
	}
	if len(sels) == 0 {
		return "", fmt.Errorf("engine %s: no family to find nodes by", m.Engine)
	}
	// A node without any model label still has its indicators recorded.
	alts = append(alts, "group by ("+node+") ("+strings.Join(sels, " or ")+")")
	return "topk by (" + node + ") (1, " + strings.Join(alts, " or on ("+node+") ") + ")", nil
}
