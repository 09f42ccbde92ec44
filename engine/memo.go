package engine

import (
	"bytes"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
)

// SeriesMemo remembers what Prometheus's parser made of the lines read
// through it: the series (name and labels) of each sample line, by the
// bytes before its value, and each HELP and TYPE line, by its bytes. A
// later line the memo knows is read without the parser: a sample line by
// its value alone, when that value is one the parser reads the same way (a
// plain number, no timestamp). Everything else about a read (types, series
// given twice, rank labels, limits, warnings) is checked as without the
// memo, and what is read is the same: the memo only saves parsing the same
// bytes again.
//
// An endpoint's series rarely change between reads, only their values, and
// the replicas of one model expose the same series (the labels that tell
// them apart are added by whoever scrapes them), so one memo serves a whole
// fleet: its size follows the models, not the nodes. It is safe for
// concurrent reads: lookups take no lock, and what a read learns is added
// once the read is done. It holds at most MaxMemoLines lines; past that it
// learns no more. Expositions whose every series is its own (a GPU
// exporter's, labelled with the GPU's UUID) are better read without one.
type SeriesMemo struct {
	mu    sync.Mutex // held to add what a read learnt
	table atomic.Pointer[memoTable]
}

// MaxMemoLines bounds the lines a SeriesMemo holds: about 15 MB at most
// (880 bytes a series of four labels), room for the expositions of eight
// vLLM models or so.
const MaxMemoLines = 16384

// memoTable is what a memo knows; never modified once published (a read
// that learns publishes a copy).
type memoTable struct {
	series map[string]*memoSeries
	meta   map[string]memoMeta
	// keys numbers the distinct keys of series (memoSeries.idx), from 0
	// to next-1.
	keys map[string]int
	next int
}

// NewSeriesMemo returns an empty memo.
func NewSeriesMemo() *SeriesMemo {
	m := &SeriesMemo{}
	m.table.Store(&memoTable{series: map[string]*memoSeries{}, meta: map[string]memoMeta{}, keys: map[string]int{}})
	return m
}

// memoSeries is a series as the builder takes it: its labels, and what the
// builder derives from them for every line (a memo keeps those too).
type memoSeries struct {
	lset labels.Labels
	// key is lset.Bytes, the builder's key for a series given twice; ""
	// when not kept.
	key string
	// pairs are lset's label pairs (pairs(lset)), never modified: nil until
	// a gauge, counter or untyped line needs them. A series the memo holds
	// is not modified: pairs it lacks are made for the read.
	pairs []*dto.LabelPair
	// shared marks a series the memo holds.
	shared bool
	// derived marks a series whose fields below are set (derive): the
	// memo's are, so that the builder reads them instead of working them
	// out of lset again for every line.
	derived bool
	// name is lset's metric name.
	name string
	// ranks are lset's rank labels (rankLabels), in lset's order.
	ranks []labels.Label
	// le and quantile are what addGrouped needs of lset as a histogram's
	// or a summary's line.
	le, quantile groupPart
	// idx numbers the memo's distinct keys: series of one key (lset)
	// share it. Set when the memo takes the series (done).
	idx int
	// id is the line's bytes before its value: the memo's key for it.
	id string
	// grouped: le and quantile are set (addGrouped sets them while the
	// series is being learnt, before the memo holds it).
	grouped bool
	// next is the series learnt right after this one, in the same read:
	// most often the next line's (fromMemo tries it before the table).
	next *memoSeries
}

// groupPart is a histogram's or summary's line as addGrouped reads it,
// label being le or quantile: the key of the metric it belongs to
// (lset.HashWithoutLabels without label), and label's value as a number
// (ok: lset has label, and its value parses).
type groupPart struct {
	key   string
	bound float64
	ok    bool
}

// derive sets what the builder derives from lset for every line (but le
// and quantile, which addGrouped sets for the lines of histograms and
// summaries).
func (s *memoSeries) derive() {
	s.name = s.lset.Get(labels.MetricName)
	s.lset.Range(func(l labels.Label) {
		if rankLabels[l.Name] {
			s.ranks = append(s.ranks, l)
		}
	})
	s.derived = true
}

// groupOf is lset read as a line of a histogram (label le) or a summary
// (label quantile).
func groupOf(lset labels.Labels, label string) groupPart {
	_, key := lset.HashWithoutLabels(nil, label)
	bound, err := strconv.ParseFloat(lset.Get(label), 64)
	return groupPart{key: string(key), bound: bound, ok: lset.Has(label) && err == nil}
}

// memoMeta is a HELP line (typ false) or a TYPE line and what it declares.
type memoMeta struct {
	typ   bool
	name  string
	mtype model.MetricType
	// text is the line: the memo's key for it.
	text string
}

// memoRead is one read's view of a memo: the table as the read began, and
// what the read learnt, added when it is done (learnt).
type memoRead struct {
	m      *SeriesMemo
	t      *memoTable
	series map[string]*memoSeries
	meta   map[string]memoMeta
	// lastLearnt is the series learnt last; last the series read last
	// through the memo.
	lastLearnt, last *memoSeries
}

// read begins a read through m (nil: none).
func (m *SeriesMemo) read() *memoRead {
	if m == nil {
		return nil
	}
	return &memoRead{m: m, t: m.table.Load()}
}

// knows reports whether text is a line the memo reads (its value aside).
func (r *memoRead) knows(text []byte) bool {
	if r == nil {
		return false
	}
	if text[0] == '#' {
		_, ok := r.t.meta[string(text)]
		return ok
	}
	id, _, ok := splitValue(text)
	if !ok {
		return false
	}
	_, ok = r.t.series[string(id)]
	return ok
}

