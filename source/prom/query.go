package prom

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// ErrInvalidValue marks a node id or label value that may not reach PromQL.
var ErrInvalidValue = errors.New("invalid label value")

// maxValueLen bounds a label value put into a query, in bytes.
const maxValueLen = 1024

var (
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
)

// validLabelName reports whether name is a label name PromQL accepts
// unquoted in a matcher, by (…) or without (…).
func validLabelName(name string) bool { return labelNameRE.MatchString(name) }

// checkValue tells why value may not be put into a query: it must be valid
// UTF-8 of at most maxValueLen bytes without control characters. Errors
// wrap ErrInvalidValue.
func checkValue(value string) error {
	switch {
	case len(value) > maxValueLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidValue, maxValueLen)
	case !utf8.ValidString(value):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidValue)
	case strings.ContainsFunc(value, unicode.IsControl):
		return fmt.Errorf("%w: contains a control character", ErrInvalidValue)
	}
	return nil
}

// labelMatcher is the one place a value from outside the query builder
// (node ids, label values and family names of the mapping table) enters
// PromQL: it validates name and value and returns name op "value", the value
// quoted as a PromQL string literal (Go escapes, which PromQL's lexer reads
// back to the same string). op is = or =~.
func labelMatcher(name, op, value string) (string, error) {
	if name != "__name__" && !validLabelName(name) {
		return "", fmt.Errorf("invalid label name %q", name)
	}
	if op != "=" && op != "=~" {
		return "", fmt.Errorf("invalid matcher operator %q", op)
	}
	if err := checkValue(value); err != nil {
		return "", fmt.Errorf("label %s: %w", name, err)
	}
	return name + op + strconv.Quote(value), nil
}

// shape says what a query returns and how its result is read.
type shape int

const (
	// shapeIdentity: per node and combination of the DP, TP and model
	// labels, the last scrape time, or what became of the node
	// (builder.identity).
	shapeIdentity shape = iota
	// shapeNode: one value per node.
	shapeNode
	// shapeReplica: one value per node and replica (Mapping.ReplicaLabels).
	shapeReplica
	// shapeInfo: per node, replica and info labels; the value is the
	// product of the info labels (Source.Labels).
	shapeInfo
	// shapeBuckets: one value per node and le.
	shapeBuckets
	// shapeHistSum and shapeHistCount: a histogram's _sum and _count, one
	// value per node.
	shapeHistSum
	shapeHistCount
	// shapeCreated: when each node's counters started, Unix seconds.
	shapeCreated
	// shapeRanked: a gauge per node, replica and rank (Mapping.RankLabels):
	// per replica the lowest ranks are kept, as engine.Extract does, then
	// the replicas are aggregated (or kept, for the KV concepts).
	shapeRanked
	// shapeDCGM: every DCGM series, per GPU, with the labels that join it
	// to a node (dcgm.go).
	shapeDCGM
	// shapeRole: per node, the values of the labels that say its role
	// (engine.RoleLabels); one query for every engine (builder.role).
	shapeRole
	// shapeEffects: the cache and decoding effects of an engine
	// (builder.effects), one query whose samples say by effectLabel which
	// effect they hold.
	shapeEffects
)

var shapeNames = [...]string{"identity", "value", "replicas", "info", "buckets", "sum", "count", "created", "ranked", "dcgm", "role", "effects"}

func (s shape) String() string {
	if s < 0 || int(s) >= len(shapeNames) {
		return "targets"
	}
	return shapeNames[s]
}

// query is one PromQL instant query of a refresh.
type query struct {
	engine  llmdiagv1.Engine
	shape   shape
	concept engine.Concept // for the concept shapes
	// run orders the alternatives of one concept when its sources need
	// more than one query: per node, the lowest run with a value wins.
	run int
	// agg of the sources, for shapeReplica.
	agg engine.Agg
	// info are the labels multiplied, for shapeInfo.
	info []string
	// want are the labels of the result the query reads, the node label
	// first.
	want []string
	expr string
	// seq is the query's rank among its engine's in a read's queue: the
	// engines take turns within a priority (cycle).
	seq int
}

// hasConcept reports whether q reads one concept (query.concept); the
// other shapes leave it zero, which is not Queue.
func (q query) hasConcept() bool {
	switch q.shape {
	case shapeIdentity, shapeTargets, shapeCreated, shapeDCGM, shapeRole, shapeEffects:
		return false
	}
	return true
}

