package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/sample"
)

// Extract reads one Sample of engine from families, as read at at. With
// ENGINE_UNSPECIFIED the engine is detected first (Detect).
//
// Every concept is read from the first of its sources (Mapping.Concepts)
// that is present. A concept whose family is absent stays nil; one whose
// family is present but unusable (wrong type, NaN values, a histogram without
// +Inf bucket, sub-series with different buckets, operands whose series do
// not match) stays nil too and adds an entry to Errors; the other concepts
// are filled regardless. A latency without histogram whose sum and count
// the engine exposes as counters fills Sample.Totals. Extract does not
// modify families.
func Extract(engine llmdiagv1.Engine, families map[string]*dto.MetricFamily, at time.Time) *sample.Sample {
	if engine == llmdiagv1.Engine_ENGINE_UNSPECIFIED {
		engine = Detect(families)
	}
	s := &sample.Sample{At: at, Up: true, Engine: engine}
	m, ok := Lookup(engine)
	if !ok {
		s.Errors = append(s.Errors, fmt.Sprintf("no metric mapping for engine %s", engine))
		return s
	}
	x := &extractor{m: m, families: families}
	s.Queue, s.Running, s.KVUsage, s.KVCapacityTokens = x.routing()
	s.PromptTokens = x.value(PromptTokens)
	s.GenerationTokens = x.value(GenerationTokens)
	s.Preemptions = x.value(Preemptions)
	s.RequestsFinished = x.value(RequestsFinished)
	s.RequestsAborted = x.value(RequestsAborted)
	for c := TTFT; c <= QueueTime; c++ {
		h, _ := c.Hist()
		s.Hists[h] = x.histogram(c)
	}
	for _, t := range totals {
		if s.Hists[t.hist] == nil {
			s.Totals[t.hist] = x.total(t.sum, t.count)
		}
	}
	s.Effects = x.effects()
	s.CountersCreated = x.created()
	s.Model = x.model()
	s.DataParallel = x.distinct(m.DPLabel)
	s.TensorParallel = x.distinct(m.TPLabel)
	s.PipelineParallel = x.distinct(m.PPLabel)
	s.ExpertParallel = x.distinct(m.EPLabel)
	x.disagg(s)
	s.Errors = x.errs
	return s
}

// routing reads the concepts a router needs (routingConcepts): queue,
// running, and KV usage and capacity. ReadRouting calls it too, on the
// routing families alone, so both paths compute these values one way.
func (x *extractor) routing() (queue, running, kvUsage, kvCapacity *float64) {
	queue = x.value(Queue)
	running = x.value(Running)
	kvUsage, kvCapacity = x.kv()
	return queue, running, kvUsage, kvCapacity
}

// extractor reads the concepts of one mapping from one set of families,
// collecting errors.
type extractor struct {
	m        *Mapping
	families map[string]*dto.MetricFamily
	errs     []string
}

// series is one sub-series of a family with its labels.
type series struct {
	labels labelSet
	metric *dto.Metric
}

// labelSet is a metric's label pairs, read as a map of name to value would
// read them (a name given twice: its last value; a name absent: ""),
// without making the map: the extractor reads a few labels of each series,
// and a fast lane thousands of series a second.
type labelSet []*dto.LabelPair

// get is the value of the label name, "" when absent.
func (ls labelSet) get(name string) string {
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].GetName() == name {
			return ls[i].GetValue()
		}
	}
	return ""
}

// names calls f with each name once (and its value, as get reads it).
func (ls labelSet) names(f func(name, value string)) {
	for i, p := range ls {
		if !slices.ContainsFunc(ls[i+1:], func(q *dto.LabelPair) bool { return q.GetName() == p.GetName() }) {
			f(p.GetName(), p.GetValue())
		}
	}
}

// keyed is one replica's value with its join key (Mapping.ReplicaLabels).
type keyed = Replica

// fail records that family could not give concept c.
func (x *extractor) fail(c Concept, family string, err error) {
	x.errs = append(x.errs, fmt.Sprintf("%s (%s): %v", family, c, err))
}

// find returns the first source of c that is present (see present). ok is
// false when none is, or when the present one has a family of the wrong
// type (an error is recorded then).
func (x *extractor) find(c Concept) (src Source, ok bool) {
	for _, src := range x.m.sources(c) {
		if !x.present(src) {
			continue
		}
		if err := x.checkTypes(src); err != nil {
			x.fail(c, src.name(), err)
			return src, false
		}
		return src, true
	}
	return Source{}, false
}

// present reports whether src has a series to read: one of its family that
// src keeps (Match and MatchAny), or, for Product and Difference, one of
// every operand.
func (x *extractor) present(src Source) bool {
	if len(src.Operands) > 0 {
		for _, o := range src.Operands {
			if !x.present(o) {
				return false
			}
		}
		return true
	}
	for _, m := range x.families[src.Family].GetMetric() {
		if src.keeps(m) {
			return true
		}
	}
	return false
}

