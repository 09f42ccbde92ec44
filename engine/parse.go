package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"google.golang.org/protobuf/proto"
)

// ErrEmpty is returned by Parse for an exposition without any sample.
var ErrEmpty = errors.New("no metric samples in exposition")

// The default Limits.
const (
	// DefaultMaxSeries bounds the series of one exposition. A vLLM engine
	// core exposes about 1,000 series, an SGLang rank about 600: 50,000
	// leaves room for 8 data-parallel replicas of 8 ranks each.
	DefaultMaxSeries = 50_000
	// DefaultMaxRankValues bounds the distinct values of one rank label.
	DefaultMaxRankValues = 1024
)

const (
	// maxLine bounds one line of an exposition (label values included).
	maxLine = 1 << 20
	// chunkBytes is how much text is handed to the parser at once; the
	// exposition is never held whole.
	chunkBytes = 64 << 10
	// maxWarnings bounds Exposition.Warnings; the last one counts the rest.
	maxWarnings = 20
	// maxQuote bounds an exposition line quoted in a warning.
	maxQuote = 120
)

// Limits bound the work one exposition may cause. Zero fields take the
// defaults.
type Limits struct {
	// MaxSeries bounds the series (sample lines, as Prometheus counts them:
	// every histogram bucket is one) read from one exposition
	// (DefaultMaxSeries).
	MaxSeries int
	// MaxRankValues bounds the distinct values of each rank label — vLLM's
	// engine, SGLang's dp_rank, tp_rank, pp_rank, moe_ep_rank and pid —
	// over the families of a known engine (DefaultMaxRankValues). They
	// count data-parallel replicas and ranks; more than this many is not a
	// deployment but a label gone wrong.
	MaxRankValues int
}

func (l *Limits) defaults() {
	if l.MaxSeries <= 0 {
		l.MaxSeries = DefaultMaxSeries
	}
	if l.MaxRankValues <= 0 {
		l.MaxRankValues = DefaultMaxRankValues
	}
}

// The limits a LimitError names.
const (
	LimitSeries     = "MaxSeries"
	LimitRankValues = "MaxRankValues"
	LimitLine       = "line length"
)

// LimitError is Parse's refusal of an exposition that exceeds a bound. The
// parse stops at the line that crossed it.
type LimitError struct {
	// Limit is the Limits field that refused (LimitSeries,
	// LimitRankValues), or LimitLine for a line over 1 MiB.
	Limit string
	// Max is its value.
	Max int
	// What was counted: "series", `values of label "engine"`, "bytes".
	What string
	// Line is the 1-based line at which the parse stopped.
	Line int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("exposition refused at line %d: more than the limit of %d %s", e.Line, e.Max, e.What)
}

// Exposition is one parsed /metrics body.
type Exposition struct {
	// Families are the usable metric families, keyed by family name. A
	// family with a problem (see Warnings) is absent.
	Families map[string]*dto.MetricFamily
	// Warnings name each problem found and the family it left out, at most
	// 20 (the last then counts the others).
	Warnings []string
	// Series is the number of series (sample lines) read.
	Series int
}

// Parse reads a Prometheus text-format exposition (version 0.0.4) line by
// line with Prometheus's own parser (model/textparse), so what Parse accepts
// is what a Prometheus scraping the same body stores.
//
// The body is refused whole — an error, no Exposition — when it is cut
// mid-line (it does not end in a newline), when it has no sample
// (ErrEmpty) or no line Prometheus accepts, and when it crosses one of lim
// (a *LimitError): the parse then stops at the line that crossed it,
// without reading the rest. Otherwise every problem leaves its family out
// of Exposition.Families and adds a warning:
//
//   - a line Prometheus's parser refuses (Prometheus fails the whole scrape);
//   - an indented line: Prometheus reads the blanks as part of the metric
//     name, so the series is not the family's (Prometheus 2, and 3 under
//     legacy name validation, fail the scrape; 3 otherwise stores it under
//     that name);
//   - a series given twice;
//   - a TYPE line that contradicts an earlier one or its family's series;
//   - a histogram series without +Inf bucket, without _count, with a
//     bucket without le or with counts that fall as le grows, NaN or
//     negative, or whose _count differs from its +Inf bucket.
//
// HELP lines and timestamps are not kept. Parse does not bound the bytes it
// reads: callers reading from the network limit them.
func Parse(r io.Reader, lim Limits) (*Exposition, error) {
	return ParseMemo(r, lim, nil)
}