// what names the query in errors and warnings.
func (q query) what() string {
	switch {
	case !q.hasConcept():
		return q.shape.String()
	case q.shape == shapeBuckets, q.shape == shapeHistSum, q.shape == shapeHistCount:
		return q.concept.String() + " " + q.shape.String()
	}
	return q.concept.String()
}

// builder writes the queries of one refresh or one on-demand window.
type builder struct {
	// node is the label that identifies a node (Config.NodeLabel).
	node string
	// models are the labels that may carry the model, in order of
	// preference, beyond the mapping's own.
	models []string
	// rng is the rate range ("5m"); "" reads counters cumulative (lifetime).
	rng string
	// lookback is how far back vanished nodes are looked for ("10m"); ""
	// sends no vanished query.
	lookback string
	// match is an escaped node matcher added to every selector, or "".
	match string
}

// forNode returns b restricted to the series whose node label is node,
// which must not be empty.
func (b builder) forNode(node string) (builder, error) {
	if node == "" {
		return b, fmt.Errorf("%w: empty node id", ErrInvalidValue)
	}
	m, err := labelMatcher(b.node, "=", node)
	if err != nil {
		return b, err
	}
	b.match = m
	return b, nil
}

// sel is the selector of family's series that have the labels of match (and
// b's node matcher).
func (b builder) sel(family string, match map[string]string) (string, error) {
	return b.selAny(family, match, nil)
}

// srcSel is the selector of the series of family that src keeps: its Match
// and MatchAny (family is src.Family, or a part of a histogram).
func (b builder) srcSel(family string, src engine.Source) (string, error) {
	return b.selAny(family, src.Match, src.MatchAny)
}

// selAny is sel with, per label of any, a regular-expression matcher that
// accepts exactly one of its values (each quoted with regexp.QuoteMeta;
// PromQL anchors the expression).
func (b builder) selAny(family string, match map[string]string, any map[string][]string) (string, error) {
	var ms []string
	name := family
	if !metricNameRE.MatchString(family) {
		m, err := labelMatcher("__name__", "=", family)
		if err != nil {
			return "", fmt.Errorf("family %q: %w", family, err)
		}
		ms, name = append(ms, m), ""
	}
	for _, k := range slices.Sorted(maps.Keys(match)) {
		m, err := labelMatcher(k, "=", match[k])
		if err != nil {
			return "", fmt.Errorf("family %s: %w", family, err)
		}
		ms = append(ms, m)
	}
	for _, k := range slices.Sorted(maps.Keys(any)) {
		if len(any[k]) == 0 {
			return "", fmt.Errorf("family %s: label %s: no value to match", family, k)
		}
		alts := make([]string, len(any[k]))
		for i, v := range any[k] {
			alts[i] = regexp.QuoteMeta(v)
		}
		m, err := labelMatcher(k, "=~", strings.Join(alts, "|"))
		if err != nil {
			return "", fmt.Errorf("family %s: %w", family, err)
		}
		ms = append(ms, m)
	}
	if b.match != "" {
		ms = append(ms, b.match)
	}
	if len(ms) == 0 {
		return name, nil
	}
	return name + "{" + strings.Join(ms, ", ") + "}", nil
}

// counter reads a counter selector: its rate over the window, or its
// cumulative value for the lifetime.
func (b builder) counter(sel string) string {
	if b.rng == "" {
		return sel
	}
	return "rate(" + sel + "[" + b.rng + "])"
}

// labelList joins label names for by (…) and without (…), validating them.
func labelList(names ...string) (string, error) {
	for _, n := range names {
		if !validLabelName(n) {
			return "", fmt.Errorf("invalid label name %q", n)
		}
	}
	return strings.Join(names, ", "), nil
}