// keeps reports whether src reads series m: m has every label value of
// src.Match and, for every label of src.MatchAny, one of its values.
func (src Source) keeps(m *dto.Metric) bool {
	n, k := 0, 0
	for _, l := range m.GetLabel() {
		if v, ok := src.Match[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
		if vs, ok := src.MatchAny[l.GetName()]; ok {
			if !slices.Contains(vs, l.GetValue()) {
				return false
			}
			k++
		}
	}
	return n == len(src.Match) && k == len(src.MatchAny)
}

// matchLabels reports whether src restricts label (Match or MatchAny).
func (src Source) matchLabels(label string) bool {
	_, a := src.Match[label]
	_, b := src.MatchAny[label]
	return a || b
}

// checkTypes checks the type of every family src reads.
func (x *extractor) checkTypes(src Source) error {
	if len(src.Operands) > 0 {
		for _, o := range src.Operands {
			if o.Kind == Histogram || o.Kind == Product || o.Kind == Difference {
				return fmt.Errorf("operand %s: kind %d cannot be combined", o.Family, o.Kind)
			}
			if err := x.checkTypes(o); err != nil {
				return fmt.Errorf("%s: %w", o.Family, err)
			}
		}
		return nil
	}
	return checkType(src.Kind, x.families[src.Family].GetType())
}

func checkType(k Kind, t dto.MetricType) error {
	isHist := t == dto.MetricType_HISTOGRAM || t == dto.MetricType_GAUGE_HISTOGRAM
	wantHist := k == Histogram || k == HistogramCount || k == HistogramSum
	switch {
	case wantHist && !isHist:
		return fmt.Errorf("family is a %s, want a histogram", strings.ToLower(t.String()))
	case !wantHist && t != dto.MetricType_GAUGE && t != dto.MetricType_COUNTER && t != dto.MetricType_UNTYPED:
		return fmt.Errorf("family is a %s, want a gauge or counter", strings.ToLower(t.String()))
	}
	return nil
}

// collapse returns the series of src's family that src keeps, keeping
// per replica only the series with the lowest Mapping.RankLabels.
func (x *extractor) collapse(src Source) []series {
	var out []series
	index := map[string]int{}
	for _, m := range x.families[src.Family].GetMetric() {
		if !src.keeps(m) {
			continue
		}
		s := series{labels: m.GetLabel(), metric: m}
		if len(x.m.RankLabels) == 0 {
			out = append(out, s)
			continue
		}
		key := replicaOf(s.labels, x.m.RankLabels)
		i, seen := index[key]
		switch {
		case !seen:
			index[key] = len(out)
			out = append(out, s)
		case compareRanks(s.labels, out[i].labels, x.m.RankLabels) < 0:
			out[i] = s
		}
	}
	return out
}

func labelMap(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// replicaOf identifies a series by all its labels except ranks.
func replicaOf(labels labelSet, ranks []string) string {
	parts := make([]string, 0, len(labels))
	labels.names(func(n, v string) {
		if !slices.Contains(ranks, n) {
			parts = append(parts, n+"\xff"+v)
		}
	})
	slices.Sort(parts)
	return strings.Join(parts, "\xfe")
}

// compareRanks orders two series by their rank labels, numerically where
// both values are integers.
func compareRanks(a, b labelSet, ranks []string) int {
	for _, r := range ranks {
		ar, br := a.get(r), b.get(r)
		x, errX := strconv.ParseInt(ar, 10, 64)
		y, errY := strconv.ParseInt(br, 10, 64)
		c := cmp.Compare(ar, br)
		if errX == nil && errY == nil {
			c = cmp.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// read returns one value per replica of concept c. ok is false when c is not
// exposed or its family is unusable (an error is recorded then).
func (x *extractor) read(c Concept) (src Source, vals []keyed, ok bool) {
	src, ok = x.find(c)
	if !ok {
		return src, nil, false
	}
	var err error
	switch src.Kind {
	case Product:
		vals, err = x.product(src)
	case Difference:
		vals, err = x.difference(src)
	default:
		vals, err = x.values(src)
	}
	if err != nil {
		x.fail(c, src.name(), err)
		return src, nil, false
	}
	return src, vals, true
}

// values reads every series of a single-family source.
func (x *extractor) values(src Source) ([]keyed, error) {
	var vals []keyed
	for _, s := range x.collapse(src) {
		v, err := scalar(src, s)
		if err != nil {
			return nil, err
		}
		vals = append(vals, keyed{Key: x.replicaKey(s.labels), V: v})
	}
	return vals, nil
}

// replicaKey joins the values of Mapping.ReplicaLabels.
func (x *extractor) replicaKey(labels labelSet) string {
	key := make([]string, len(x.m.ReplicaLabels))
	for i, l := range x.m.ReplicaLabels {
		key[i] = labels.get(l)
	}
	return strings.Join(key, "\xff")
}

// product multiplies the operands of src series by series: each series of
// the first operand with the series of every other operand that has the
// same labels but for the operands' Match labels (PromQL: a * ignoring(…) b).
func (x *extractor) product(src Source) ([]keyed, error) {
	first := src.Operands[0]
	others := make([][]series, len(src.Operands))
	for i, o := range src.Operands[1:] {
		others[i+1] = x.collapse(o)
	}
	var vals []keyed
	for _, s := range x.collapse(first) {
		v, err := scalar(first, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", first.Family, err)
		}
		for i, o := range src.Operands[1:] {
			t, err := partner(s, first, others[i+1], o)
			if err == nil {
				var w float64
				w, err = scalar(o, t)
				v *= w
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o.Family, err)
			}
		}
		vals = append(vals, keyed{Key: x.replicaKey(s.labels), V: v})
	}
	return vals, nil
}

// partner returns the series of ss (operand o) that goes with s (operand
// first).
func partner(s series, first Source, ss []series, o Source) (series, error) {
	ignore := func(name string) bool { return first.matchLabels(name) || o.matchLabels(name) }
	same := func(a, b labelSet) bool {
		for _, p := range a {
			if n := p.GetName(); !ignore(n) && b.get(n) != a.get(n) {
				return false
			}
		}
		for _, p := range b {
			if n := p.GetName(); !ignore(n) && a.get(n) != b.get(n) {
				return false
			}
		}
		return true
	}
	found := -1
	for i, t := range ss {
		if same(s.labels, t.labels) {
			if found >= 0 {
				return series{}, errors.New("several series match one series of the first operand")
			}
			found = i
		}
	}
	if found < 0 {
		return series{}, errors.New("no series matches the labels of the first operand")
	}
	return ss[found], nil
}

// difference is the sum of the first operand of src minus the sums of the
// others, clamped at 0, as one value.
func (x *extractor) difference(src Source) ([]keyed, error) {
	var total float64
	for i, o := range src.Operands {
		vals, err := x.values(o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Family, err)
		}
		if i == 0 {
			total = sumReplicas(vals)
		} else {
			total -= sumReplicas(vals)
		}
	}
	return []keyed{{V: max(total, 0)}}, nil
}

// scalar reads one series as a number, as src.Kind says.
func scalar(src Source, s series) (float64, error) {
	m := s.metric
	var v float64
	switch src.Kind {
	case Gauge, Counter:
		switch {
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			v = m.GetUntyped().GetValue()
		default:
			return 0, errors.New("series has no value")
		}
	case HistogramCount:
		if m.GetHistogram() == nil {
			return 0, errors.New("series has no histogram")
		}
		v = histogramCount(m.GetHistogram())
	case HistogramSum:
		if m.GetHistogram() == nil {
			return 0, errors.New("series has no histogram")
		}
		v = m.GetHistogram().GetSampleSum()
	case Info:
		v = 1
		for _, l := range src.Labels {
			f, err := strconv.ParseFloat(s.labels.get(l), 64)
			if err != nil {
				return 0, fmt.Errorf("label %s=%q is not a number", l, s.labels.get(l))
			}
			v *= f
		}
	default:
		return 0, fmt.Errorf("kind %d is not a number", src.Kind)
	}
	if src.Scale != 0 {
		v *= src.Scale
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("value is %v", v)
	}
	return v, nil
}

// value reads a number concept, aggregated over replicas; nil when c is not
// exposed or unusable.
func (x *extractor) value(c Concept) *float64 {
	src, vals, ok := x.read(c)
	if !ok || len(vals) == 0 {
		return nil
	}
	switch src.Agg {
	case Sum:
		return x.finite(c, src, sumReplicas(vals))
	case Max:
		// Sum per replica, then the largest replica.
		per := map[string]float64{}
		for _, v := range vals {
			per[v.Key] += v.V
		}
		m := math.Inf(-1)
		for _, v := range per {
			m = max(m, v)
		}
		return x.finite(c, src, m)
	}
	return x.finite(c, src, sumReplicas(vals)/float64(len(vals)))
}

// total reads a latency exposed as a sum and a count, each aggregated as
// its source says; nil unless both are exposed and usable.
func (x *extractor) total(sumC, countC Concept) *sample.Total {
	sum, count := x.value(sumC), x.value(countC)
	if sum == nil || count == nil {
		return nil
	}
	return &sample.Total{Sum: *sum, Count: *count}
}

// finite returns v, or nil with an error when aggregating finite values
// overflowed.
func (x *extractor) finite(c Concept, src Source, v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		x.fail(c, src.name(), fmt.Errorf("aggregate is %v", v))
		return nil
	}
	return sample.F(v)
}

// readExposed is read for CombineKV: nil when c is not exposed, a non-nil
// (possibly empty) slice when it is.
func (x *extractor) readExposed(c Concept) (Source, []keyed) {
	src, vals, ok := x.read(c)
	if ok && vals == nil {
		vals = []keyed{}
	}
	return src, vals
}

// kv returns KV usage and capacity in tokens, combined as CombineKV says;
// an aggregate that overflowed is reported against the family it came from.
func (x *extractor) kv() (usage, capacity *float64) {
	capSrc, caps := x.readExposed(KVCapacityTokens)
	usedSrc, used := x.readExposed(KVUsedTokens)
	src, us := x.readExposed(KVUsage)
	kv := CombineKV(us, src.Agg, used, caps)
	if kv.HasCapacity {
		capacity = x.finite(KVCapacityTokens, capSrc, kv.Capacity)
	}
	if kv.HasUsage {
		if kv.UsageFrom == KVUsedTokens {
			src = usedSrc
		}
		usage = x.finite(KVUsage, src, kv.Usage)
	}
	return usage, capacity
}

// histogram reads a histogram concept, summed by bucket over replicas; nil
// when c is not exposed or unusable.
func (x *extractor) histogram(c Concept) *sample.Histogram {
	src, ok := x.find(c)
	if !ok {
		return nil
	}
	var total *sample.Histogram
	for _, s := range x.collapse(src) {
		h, err := toHistogram(s.metric)
		if err == nil {
			total, err = histogram.Add(total, h)
		}
		if err != nil {
			x.fail(c, src.Family, err)
			return nil
		}
	}
	return total
}

// toHistogram converts one classic histogram series, sorting its buckets by
// bound, and validates it.
func toHistogram(m *dto.Metric) (*sample.Histogram, error) {
	hm := m.GetHistogram()
	if hm == nil {
		return nil, errors.New("series has no histogram")
	}
	byBound := func(a, b *dto.Bucket) int {
		return cmp.Compare(a.GetUpperBound(), b.GetUpperBound())
	}
	// Read in place when in order already, as exporters write them
	// (cmp.Compare orders NaN too: a stable sort would leave them so).
	buckets := hm.GetBucket()
	if !slices.IsSortedFunc(buckets, byBound) {
		buckets = slices.SortedStableFunc(slices.Values(buckets), byBound)
	}
	h := &sample.Histogram{
		Bounds: make([]float64, len(buckets)),
		Counts: make([]float64, len(buckets)),
		Sum:    hm.GetSampleSum(),
		Count:  histogramCount(hm),
	}
	for i, b := range buckets {
		h.Bounds[i] = b.GetUpperBound()
		h.Counts[i] = float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			h.Counts[i] = b.GetCumulativeCountFloat()
		}
	}
	if err := histogram.Validate(h); err != nil {
		return nil, err
	}
	return h, nil
}

// histogramCount is the _count of h, whether integer or float.
func histogramCount(h *dto.Histogram) float64 {
	if h.SampleCountFloat != nil {
		return h.GetSampleCountFloat()
	}
	return float64(h.GetSampleCount())
}

// created is the earliest start of the token counters (Mapping.Created);
// zero when not exposed.
func (x *extractor) created() time.Time {
	earliest := math.Inf(+1)
	for _, name := range x.m.Created {
		for _, m := range x.families[name].GetMetric() {
			v, err := scalar(Source{Kind: Gauge}, series{metric: m})
			if err == nil && v > 0 {
				earliest = min(earliest, v)
			}
		}
	}
	if math.IsInf(earliest, +1) {
		return time.Time{}
	}
	sec, frac := math.Modf(earliest)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

// model is the first model label found on a concept's family, in concept
// order; Mapping.ModelLabel first, then its fallbacks; "" when none carries
// one.
func (x *extractor) model() string {
	for _, label := range append([]string{x.m.ModelLabel}, x.m.ModelLabelFallbacks...) {
		if label == "" {
			continue
		}
		for c := range numConcepts {
			for _, src := range x.m.Concepts[c] {
				for _, name := range src.Families() {
					for _, m := range x.families[name].GetMetric() {
						for _, l := range m.GetLabel() {
							if l.GetName() == label && l.GetValue() != "" {
								return l.GetValue()
							}
						}
					}
				}
			}
		}
	}
	return ""
}

// distinct counts the distinct values of label over the engine's families;
// 0 when label is "" or no series carries it.
func (x *extractor) distinct(label string) int {
	if label == "" {
		return 0
	}
	seen := map[string]bool{}
	for name, mf := range x.families {
		if !hasAnyPrefix(name, x.m.Prefixes()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	return len(seen)
}

// hasAnyPrefix reports whether name starts with one of prefixes.
func hasAnyPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