// ParseMemo is Parse through memo (nil: none): the lines it knows are read
// without the parser, and it learns the others (SeriesMemo). The result is
// the same.
func ParseMemo(r io.Reader, lim Limits, memo *SeriesMemo) (*Exposition, error) {
	lim.defaults()
	b := newBuilder(lim)
	b.memo = memo.read()
	defer b.memo.done()
	bufs := readBufsPool.Get().(*readBufs)
	defer bufs.put()
	br := bufs.br
	br.Reset(r)
	chunk := bufs.chunk[:0]
	starts, numbers := bufs.starts[:0], bufs.numbers[:0] // per line of chunk: offset, line number
	defer func() { bufs.chunk, bufs.starts, bufs.numbers = chunk, starts, numbers }()
	line := 0
	for {
		start := len(chunk)
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			chunk = append(chunk, frag...)
			if len(chunk)-start > maxLine {
				return nil, &LimitError{Limit: LimitLine, Max: maxLine, What: "bytes in one line", Line: line + 1}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read metrics: %w", err)
		}
		eof := err != nil
		if len(chunk) > start {
			line++
			if eof {
				return nil, fmt.Errorf("parse metrics: line %d ends without a newline: the body is cut short", line)
			}
			if blank(chunk[start:]) {
				chunk = chunk[:start]
			} else {
				starts = append(starts, start)
				numbers = append(numbers, line)
			}
		}
		if len(chunk) >= chunkBytes || eof {
			if err := b.parse(chunk, starts, numbers); err != nil {
				return nil, err
			}
			chunk, starts, numbers = chunk[:0], starts[:0], numbers[:0]
		}
		if eof {
			break
		}
	}
	return b.finish()
}

// readBufs are what ParseMemo reads an exposition through, kept for the
// next read (readBufsPool): nothing parsed points into them.
type readBufs struct {
	br              *bufio.Reader
	chunk           []byte
	starts, numbers []int
}

var readBufsPool = sync.Pool{New: func() any {
	return &readBufs{br: bufio.NewReaderSize(nil, chunkBytes), chunk: make([]byte, 0, 2*chunkBytes)}
}}

// put returns bufs to the pool, unless a long line made its chunk grow.
func (bufs *readBufs) put() {
	bufs.br.Reset(nil) // holds no reader
	if cap(bufs.chunk) > 4*chunkBytes {
		return
	}
	readBufsPool.Put(bufs)
}

// blank reports whether line holds only spaces and tabs before its newline,
// a line Prometheus's parser skips.
func blank(line []byte) bool {
	return len(bytes.Trim(line, " \t\n")) == 0
}

// builder assembles families from parser entries.
type builder struct {
	lim     Limits
	symbols *labels.SymbolTable

	families map[string]*dto.MetricFamily
	// types are the families' declared types, by family name.
	types map[string]dto.MetricType
	// grouped finds a histogram's or summary's metric by family and its
	// labels but le and quantile.
	grouped map[string]map[string]*dto.Metric
	// seen holds every series read, to find one given twice: by its key
	// (labels.Labels.Bytes), or in seenIdx by the memo's number for it
	// (given).
	seen    map[string]struct{}
	seenIdx []uint64
	// ranks holds the distinct values of each rank label.
	ranks map[string]map[string]struct{}

	// left are the families left out; they take no further series.
	left     map[string]bool
	warnings []string
	// refusedAt is the first line Prometheus's parser refuses (0: none).
	refusedAt int
	dropped   int // warnings beyond maxWarnings

	series int // series lines, refused ones included
	good   int // series lines read into a family (or left out with it)
	lset   labels.Labels
	buf    []byte
	// memo, when set, reads the lines it knows without the parser and
	// learns the others (SeriesMemo); done adds what it learnt.
	memo *memoRead
	// ver counts the changes to types, families left out (from 1);
	// last is the nameInfo of the last series read (nameOf).
	ver  int
	last nameInfo
	// buckets are where the next histogram buckets are made, slab at a
	// time (16, doubling up to 256).
	buckets []bucket
	slab    int
}