// room reports whether the memo may learn another line.
func (r *memoRead) room() bool {
	return len(r.t.series)+len(r.t.meta)+len(r.series)+len(r.meta) < MaxMemoLines
}

// learnMeta learns the HELP or TYPE line text, read as meta: unless it
// quotes (a quoted name may run past the line, and what the parser makes of
// it depends on the lines after).
func (r *memoRead) learnMeta(text []byte, meta memoMeta) {
	if r == nil || !r.room() || bytes.IndexByte(text, '"') >= 0 {
		return
	}
	if _, ok := r.t.meta[string(text)]; ok {
		return
	}
	if r.meta == nil {
		r.meta = map[string]memoMeta{}
	}
	meta.text = string(text)
	r.meta[meta.text] = meta
}

// learnSeries learns s as the series of the sample line text, which the
// parser read as series (its bytes) with value v and no timestamp: only
// when text is that series, one space and a value memoValue reads as v.
func (r *memoRead) learnSeries(text, series []byte, v float64, s *memoSeries) {
	if r == nil || !r.room() {
		return
	}
	id, val, ok := splitValue(text)
	if !ok || !bytes.Equal(id, series) {
		return
	}
	if mv, ok := memoValue(val); !ok || math.Float64bits(mv) != math.Float64bits(v) {
		return
	}
	if _, ok := r.t.series[string(id)]; ok {
		return
	}
	s.key = string(s.lset.Bytes(nil))
	s.derive()
	if r.series == nil {
		r.series = map[string]*memoSeries{}
	}
	s.id = string(id)
	r.series[s.id] = s
	if r.lastLearnt != nil {
		r.lastLearnt.next = s
	}
	r.lastLearnt = s
}

// done adds what the read learnt to the memo: a copy of its table with
// them, published at once.
func (r *memoRead) done() {
	if r == nil {
		return
	}
	if len(r.series)+len(r.meta) == 0 {
		return
	}
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.table.Load()
	t := &memoTable{series: make(map[string]*memoSeries, len(old.series)+len(r.series)), meta: make(map[string]memoMeta, len(old.meta)+len(r.meta)),
		keys: make(map[string]int, len(old.keys)+len(r.series))}
	for k, v := range old.series {
		t.series[k] = v
	}
	for k, v := range old.meta {
		t.meta[k] = v
	}
	for k, v := range old.keys {
		t.keys[k] = v
	}
	t.next = old.next
	for k, v := range r.series {
		if len(t.series)+len(t.meta) >= MaxMemoLines {
			break
		}
		idx, ok := t.keys[v.key]
		if !ok {
			idx = t.next
			t.keys[v.key] = idx
			t.next++
		}
		v.idx, v.shared = idx, true
		t.series[k] = v
	}
	for k, v := range r.meta {
		if len(t.series)+len(t.meta) >= MaxMemoLines {
			break
		}
		t.meta[k] = v
	}
	m.table.Store(t)
}

// fromMemo reads text as the memo knows it; known is false when the memo
// does not know it (or the builder has none): the parser reads it then.
func (b *builder) fromMemo(text []byte, line int) (known bool, err error) {
	r := b.memo
	if r == nil {
		return false, nil
	}
	if text[0] == '#' {
		meta, ok := r.t.meta[string(text)]
		if !ok {
			return false, nil
		}
		if meta.typ {
			b.declare(meta.name, meta.mtype, line)
		}
		return true, nil
	}
	id, val, ok := splitValue(text)
	if !ok {
		return false, nil
	}
	var s *memoSeries
	if p := r.last; p != nil && p.next != nil && p.next.shared && p.next.id == string(id) {
		// The line after the last one read, as when it was learnt: the
		// memo holds it (shared), so no lookup is needed.
		s = p.next
	} else if s, ok = r.t.series[string(id)]; !ok {
		return false, nil
	}
	v, ok := memoValue(val)
	if !ok {
		return false, nil
	}
	r.last = s
	if err := b.count(line); err != nil {
		return true, err
	}
	return true, b.addSeries(s, v, line)
}

// splitValue splits a sample line at its last space: what comes before
// (the series, when the line is a series, one space and a value) and after
// (without the newline).
func splitValue(text []byte) (id, val []byte, ok bool) {
	body, nl := bytes.CutSuffix(text, []byte("\n"))
	if !nl {
		return nil, nil, false
	}
	sp := bytes.LastIndexByte(body, ' ')
	if sp <= 0 {
		return nil, nil, false
	}
	return body[:sp], body[sp+1:], true
}

// memoValue reads a sample line's value as Prometheus's text parser does
// (textparse: a value token is bytes other than '{', blanks and newline;
// no hexadecimal float or underscores; NaN made the canonical NaN); ok is
// false for what it would not read so, or not as a value ending the line.
func memoValue(val []byte) (float64, bool) {
	if len(val) > 0 && len(val) <= 15 {
		// Digits alone (most values are counts) are an integer below
		// 2^53: exactly the float64 ParseFloat reads.
		n := uint64(0)
		for _, c := range val {
			if c < '0' || c > '9' {
				n = math.MaxUint64
				break
			}
			n = n*10 + uint64(c-'0')
		}
		if n != math.MaxUint64 {
			return float64(n), true
		}
	}
	if len(val) == 0 || bytes.ContainsAny(val, "{ \t\n\x00pP_") {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(val), 64)
	if err != nil {
		return 0, false
	}
	if math.IsNaN(v) {
		v = math.Float64frombits(value.NormalNaN)
	}
	return v, true
}
