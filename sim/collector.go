package sim

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metricSet holds a node's metrics as plain values. The simulation writes
// them while holding the node's lock and a scrape turns them into constant
// metrics under the same lock, so an exposition is a consistent snapshot of
// one simulated instant and the hot path (one histogram increment per
// generated token) needs no atomics.
type metricSet struct {
	mu       *sync.Mutex
	families []*family
	// rename, when set, rewrites the names of families added later.
	rename func(name string, counter bool) string
	// lazy hides the counter and histogram series of families added later
	// until their first use (Quirks.LazySeries).
	lazy bool
}

var _ prometheus.Collector = (*metricSet)(nil)

// family is one metric name with its series.
type family struct {
	desc    *prometheus.Desc
	typ     prometheus.ValueType // for counters and gauges
	buckets []float64            // for histograms: upper bounds without +Inf
	series  []*series
	lazy    bool // series are hidden until first used
	omitted bool // series are never shown
}

// series is one labelled time series: a counter or gauge value, or a
// histogram's per-bucket counts (the last one for +Inf), sum and count.
type series struct {
	labels []string
	value  float64
	upper  []float64
	counts []uint64
	sum    float64
	count  uint64
	// hidden keeps the series out of the exposition: until its first use
	// (Quirks.LazySeries) or, once omitted, for good.
	hidden, omitted bool
}

func (m *metricSet) add(name, help string, typ prometheus.ValueType, buckets []float64, labels []string) *family {
	if m.rename != nil {
		name = m.rename(name, typ == prometheus.CounterValue)
	}
	f := &family{desc: prometheus.NewDesc(name, help, labels, nil), typ: typ, buckets: buckets,
		lazy: m.lazy && typ != prometheus.GaugeValue}
	m.families = append(m.families, f)
	return f
}

func (m *metricSet) counter(name, help string, labels ...string) *family {
	return m.add(name, help, prometheus.CounterValue, nil, labels)
}

func (m *metricSet) gauge(name, help string, labels ...string) *family {
	return m.add(name, help, prometheus.GaugeValue, nil, labels)
}

func (m *metricSet) histogram(name, help string, buckets []float64, labels ...string) *family {
	return m.add(name, help, prometheus.UntypedValue, buckets, labels)
}

// with creates the series with the given label values.
func (f *family) with(values ...string) *series {
	s := &series{labels: values, hidden: f.lazy || f.omitted, omitted: f.omitted}
	if f.buckets != nil {
		s.upper = f.buckets
		s.counts = make([]uint64, len(f.buckets)+1)
	}
	f.series = append(f.series, s)
	return s
}

func (s *series) set(v float64) { s.value, s.hidden = v, s.omitted }
func (s *series) inc(v float64) { s.value, s.hidden = s.value+v, s.omitted }

// omit keeps the series out of the exposition for good; the simulation
// still counts in it (Quirks.NoFailureCounters).
func (s *series) omit() { s.hidden, s.omitted = true, true }

// omit omits every series of the family, those created later included.
func (f *family) omit() {
	f.omitted = true
	for _, s := range f.series {
		s.omit()
	}
}

// observe adds v to the histogram; buckets are inclusive upper bounds.
func (s *series) observe(v float64) {
	s.hidden = s.omitted
	s.counts[sort.SearchFloat64s(s.upper, v)]++
	s.sum += v
	s.count++
}

// Describe implements prometheus.Collector.
func (m *metricSet) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range m.families {
		ch <- f.desc
	}
}

// Collect implements prometheus.Collector.
func (m *metricSet) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.families {
		for _, s := range f.series {
			if s.hidden {
				continue
			}
			if f.buckets == nil {
				ch <- prometheus.MustNewConstMetric(f.desc, f.typ, s.value, s.labels...)
				continue
			}
			cum := make(map[float64]uint64, len(s.upper))
			var n uint64
			for i, b := range s.upper {
				n += s.counts[i]
				cum[b] = n
			}
			ch <- prometheus.MustNewConstHistogram(f.desc, s.count, s.sum, cum, s.labels...)
		}
	}
}