func newBuilder(lim Limits) *builder {
	return &builder{
		lim:      lim,
		symbols:  labels.NewSymbolTable(),
		families: map[string]*dto.MetricFamily{},
		types:    map[string]dto.MetricType{},
		grouped:  map[string]map[string]*dto.Metric{},
		seen:     map[string]struct{}{},
		ranks:    map[string]map[string]struct{}{},
		left:     map[string]bool{},
		ver:      1,
	}
}

// parse reads the lines of chunk (starts and numbers give each line's
// offset and line number; blank lines are already out, so each parser entry
// is one line). A line the parser refuses is skipped with a warning and the
// parse goes on with a fresh parser at the next line.
func (b *builder) parse(chunk []byte, starts, numbers []int) error {
	lineAt := func(i int) []byte {
		end := len(chunk)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		return chunk[starts[i]:end]
	}
	i := 0
	for i < len(starts) {
		if known, err := b.fromMemo(lineAt(i), numbers[i]); known || err != nil {
			if err != nil {
				return err
			}
			i++
			continue
		}
		first, spanned := i, false
		p := textparse.NewPromParser(chunk[starts[i]:], b.symbols, false)
		for i < len(starts) {
			if i > first && !spanned && b.memo.knows(lineAt(i)) {
				break // the memo reads it, without this parser
			}
			e, err := p.Next()
			if errors.Is(err, io.EOF) {
				// A NUL byte ends the parser's input early.
				err = errors.New("unexpected end of input (a NUL byte?)")
			}
			if err != nil {
				end := len(chunk)
				if i+1 < len(starts) {
					end = starts[i+1]
				}
				if err := b.refused(numbers[i], chunk[starts[i]:end], err); err != nil {
					return err
				}
				i++
				break
			}
			// An entry that ran past its line (a quoted name or value with
			// a newline) leaves the parser out of step with the lines: this
			// parser then reads on as without a memo.
			spanned = spanned || spans(p, e)
			if err := b.entry(p, e, numbers[i], lineAt(i)); err != nil {
				return err
			}
			i++
		}
	}
	return nil
}

// spans reports whether the parser's entry e ran past its line: a quoted
// metric name or label value with a newline in it.
func spans(p textparse.Parser, e textparse.Entry) bool {
	var b []byte
	switch e {
	case textparse.EntryHelp:
		b, _ = p.Help()
	case textparse.EntryType:
		b, _ = p.Type()
	case textparse.EntrySeries:
		b, _, _ = p.Series()
	}
	return bytes.IndexByte(b, '\n') >= 0
}

// entry takes one parsed line, text.
func (b *builder) entry(p textparse.Parser, e textparse.Entry, line int, text []byte) error {
	switch e {
	case textparse.EntryHelp:
		b.memo.learnMeta(text, memoMeta{})
	case textparse.EntryType:
		name, t := p.Type()
		family := string(name)
		b.declare(family, t, line)
		b.memo.learnMeta(text, memoMeta{typ: true, name: family, mtype: t})
	case textparse.EntrySeries:
		if err := b.count(line); err != nil {
			return err
		}
		series, ts, v := p.Series()
		p.Labels(&b.lset)
		if b.memo != nil && ts == nil {
			s := &memoSeries{lset: b.lset}
			b.memo.learnSeries(text, series, v, s)
			return b.addSeries(s, v, line)
		}
		s := memoSeries{lset: b.lset}
		return b.addSeries(&s, v, line)
	}
	return nil
}

// count counts one series line against MaxSeries.
func (b *builder) count(line int) error {
	b.series++
	if b.series > b.lim.MaxSeries {
		return &LimitError{Limit: LimitSeries, Max: b.lim.MaxSeries, What: "series", Line: line}
	}
	return nil
}