// uniq returns names without "" and repeats, in order.
func uniq(names ...string) []string {
	var out []string
	for _, n := range names {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// dedupe collapses the ranks of one replica (Mapping.RankLabels), which
// report the same value: each replica then counts once.
func dedupe(m *engine.Mapping, expr string) (string, error) {
	if len(m.RankLabels) == 0 {
		return expr, nil
	}
	ranks, err := labelList(m.RankLabels...)
	if err != nil {
		return "", err
	}
	return "max without (" + ranks + ") (" + expr + ")", nil
}

// aggregator is the PromQL aggregation of agg.
func aggregator(agg engine.Agg) string {
	switch agg {
	case engine.Mean, engine.CapacityWeighted:
		return "avg"
	case engine.Max:
		return "max"
	}
	return "sum"
}

// series is the PromQL of src's per-series values, before any
// aggregation: gauges as they are, counters (and a histogram's part, suffix
// _bucket, _sum or _count) as rates or cumulative, products of operands,
// each scaled by Source.Scale.
func (b builder) series(src engine.Source, suffix string) (string, error) {
	var expr string
	switch src.Kind {
	case engine.Gauge:
		s, err := b.srcSel(src.Family, src)
		if err != nil {
			return "", err
		}
		expr = s
	case engine.Counter, engine.HistogramSum, engine.HistogramCount, engine.Histogram:
		switch src.Kind {
		case engine.HistogramSum:
			suffix = "_sum"
		case engine.HistogramCount:
			suffix = "_count"
		case engine.Counter:
			suffix = ""
		}
		s, err := b.srcSel(src.Family+suffix, src)
		if err != nil {
			return "", err
		}
		expr = b.counter(s)
	case engine.Product:
		if len(src.Operands) < 2 {
			return "", fmt.Errorf("product of %d operands", len(src.Operands))
		}
		var parts, ignoring []string
		for _, o := range src.Operands {
			p, err := b.series(o, "")
			if err != nil {
				return "", err
			}
			parts = append(parts, "("+p+")")
			ignoring = append(ignoring, slices.Sorted(maps.Keys(o.Match))...)
			ignoring = append(ignoring, slices.Sorted(maps.Keys(o.MatchAny))...)
		}
		op := " * "
		if ig := uniq(ignoring...); len(ig) > 0 {
			l, err := labelList(ig...)
			if err != nil {
				return "", err
			}
			op = " * ignoring (" + l + ") "
		}
		expr = strings.Join(parts, op)
	default:
		return "", fmt.Errorf("source kind %d has no per-series value", src.Kind)
	}
	if src.Scale != 0 && src.Scale != 1 {
		expr = "(" + expr + ") * " + strconv.FormatFloat(src.Scale, 'g', -1, 64)
	}
	return expr, nil
}

// aggregate is src's values aggregated by labels after collapsing ranks.
// A Difference is the sum of its first operand minus the sums of the
// others, clamped at 0, by labels.
func (b builder) aggregate(m *engine.Mapping, src engine.Source, agg string, suffix string, labels ...string) (string, error) {
	by, err := labelList(labels...)
	if err != nil {
		return "", err
	}
	if src.Kind == engine.Difference {
		if len(src.Operands) < 2 {
			return "", fmt.Errorf("difference of %d operands", len(src.Operands))
		}
		parts := make([]string, len(src.Operands))
		for i, o := range src.Operands {
			if parts[i], err = b.aggregate(m, o, "sum", "", labels...); err != nil {
				return "", err
			}
		}
		return "clamp_min(" + strings.Join(parts, " - ") + ", 0)", nil
	}
	s, err := b.series(src, suffix)
	if err != nil {
		return "", err
	}
	if s, err = dedupe(m, s); err != nil {
		return "", err
	}
	if agg == "max" {
		// engine.Max: the sum of each replica, then the largest.
		inner, err := labelList(uniq(slices.Concat(labels, m.ReplicaLabels)...)...)
		if err != nil {
			return "", err
		}
		s = "sum by (" + inner + ") (" + s + ")"
	}
	return agg + " by (" + by + ") (" + s + ")", nil
}

// or joins alternatives: per node, the first that has series.
func (b builder) or(exprs []string) string {
	if len(exprs) == 1 {
		return exprs[0]
	}
	return strings.Join(exprs, " or on ("+b.node+") ")
}

// modelLabels are the labels that may carry m's model, in order.
func (b builder) modelLabels(m *engine.Mapping) []string {
	return uniq(slices.Concat([]string{m.ModelLabel}, m.ModelLabelFallbacks, b.models)...)
}

// familySources are the sources whose series tell that a node of m exists:
// every family of concepts (operands included): gauges, counters, and the
// _count of histograms (one series per node and label set, where the
// buckets have one per bound), without the sources' label matchers: any
// series of the family tells. An engine that exports no gauge at all
// (trtllm-serve) is found by its counters and histograms.
func familySources(m *engine.Mapping, concepts []engine.Concept) []engine.Source {
	var out []engine.Source
	var walk func(src engine.Source)
	walk = func(src engine.Source) {
		switch src.Kind {
		case engine.Gauge, engine.Info, engine.Counter:
			out = append(out, engine.Source{Family: src.Family})
		case engine.Histogram, engine.HistogramCount:
			out = append(out, engine.Source{Family: src.Family + "_count"})
		case engine.HistogramSum:
			out = append(out, engine.Source{Family: src.Family + "_sum"})
		case engine.Product, engine.Difference:
			for _, o := range src.Operands {
				walk(o)
			}
		}
	}
	for _, c := range concepts {
		for _, src := range m.Concepts[c] {
			walk(src)
		}
	}
	return out
}

// selectors returns the distinct selectors of srcs.
func (b builder) selectors(srcs []engine.Source) ([]string, error) {
	var out []string
	for _, src := range srcs {
		s, err := b.srcSel(src.Family, src)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// concepts returns m's concepts in order.
func concepts(m *engine.Mapping) []engine.Concept {
	return slices.Sorted(maps.Keys(m.Concepts))
}

// jobLabel is the label Prometheus gives every series of a scrape job,
// and up.
const jobLabel = "job"

// Values of an identity query's samples besides the last scrape time.
const (
	// identityVanished: the node had series of the engine within the
	// lookback and has none now.
	identityVanished = 0
	// identityDown: up == 0 for the node, in a job that served the
	// engine's families within the lookback.
	identityDown = -1
)

// identity returns the query that finds m's nodes, one sample per node and
// combination of the DP, TP, PP, EP and model labels. Its value tells what
// became of the node:
//
//   - > 0: the time of its newest series (Unix seconds), from every family
//     of m (familySources): the node is live;
//   - identityDown: Prometheus's last scrape of the target failed
//     (up == 0), and its job served m's families within the lookback (so
//     that a target never scraped successfully is found too);
//   - identityVanished: the node had m's series within the lookback and
//     has none now (target gone from service discovery, or no longer
//     exporting).
//
// The three parts are joined with or on (node), in that order: each node
// reads the first that has it. Without a lookback the down part looks at
// the jobs serving m now, and there is no vanished part.
func (b builder) identity(m *engine.Mapping) (query, error) {
	sels, err := b.selectors(familySources(m, concepts(m)))
	if err != nil {
		return query{}, err
	}
	if len(sels) == 0 {
		return query{}, fmt.Errorf("engine %s: no family to find nodes by", m.Engine)
	}
	want := uniq(slices.Concat([]string{b.node, m.DPLabel, m.TPLabel, m.PPLabel, m.EPLabel}, b.modelLabels(m))...)
	by, err := labelList(want...)
	if err != nil {
		return query{}, err
	}
	node, err := labelList(b.node)
	if err != nil {
		return query{}, err
	}
	ts := make([]string, len(sels))
	for i, s := range sels {
		ts[i] = "timestamp(" + s + ")"
	}
	up, err := b.sel("up", nil)
	if err != nil {
		return query{}, err
	}
	jobs := strings.Join(sels, " or ")
	if b.lookback != "" {
		jobs = b.lastOverTime(sels)
	}
	expr := "max by (" + by + ") (" + strings.Join(ts, " or ") + ")" +
		" or on (" + node + ") (max by (" + node + ") (" + up + " == 0 and on (" + jobLabel + ") group by (" + jobLabel + ") (" + jobs + ")) - 1)"
	if b.lookback != "" {
		v, err := b.vanished(m)
		if err != nil {
			return query{}, err
		}
		expr += " or on (" + node + ") (" + v + ") * 0"
	}
	return query{engine: m.Engine, shape: shapeIdentity, want: want, expr: expr}, nil
}

// lastOverTime joins last_over_time of sels over the lookback with or.
func (b builder) lastOverTime(sels []string) string {
	last := make([]string, len(sels))
	for i, s := range sels {
		last[i] = "last_over_time(" + s + "[" + b.lookback + "])"
	}
	return strings.Join(last, " or ")
}

// vanished is the PromQL of the nodes that had series of m's families
// within the lookback and have none now, one series of value 1 per node
// and model label, labelled with the node and model labels. b.lookback must
// be set.
func (b builder) vanished(m *engine.Mapping) (string, error) {
	sels, err := b.selectors(familySources(m, concepts(m)))
	if err != nil {
		return "", err
	}
	if len(sels) == 0 {
		return "", fmt.Errorf("engine %s: no family to find nodes by", m.Engine)
	}
	by, err := labelList(uniq(slices.Concat([]string{b.node}, b.modelLabels(m))...)...)
	if err != nil {
		return "", err
	}
	return "group by (" + by + ") (" + b.lastOverTime(sels) + ") unless on (" + b.node + ") (" +
		strings.Join(sels, " or ") + ")", nil
}

// isKV reports whether c is read per replica: the KV concepts, combined as
// engine.Extract does.
func isKV(c engine.Concept) bool {
	return c == engine.KVUsage || c == engine.KVCapacityTokens || c == engine.KVUsedTokens
}

// sourceShape is how src of concept c of m is queried. Gauges of an engine
// with ranks are read per rank, so that the lowest can be chosen here:
// pipeline stages may report different values, and PromQL cannot order
// label values. (A gauge has one series per rank; counters and histograms,
// which would multiply the answer by the ranks, are deduplicated in PromQL
// with max without (ranks).)
func sourceShape(m *engine.Mapping, c engine.Concept, src engine.Source) shape {
	switch {
	case src.Kind == engine.Info:
		return shapeInfo
	case src.Kind == engine.Histogram:
		return shapeBuckets
	case src.Kind == engine.Gauge && len(m.RankLabels) > 0:
		return shapeRanked
	case isKV(c):
		return shapeReplica
	}
	return shapeNode
}

// data returns the queries that read m's concepts from its nodes, then
// its KV-transfer concepts (engine.KVTransferMapping), read with their own
// table's rank and replica labels.
func (b builder) data(m *engine.Mapping) ([]query, error) {
	var qs []query
	tables := []*engine.Mapping{m}
	if km, ok := engine.KVTransferMapping(m.Engine); ok {
		tables = append(tables, km)
	}
	for _, t := range tables {
		for _, c := range concepts(t) {
			more, err := b.concept(t, c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c, err)
			}
			qs = append(qs, more...)
		}
	}
	if q, ok, err := b.effects(m); err != nil {
		return nil, fmt.Errorf("effects: %w", err)
	} else if ok {
		qs = append(qs, q)
	}
	if b.rng == "" && len(m.Created) > 0 {
		q, err := b.created(m)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// concept returns the queries of concept c of m.
func (b builder) concept(m *engine.Mapping, c engine.Concept) ([]query, error) {
	var qs []query
	srcs := m.Concepts[c]
	// Consecutive sources of the same shape (and aggregation, and info
	// labels) make one query, joined with or.
	for run, start := 0, 0; start < len(srcs); run++ {
		sh := sourceShape(m, c, srcs[start])
		end := start + 1
		for end < len(srcs) && sourceShape(m, c, srcs[end]) == sh && srcs[end].Agg == srcs[start].Agg &&
			slices.Equal(srcs[end].Labels, srcs[start].Labels) {
			end++
		}
		group := srcs[start:end]
		start = end
		more, err := b.group(m, c, run, sh, group)
		if err != nil {
			return nil, err
		}
		qs = append(qs, more...)
	}
	return qs, nil
}

// group returns the queries of one run of sources of concept c.
func (b builder) group(m *engine.Mapping, c engine.Concept, run int, sh shape, srcs []engine.Source) ([]query, error) {
	q := query{engine: m.Engine, shape: sh, concept: c, run: run, agg: srcs[0].Agg, want: []string{b.node}}
	exprs := make([]string, len(srcs))
	var err error
	switch sh {
	case shapeInfo:
		q.info = srcs[0].Labels
		by := uniq(slices.Concat([]string{b.node}, m.ReplicaLabels, q.info)...)
		q.want = by
		for i, src := range srcs {
			s, err := b.srcSel(src.Family, src)
			if err != nil {
				return nil, err
			}
			l, err := labelList(by...)
			if err != nil {
				return nil, err
			}
			exprs[i] = "max by (" + l + ") (" + s + ")"
		}
	case shapeReplica:
		// Usage fractions average within a replica; tokens add up.
		agg := "sum"
		if c == engine.KVUsage {
			agg = "avg"
		}
		by := uniq(slices.Concat([]string{b.node}, m.ReplicaLabels)...)
		q.want = by
		for i, src := range srcs {
			if exprs[i], err = b.aggregate(m, src, agg, "", by...); err != nil {
				return nil, err
			}
		}
	case shapeRanked:
		by := uniq(slices.Concat([]string{b.node}, m.ReplicaLabels, m.RankLabels)...)
		q.want = by
		l, err := labelList(by...)
		if err != nil {
			return nil, err
		}
		for i, src := range srcs {
			s, err := b.series(src, "")
			if err != nil {
				return nil, err
			}
			exprs[i] = "sum by (" + l + ") (" + s + ")"
		}
	case shapeNode:
		for i, src := range srcs {
			if exprs[i], err = b.aggregate(m, src, aggregator(src.Agg), "", b.node); err != nil {
				return nil, err
			}
		}
	case shapeBuckets:
		var qs []query
		for _, part := range []struct {
			sh     shape
			suffix string
			by     []string
		}{
			{shapeBuckets, "_bucket", []string{b.node, "le"}},
			{shapeHistSum, "_sum", []string{b.node}},
			{shapeHistCount, "_count", []string{b.node}},
		} {
			for i, src := range srcs {
				// Buckets, sums and counts of replicas add up.
				if exprs[i], err = b.aggregate(m, src, "sum", part.suffix, part.by...); err != nil {
					return nil, err
				}
			}
			p := q
			p.shape, p.expr, p.want = part.sh, b.or(exprs), part.by
			qs = append(qs, p)
		}
		return qs, nil
	}
	q.expr = b.or(exprs)
	return []query{q}, nil
}

// role is the one query, for every engine, of the labels that say a
// node's role (engine.RoleLabels): per node, each value of a role label
// that says a role, on the families of the label's prefix, joined with or.
// Its answer is a few series per node that says its role and none for the
// others; engine.RoleFrom decides, as for a direct scrape.
func (b builder) role() (query, error) {
	labels := engine.RoleLabels()
	want := []string{b.node}
	parts := make([]string, len(labels))
	for i, rl := range labels {
		want = append(want, rl.Label)
		nm, err := labelMatcher("__name__", "=~", regexp.QuoteMeta(rl.Prefix)+".*")
		if err != nil {
			return query{}, err
		}
		vals := slices.Sorted(maps.Keys(rl.Values))
		for j, v := range vals {
			vals[j] = regexp.QuoteMeta(v)
		}
		lm, err := labelMatcher(rl.Label, "=~", strings.Join(vals, "|"))
		if err != nil {
			return query{}, err
		}
		ms := []string{nm, lm}
		if b.match != "" {
			ms = append(ms, b.match)
		}
		parts[i] = "{" + strings.Join(ms, ", ") + "}"
	}
	want = uniq(want...)
	by, err := labelList(want...)
	if err != nil {
		return query{}, err
	}
	return query{shape: shapeRole, want: want, expr: "group by (" + by + ") (" + strings.Join(parts, " or ") + ")"}, nil
}

// created is the query for the earliest start of each node's counters
// (Mapping.Created), for lifetime rates.
func (b builder) created(m *engine.Mapping) (query, error) {
	names := make([]string, len(m.Created))
	for i, n := range m.Created {
		names[i] = regexp.QuoteMeta(n)
	}
	nm, err := labelMatcher("__name__", "=~", strings.Join(names, "|"))
	if err != nil {
		return query{}, err
	}
	ms := []string{nm}
	if b.match != "" {
		ms = append(ms, b.match)
	}
	by, err := labelList(b.node)
	if err != nil {
		return query{}, err
	}
	return query{
		engine: m.Engine,
		shape:  shapeCreated,
		want:   []string{b.node},
		expr:   "min by (" + by + ") ({" + strings.Join(ms, ", ") + "} > 0)",
	}, nil
}

// effectLabel is the label the effects query (builder.effects) adds to each
// of its parts: the effect concept's name (engine.Concept.String),
// effectLoRA, or effectOffload and the tier.
const effectLabel = "llmdiag_effect"

// Values of effectLabel besides the concepts' names.
const (
	effectLoRA    = "lora"
	effectOffload = "offload:"
)

// effectRanked reports whether the effect concept c of m is read per rank
// (shapeRanked): a gauge of an engine with ranks.
func effectRanked(m *engine.Mapping, c engine.Concept) bool {
	srcs := m.Effects[c]
	return len(m.RankLabels) > 0 && len(srcs) > 0 && srcs[0].Kind == engine.Gauge
}

// effects returns the one query that reads all of m's cache and decoding
// effects (Mapping.Effects, LoRAInfo, Offload) from every node, and false
// when m has none. Each part is labelled with effectLabel by label_replace
// and the parts are joined with or (their label sets differ in it):
//
//   - per effect concept, its aliases joined with or on (node) as data
//     joins a concept's: counters as sum by (node) of their rates (or
//     cumulative values), gauges as Source.Agg says, per node, or, for an
//     engine with ranks, per node, replica and rank like shapeRanked;
//   - the newest LoRA info series of each node and replica (topk by
//     (node, replica labels) (1, …): vLLM sets the gauge to the time of the
//     change), with its adapter lists;
//   - per offload tier, one sample for each node that has a series of a
//     family with the tier's prefix.
//
// One query per engine, whatever the number of effects and nodes; nodes
// that export none answer nothing.
func (b builder) effects(m *engine.Mapping) (query, bool, error) {
	if len(m.Effects) == 0 && len(m.LoRAInfo) == 0 && len(m.Offload) == 0 {
		return query{}, false, nil
	}
	want := []string{b.node, effectLabel}
	if len(m.LoRAInfo) > 0 || len(m.RankLabels) > 0 {
		want = append(want, m.ReplicaLabels...)
	}
	want = append(want, m.RankLabels...)
	if len(m.LoRAInfo) > 0 {
		want = append(want, engine.LoRARunningLabel, engine.LoRAWaitingLabel, engine.LoRAMaxLabel)
	}
	want = uniq(want...)
	var parts []string
	part := func(name, expr string) error {
		if err := checkValue(name); err != nil || strings.ContainsAny(name, "$\\") {
			return fmt.Errorf("effect %q: not a label value", name)
		}
		parts = append(parts, "label_replace("+expr+", "+strconv.Quote(effectLabel)+", "+strconv.Quote(name)+`, "", "")`)
		return nil
	}
	ranked, err := labelList(uniq(slices.Concat([]string{b.node}, m.ReplicaLabels, m.RankLabels)...)...)
	if err != nil {
		return query{}, false, err
	}
	for _, c := range slices.Sorted(maps.Keys(m.Effects)) {
		srcs := m.Effects[c]
		exprs := make([]string, len(srcs))
		for i, src := range srcs {
			if effectRanked(m, c) {
				s, err := b.series(src, "")
				if err != nil {
					return query{}, false, err
				}
				exprs[i] = "sum by (" + ranked + ") (" + s + ")"
				continue
			}
			if exprs[i], err = b.aggregate(m, src, aggregator(src.Agg), "", b.node); err != nil {
				return query{}, false, err
			}
		}
		if len(exprs) > 0 {
			if err := part(c.String(), b.or(exprs)); err != nil {
				return query{}, false, err
			}
		}
	}
	if len(m.LoRAInfo) > 0 {
		by, err := labelList(uniq(slices.Concat([]string{b.node}, m.ReplicaLabels)...)...)
		if err != nil {
			return query{}, false, err
		}
		exprs := make([]string, len(m.LoRAInfo))
		for i, f := range m.LoRAInfo {
			s, err := b.sel(f, nil)
			if err != nil {
				return query{}, false, err
			}
			exprs[i] = "topk by (" + by + ") (1, " + s + ")"
		}
		if err := part(effectLoRA, b.or(exprs)); err != nil {
			return query{}, false, err
		}
	}
	node, err := labelList(b.node)
	if err != nil {
		return query{}, false, err
	}
	for _, o := range m.Offload {
		nm, err := labelMatcher("__name__", "=~", regexp.QuoteMeta(o.Prefix)+".+")
		if err != nil {
			return query{}, false, err
		}
		ms := []string{nm}
		if b.match != "" {
			ms = append(ms, b.match)
		}
		if err := part(effectOffload+o.Tier, "group by ("+node+") ({"+strings.Join(ms, ", ")+"})"); err != nil {
			return query{}, false, err
		}
	}
	return query{engine: m.Engine, shape: shapeEffects, want: want, expr: strings.Join(parts, " or ")}, true, nil
}
