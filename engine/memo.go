package engine

import (
	"bytes"
	"math"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
)

// SeriesMemo remembers, across the reads of one endpoint, what Prometheus's
// parser made of the lines read: the series (name and labels) of each
// sample line, by the bytes before its value, and each HELP and TYPE line,
// by its bytes. A later line the memo knows is read without the parser: a
// sample line by its value alone, when that value is one the parser reads
// the same way (a plain number, no timestamp). Everything else about the
// read (types, series given twice, rank labels, limits, warnings) is
// checked as without the memo, and what is read is the same: the memo only
// saves parsing the same bytes again. An endpoint's series rarely change
// between reads, only their values, so a fast lane reading each node
// several times a second parses each series once.
//
// A memo is for one reader at a time. It holds at most MaxMemoLines lines;
// past that it learns no more.
type SeriesMemo struct {
	series map[string]*memoSeries
	meta   map[string]memoMeta
}

// MaxMemoLines bounds the lines a SeriesMemo holds.
const MaxMemoLines = 4096

// NewSeriesMemo returns an empty memo.
func NewSeriesMemo() *SeriesMemo {
	return &SeriesMemo{series: map[string]*memoSeries{}, meta: map[string]memoMeta{}}
}

// memoSeries is a series as the builder takes it: its labels, and what the
// builder derives from them for every line (a memo keeps those too).
type memoSeries struct {
	lset labels.Labels
	// key is lset.Bytes, the builder's key for a series given twice; ""
	// when not kept.
	key string
	// pairs are lset's label pairs (pairs(lset)), shared by the metrics of
	// every read and never modified; nil until a gauge, counter or untyped
	// line needs them.
	pairs []*dto.LabelPair
}

// memoMeta is a HELP line (typ false) or a TYPE line and what it declares.
type memoMeta struct {
	typ   bool
	name  string
	mtype model.MetricType
}

func (m *SeriesMemo) full() bool { return len(m.series)+len(m.meta) >= MaxMemoLines }

// knows reports whether text is a line the memo reads (its value aside).
func (m *SeriesMemo) knows(text []byte) bool {
	if m == nil {
		return false
	}
	if text[0] == '#' {
		_, ok := m.meta[string(text)]
		return ok
	}
	id, _, ok := splitValue(text)
	if !ok {
		return false
	}
	_, ok = m.series[string(id)]
	return ok
}

// learnMeta remembers the HELP or TYPE line text, read as meta.
func (m *SeriesMemo) learnMeta(text []byte, meta memoMeta) {
	if m == nil || m.full() {
		return
	}
	m.meta[string(text)] = meta
}

// learnSeries remembers s as the series of the sample line text, which the
// parser read as series (its bytes) with value v and no timestamp: only
// when text is that series, one space and a value memoValue reads as v.
func (m *SeriesMemo) learnSeries(text, series []byte, v float64, s *memoSeries) {
	if m == nil || m.full() {
		return
	}
	id, val, ok := splitValue(text)
	if !ok || !bytes.Equal(id, series) {
		return
	}
	if mv, ok := memoValue(val); !ok || math.Float64bits(mv) != math.Float64bits(v) {
		return
	}
	s.key = string(s.lset.Bytes(nil))
	m.series[string(id)] = s
}

// fromMemo reads text as the memo knows it; known is false when the memo
// does not know it (or the builder has none): the parser reads it then.
func (b *builder) fromMemo(text []byte, line int) (known bool, err error) {
	m := b.memo
	if m == nil {
		return false, nil
	}
	if text[0] == '#' {
		meta, ok := m.meta[string(text)]
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
	s, ok := m.series[string(id)]
	if !ok {
		return false, nil
	}
	v, ok := memoValue(val)
	if !ok {
		return false, nil
	}
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