// refused records a line Prometheus's parser refuses.
func (b *builder) refused(line int, text []byte, err error) error {
	// The parser's message quotes the line again: keep what it says.
	msg, _, _ := strings.Cut(err.Error(), " while parsing: ")
	if b.refusedAt == 0 {
		b.refusedAt = line
	}
	b.leaveOut(b.familyOfLine(text), fmt.Sprintf("line %d: Prometheus's parser refuses it (%s) and fails the scrape: %s", line, shorten(msg), quoteLine(text)))
	if bytes.TrimLeft(text, " \t")[0] == '#' {
		return nil
	}
	// A sample line, as far as can be told: it counts as a series.
	return b.count(line)
}

// declare takes a TYPE line.
func (b *builder) declare(name string, t model.MetricType, line int) {
	b.ver++
	typ := dtoType(t)
	old, declared := b.types[name]
	f, hasSeries := b.families[name]
	switch {
	case declared && old != typ:
		b.leaveOut(name, fmt.Sprintf("line %d: TYPE %s %s contradicts an earlier TYPE %s", line, name, t, strings.ToLower(old.String())))
	case !declared && hasSeries && f.GetType() != typ:
		b.leaveOut(name, fmt.Sprintf("line %d: TYPE %s %s comes after its series", line, name, t))
	}
	b.types[name] = typ
}

// addSeries takes one series: s's labels, and what the memo keeps of them.
func (b *builder) addSeries(s *memoSeries, v float64, line int) error {
	lset := s.lset
	var name string
	if s.derived {
		name = s.name
	} else {
		name = lset.Get(labels.MetricName)
	}
	n := b.nameOf(name)
	if n.indented {
		// Prometheus 2 (and 3 under legacy name validation) then fails the
		// scrape on an invalid name; 3 stores the series under that name.
		b.leaveOut(b.familyOf(strings.TrimLeft(name, " \t")), fmt.Sprintf("line %d is indented: Prometheus reads the leading blanks as part of the metric name and fails the scrape", line))
		return nil
	}
	b.good++
	family := n.family
	if err := b.countRanks(n.engine, s, line); err != nil {
		return err
	}
	if b.given(s) {
		b.leaveOut(family, fmt.Sprintf("line %d: series %s is given twice", line, seriesString(lset)))
		return nil
	}
	if n.left {
		return nil
	}
	typ := n.typ
	f := n.f
	if f == nil {
		f = &dto.MetricFamily{Name: proto.String(family), Type: typ.Enum()}
		b.families[family] = f
		n.f = f
	}
	suffix := strings.TrimPrefix(name, family)
	if typ == dto.MetricType_HISTOGRAM || typ == dto.MetricType_SUMMARY {
		b.addGrouped(n, f, suffix, s, v, line)
		return nil
	}
	ps := s.pairs
	if ps == nil {
		ps = pairs(lset)
		if !s.shared {
			s.pairs = ps
		}
	}
	f.Metric = append(f.Metric, newScalar(typ, ps, v))
	return nil
}

// nameInfo is what addSeries works out from a metric name and the
// builder's state (types declared, families made and left out); it holds
// while ver is the builder's (declare and leaveOut move it on).
type nameInfo struct {
	name string
	ver  int
	// indented: name begins with blanks; the rest is then not set.
	indented bool
	family   string
	typ      dto.MetricType
	f        *dto.MetricFamily // nil until made
	g        map[string]*dto.Metric
	left     bool
	engine   bool // family has an engine's prefix (countRanks)
}

// nameOf is name's nameInfo. The builder keeps the last one: an
// exposition's lines of one name come together.
func (b *builder) nameOf(name string) *nameInfo {
	n := &b.last
	if n.ver == b.ver && n.name == name && n.ver > 0 {
		return n
	}
	*n = nameInfo{name: name, ver: b.ver}
	if strings.TrimLeft(name, " \t") != name {
		n.indented = true
		return n
	}
	n.family = b.familyOf(name)
	n.typ = b.types[n.family]
	n.f = b.families[n.family]
	n.left = b.left[n.family]
	n.engine = hasAnyPrefix(n.family, enginePrefixes)
	return n
}

// given reports whether s's series was read before in this exposition,
// and notes that it now is. A series the memo holds is noted by its key's
// number (memoSeries.idx), any other by its key, or by its number when the
// memo has that key: so a series is found given twice however each of its
// lines was read.
func (b *builder) given(s *memoSeries) bool {
	if s.shared {
		return b.givenIdx(s.idx)
	}
	key := s.key
	if key == "" {
		b.buf = s.lset.Bytes(b.buf)
		if b.memo != nil {
			if idx, ok := b.memo.t.keys[string(b.buf)]; ok {
				return b.givenIdx(idx)
			}
		}
		if _, dup := b.seen[string(b.buf)]; dup {
			return true
		}
		b.seen[string(b.buf)] = struct{}{}
		return false
	}
	if b.memo != nil {
		if idx, ok := b.memo.t.keys[key]; ok {
			return b.givenIdx(idx)
		}
	}
	if _, dup := b.seen[key]; dup {
		return true
	}
	b.seen[key] = struct{}{}
	return false
}

// givenIdx is given for the memo's key number idx.
func (b *builder) givenIdx(idx int) bool {
	w, bit := idx/64, uint64(1)<<(idx%64)
	if w >= len(b.seenIdx) {
		b.seenIdx = slices.Grow(b.seenIdx, w+1-len(b.seenIdx))[:w+1]
	}
	if b.seenIdx[w]&bit != 0 {
		return true
	}
	b.seenIdx[w] |= bit
	return false
}

// The series of a gauge, counter or untyped family with what its metric
// points to, so that one allocation makes each: the builder makes one per
// series line, and a fast lane reads thousands of them a second.
type (
	gaugeSeries struct {
		m dto.Metric
		g dto.Gauge
		v float64
	}
	counterSeries struct {
		m dto.Metric
		c dto.Counter
		v float64
	}
	untypedSeries struct {
		m dto.Metric
		u dto.Untyped
		v float64
	}
)

// newScalar is the metric of a series of type typ (gauge, counter or else
// untyped) with labels ls and value v.
func newScalar(typ dto.MetricType, ls []*dto.LabelPair, v float64) *dto.Metric {
	switch typ {
	case dto.MetricType_GAUGE:
		s := &gaugeSeries{v: v}
		s.m.Label, s.m.Gauge, s.g.Value = ls, &s.g, &s.v
		return &s.m
	case dto.MetricType_COUNTER:
		s := &counterSeries{v: v}
		s.m.Label, s.m.Counter, s.c.Value = ls, &s.c, &s.v
		return &s.m
	}
	s := &untypedSeries{v: v}
	s.m.Label, s.m.Untyped, s.u.Value = ls, &s.u, &s.v
	return &s.m
}

// group returns the metric of family f that series lset belongs to, adding
// it when new; except names labels that tell the metric's lines apart.
// key, when not "", is lset.HashWithoutLabels's bytes without except
// (memoSeries.le, quantile).
func (b *builder) group(n *nameInfo, f *dto.MetricFamily, lset labels.Labels, key string, except ...string) *dto.Metric {
	g := n.g
	if g == nil {
		g = b.grouped[f.GetName()]
		if g == nil {
			g = map[string]*dto.Metric{}
			b.grouped[f.GetName()] = g
		}
		n.g = g
	}
	var m *dto.Metric
	if key != "" {
		m = g[key]
	} else {
		_, b.buf = lset.HashWithoutLabels(b.buf, except...)
		m = g[string(b.buf)]
	}
	if m == nil {
		if key == "" {
			key = string(b.buf)
		}
		m = &dto.Metric{Label: pairs(lset, except...)}
		g[key] = m
		f.Metric = append(f.Metric, m)
	}
	return m
}

// addGrouped adds a line of a histogram (a bucket, _sum or _count) or a
// summary (a quantile, _sum or _count) to the metric it belongs to.
func (b *builder) addGrouped(n *nameInfo, f *dto.MetricFamily, suffix string, s *memoSeries, v float64, line int) {
	lset := s.lset
	hist := f.GetType() == dto.MetricType_HISTOGRAM
	// part is the suffix of the lines label tells apart: a bucket or a
	// quantile.
	kind, part, what, label := "summary", "", "quantile", model.QuantileLabel
	if hist {
		kind, part, what, label = "histogram", "_bucket", "bucket", model.BucketLabel
	}
	if suffix != part && suffix != "_sum" && suffix != "_count" {
		b.leaveOut(f.GetName(), fmt.Sprintf("line %d: series %s is not a %s, _sum or _count of the %s", line, seriesString(lset), what, kind))
		return
	}
	if !s.grouped && s.derived && !s.shared {
		// A series the memo is learning: what later reads need.
		s.le, s.quantile, s.grouped = groupOf(lset, model.BucketLabel), groupOf(lset, model.QuantileLabel), true
	}
	var g groupPart
	switch {
	case s.grouped && hist:
		g = s.le
	case s.grouped:
		g = s.quantile
	case suffix == part:
		g = groupOf(lset, label)
		g.key = "" // group works it out
	}
	if suffix == part && !g.ok {
		b.leaveOut(f.GetName(), fmt.Sprintf("line %d: %s %s has no numeric %s", line, what, seriesString(lset), label))
		return
	}
	bound := g.bound
	m := b.group(n, f, lset, g.key, label)
	if hist {
		if m.Histogram == nil {
			m.Histogram = &dto.Histogram{}
			// As many buckets as the family's metric before, most often.
			if ms := f.GetMetric(); len(ms) > 1 {
				m.Histogram.Bucket = make([]*dto.Bucket, 0, len(ms[len(ms)-2].GetHistogram().GetBucket()))
			}
		}
		h := m.Histogram
		switch suffix {
		case part:
			if len(b.buckets) == 0 {
				b.slab = min(256, max(16, 2*b.slab))
				b.buckets = make([]bucket, b.slab)
			}
			bk := &b.buckets[0]
			b.buckets = b.buckets[1:]
			bk.bound, bk.count = bound, v
			bk.b.UpperBound, bk.b.CumulativeCountFloat = &bk.bound, &bk.count
			h.Bucket = append(h.Bucket, &bk.b)
		case "_sum":
			h.SampleSum = proto.Float64(v)
		case "_count":
			h.SampleCountFloat = proto.Float64(v)
		}
		return
	}
	if m.Summary == nil {
		m.Summary = &dto.Summary{}
	}
	sm := m.Summary
	switch suffix {
	case part:
		sm.Quantile = append(sm.Quantile, &dto.Quantile{Quantile: proto.Float64(bound), Value: proto.Float64(v)})
	case "_sum":
		sm.SampleSum = proto.Float64(v)
	case "_count":
		if v >= 0 && v <= math.MaxUint64 {
			sm.SampleCount = proto.Uint64(uint64(v))
		}
	}
}

// bucket is a histogram's bucket with its two values: one allocation a
// bucket line.
type bucket struct {
	b            dto.Bucket
	bound, count float64
}

// familyOf is the family a series named name belongs to: the name itself
// when declared or not a histogram's or summary's line, else the declared
// histogram or summary it is a _bucket, _sum or _count of, or the family
// left out that it would be one of (its TYPE line refused).
func (b *builder) familyOf(name string) string {
	if _, ok := b.types[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if b.left[base] {
			return base
		}
		switch b.types[base] {
		case dto.MetricType_HISTOGRAM:
			return base
		case dto.MetricType_SUMMARY:
			if suffix != "_bucket" {
				return base
			}
		}
	}
	return name
}

// familyOfLine guesses the family of a line the parser refused: the name
// after # TYPE or # HELP, else the metric name it starts with; "" when
// there is none.
func (b *builder) familyOfLine(text []byte) string {
	s := strings.TrimLeft(string(text), " \t")
	if strings.HasPrefix(s, "#") {
		f := strings.Fields(s)
		if len(f) >= 3 && (f[1] == "TYPE" || f[1] == "HELP") {
			return f[2]
		}
		return ""
	}
	end := strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	if end < 0 {
		end = len(s)
	}
	if end == 0 {
		return ""
	}
	return b.familyOf(s[:end])
}

// rankLabels are the labels whose distinct values MaxRankValues bounds, and
// enginePrefixes the family-name prefixes of the engines in the table.
var rankLabels, enginePrefixes = func() (map[string]bool, []string) {
	ls := map[string]bool{}
	var ps []string
	for i := range table {
		m := &table[i]
		for _, l := range append([]string{m.DPLabel, m.TPLabel, m.PPLabel, m.EPLabel}, m.RankLabels...) {
			if l != "" {
				ls[l] = true
			}
		}
		ps = append(ps, m.Prefixes()...)
	}
	return ls, ps
}()

// countRanks adds the rank label values of a series of a family with an
// engine's prefix (engine; others have none counted) and refuses
// the exposition when one label has more than MaxRankValues of them.
func (b *builder) countRanks(engine bool, s *memoSeries, line int) error {
	if !engine {
		return nil
	}
	if s.derived {
		for _, l := range s.ranks {
			if err := b.countRank(l, line); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	s.lset.Range(func(l labels.Label) {
		if err != nil || !rankLabels[l.Name] {
			return
		}
		err = b.countRank(l, line)
	})
	return err
}

// countRank adds the value of rank label l.
func (b *builder) countRank(l labels.Label, line int) error {
	vs := b.ranks[l.Name]
	if vs == nil {
		vs = map[string]struct{}{}
		b.ranks[l.Name] = vs
	}
	if _, ok := vs[l.Value]; ok {
		return nil
	}
	vs[l.Value] = struct{}{}
	if len(vs) > b.lim.MaxRankValues {
		return &LimitError{Limit: LimitRankValues, Max: b.lim.MaxRankValues, What: fmt.Sprintf("values of label %q", l.Name), Line: line}
	}
	return nil
}

// leaveOut leaves family out (none when "") and records why.
func (b *builder) leaveOut(family, why string) {
	b.ver++
	if family != "" {
		if b.left[family] {
			return // one warning per family
		}
		b.left[family] = true
		delete(b.families, family)
		delete(b.grouped, family)
		why = "family " + family + " left out: " + why
	}
	b.warn(why)
}

func (b *builder) warn(w string) {
	if len(b.warnings) < maxWarnings-1 {
		b.warnings = append(b.warnings, w)
		return
	}
	b.dropped++
}

// finish validates the histograms and returns the exposition.
func (b *builder) finish() (*Exposition, error) {
	if b.good == 0 {
		// Not an exposition at all, as far as can be told: the error names
		// no content, since what answered may be any page (warnings, which
		// quote lines, are only kept for expositions with series).
		if b.refusedAt > 0 {
			return nil, fmt.Errorf("parse metrics: no series Prometheus would read: not in the Prometheus text format (the first line refused is line %d; %d problems)", b.refusedAt, len(b.warnings)+b.dropped)
		}
		if len(b.warnings) > 0 {
			return nil, fmt.Errorf("parse metrics: no series Prometheus would read: %s", b.warnings[0])
		}
		return nil, ErrEmpty
	}
	b.checkHistograms()
	return &Exposition{Families: b.families, Warnings: b.closeWarnings(), Series: b.series}, nil
}

// checkHistograms leaves out every histogram family with an invalid
// series, in family-name order.
func (b *builder) checkHistograms() {
	names := make([]string, 0, len(b.families))
	for name := range b.families {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f := b.families[name]
		if f.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range f.GetMetric() {
			if err := checkHistogram(m.GetHistogram()); err != nil {
				b.leaveOut(name, fmt.Sprintf("histogram series %s: %v", labelString(m), err))
				break
			}
		}
	}
}

// closeWarnings returns the warnings, the last counting those dropped.
func (b *builder) closeWarnings() []string {
	if b.dropped > 0 {
		b.warnings = append(b.warnings, fmt.Sprintf("and %d more exposition problems", b.dropped))
	}
	return b.warnings
}

// checkHistogram checks one classic histogram series as read by Parse
// (buckets in exposition order, float counts).
func checkHistogram(h *dto.Histogram) error {
	byBound := func(a, b *dto.Bucket) int {
		return compareFloat(a.GetUpperBound(), b.GetUpperBound())
	}
	// Exporters write buckets in order: then they are read as they are
	// (not modified), as the stable sort would leave them.
	bs := h.GetBucket()
	if !inOrder(bs) {
		bs = slices.SortedStableFunc(slices.Values(bs), byBound)
	}
	prev := 0.0
	for _, bk := range bs {
		c := bk.GetCumulativeCountFloat()
		switch {
		case math.IsNaN(c) || c < 0:
			return fmt.Errorf("bucket le=%s has count %v", formatLe(bk.GetUpperBound()), c)
		case c < prev:
			return fmt.Errorf("bucket le=%s counts %v, fewer than the bucket below it (%v): cumulative counts must not fall", formatLe(bk.GetUpperBound()), c, prev)
		}
		prev = c
	}
	switch {
	case len(bs) == 0 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), +1):
		return errors.New("no +Inf bucket")
	case h.SampleCountFloat == nil:
		return errors.New("no _count")
	case h.GetSampleCountFloat() != prev:
		return fmt.Errorf("_count %v differs from the +Inf bucket's %v", h.GetSampleCountFloat(), prev)
	}
	return nil
}

// inOrder reports whether bs's bounds never fall and none is NaN: a stable
// sort by bound leaves them as they are.
func inOrder(bs []*dto.Bucket) bool {
	for i, bk := range bs {
		u := bk.GetUpperBound()
		if math.IsNaN(u) || i > 0 && u < bs[i-1].GetUpperBound() {
			return false
		}
	}
	return true
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func formatLe(le float64) string {
	return strconv.FormatFloat(le, 'g', -1, 64)
}

// labelString renders m's labels as {a="b",…}.
func labelString(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return "{}"
	}
	parts := make([]string, len(m.GetLabel()))
	for i, l := range m.GetLabel() {
		parts[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	return shorten("{" + strings.Join(parts, ",") + "}")
}

// seriesString renders a series as name{a="b",…}, shortened.
func seriesString(lset labels.Labels) string {
	var sb strings.Builder
	sb.WriteString(lset.Get(labels.MetricName))
	sep := "{"
	lset.Range(func(l labels.Label) {
		if l.Name == labels.MetricName {
			return
		}
		fmt.Fprintf(&sb, "%s%s=%q", sep, l.Name, l.Value)
		sep = ","
	})
	if sep == "," {
		sb.WriteString("}")
	}
	return shorten(sb.String())
}

// pairs converts lset, without the metric name and except, to label pairs:
// in three allocations whatever the number of labels (the pairs, the
// strings they point to, the slice of pointers), not three a label.
func pairs(lset labels.Labels, except ...string) []*dto.LabelPair {
	n := lset.Len()
	ps := make([]dto.LabelPair, n)
	strs := make([]string, 2*n)
	out := make([]*dto.LabelPair, 0, n)
	lset.Range(func(l labels.Label) {
		if l.Name == labels.MetricName || slices.Contains(except, l.Name) {
			return
		}
		i := len(out)
		strs[2*i], strs[2*i+1] = l.Name, l.Value
		ps[i].Name, ps[i].Value = &strs[2*i], &strs[2*i+1]
		out = append(out, &ps[i])
	})
	return out
}

func dtoType(t model.MetricType) dto.MetricType {
	switch t {
	case model.MetricTypeCounter:
		return dto.MetricType_COUNTER
	case model.MetricTypeGauge:
		return dto.MetricType_GAUGE
	case model.MetricTypeHistogram:
		return dto.MetricType_HISTOGRAM
	case model.MetricTypeSummary:
		return dto.MetricType_SUMMARY
	}
	return dto.MetricType_UNTYPED
}

// quoteLine quotes an exposition line, without its newline, shortened.
func quoteLine(text []byte) string {
	return strconv.Quote(shorten(strings.TrimSuffix(string(text), "\n")))
}

// shorten cuts s to maxQuote bytes (at a rune boundary), marking the cut.
func shorten(s string) string {
	if len(s) <= maxQuote {
		return s
	}
	cut := maxQuote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
