package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// routingConcepts are the concepts a router needs of a node, the ones the
// saturation rules and the load score read (diagnose/saturation.go:
// queueSaturated, kvSaturated and pressure read queue, running and KV
// pressure, which is Sample.KVUsage, see metrics/compute.go), and those
// the table derives KV usage from: KVCapacityTokens weighs the replicas'
// usage (CapacityWeighted) and KVUsedTokens over it is SGLang's usage
// (CombineKV). The table has no readiness or saturation signal of an
// engine's own beyond these.
var routingConcepts = []Concept{Queue, Running, KVUsage, KVCapacityTokens, KVUsedTokens}

// Routing is what a router needs of one node: the values Extract puts in
// the same fields of a Sample, read from the routing families alone by
// ReadRouting. A nil value is a concept the engine does not expose or
// that could not be read: UNKNOWN, never 0.
type Routing struct {
	// At is when the read completed, as given to ReadRouting.
	At     time.Time
	Engine llmdiagv1.Engine
	// Queue, Running, KVUsage and KVCapacityTokens are Sample's fields of
	// the same names.
	Queue, Running, KVUsage, KVCapacityTokens *float64
	// Errors are Extract's errors about these concepts (a family present
	// but unusable), worded alike.
	Errors []string
	// Warnings are Parse's warnings about the routing families (a family
	// left out); problems of the families skipped are not seen.
	Warnings []string
	// Lines is how many lines were read, Series how many of them were
	// sample lines (counted against Limits.MaxSeries).
	Lines, Series int
	// Stopped reports that the read stopped before the end of the body:
	// every routing family had been read and another family had begun.
	Stopped bool
}

// routingBuffer is ReadRouting's read buffer: lines longer than it (up to
// maxLine) are assembled apart.
const routingBuffer = 16 << 10

// readers holds ReadRouting's read buffers between reads: a fast lane
// reads every node several times a second.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, routingBuffer) }}

// lineSuffixes are the suffixes of a histogram's or summary's lines, which
// Parse files under the family they end (builder.familyOf).
var lineSuffixes = [...][]byte{[]byte("_bucket"), []byte("_sum"), []byte("_count")}

// routingPlan is where one engine's routing concepts are read.
type routingPlan struct {
	m *Mapping
	// families are the names of the routing families; index maps each,
	// and the name a histogram's line of it would be filed under when it
	// ends in a line suffix, to its position in families.
	families []string
	index    map[string]int
	// lengths holds the length of every name a line may have to be read:
	// a key of index, with or without a line suffix. Other lines are
	// skipped without a map lookup.
	lengths [256]bool
}

// routingPlans holds, per engine of the table, where its routing concepts
// are read; it is derived from table and never modified.
var routingPlans = func() map[llmdiagv1.Engine]*routingPlan {
	out := map[llmdiagv1.Engine]*routingPlan{}
	for i := range table {
		m := &table[i]
		p := &routingPlan{m: m, index: map[string]int{}}
		add := func(key string, fam int) {
			if _, ok := p.index[key]; ok {
				return
			}
			p.index[key] = fam
			for _, suffix := range append([][]byte{nil}, lineSuffixes[:]...) {
				if n := len(key) + len(suffix); n < len(p.lengths) {
					p.lengths[n] = true
				}
			}
		}
		for _, c := range routingConcepts {
			for _, src := range m.sources(c) {
				for _, name := range src.Families() {
					if _, ok := p.index[name]; ok {
						continue
					}
					fam := len(p.families)
					p.families = append(p.families, name)
					add(name, fam)
					for _, suffix := range lineSuffixes {
						if base, ok := bytes.CutSuffix([]byte(name), suffix); ok {
							add(string(base), fam)
						}
					}
				}
			}
		}
		out[m.Engine] = p
	}
	return out
}()

// lookup returns the routing family a line named key is read for: key is
// a routing family's name, or that name with a line suffix.
func (p *routingPlan) lookup(key []byte) (int, bool) {
	if len(key) >= len(p.lengths) || !p.lengths[len(key)] {
		return 0, false
	}
	if fam, ok := p.index[string(key)]; ok {
		return fam, true
	}
	for _, suffix := range lineSuffixes {
		if base, ok := bytes.CutSuffix(key, suffix); ok {
			if fam, ok := p.index[string(base)]; ok {
				return fam, true
			}
		}
	}
	return 0, false
}

// ReadRouting reads, from a Prometheus text-format exposition of engine e,
// the values a router needs (Routing): the same values Parse then Extract
// give, computed by the same code (Parse's builder for the lines read,
// Extract's readers for the values), from the routing families alone.
//
// It takes the reader Parse would: the body as the scraper hands it to
// Parse (net/http's transport has already undone a gzip encoding; the
// caller bounds the bytes, see source/scrape). Lines are told apart by
// their first bytes (# HELP and # TYPE, the metric name): a line of
// another family is counted, if a sample, and skipped without being
// parsed. The read stops once every routing concept is settled — its
// family of first preference that has a series has been read, sample
// lines included, and a line of another family has begun after it — since
// the text format gives the lines of a family as one group. An exposition
// that splits a family's samples (which Prometheus's parser, and Parse,
// accept) may then read otherwise than Parse: only the groups before the
// stop are read. The caller closes r; a body not read to its end is not
// drained (see Routing.Stopped).
//
// lim bounds what is read as Parse's Limits do, with the same errors:
// every sample line read counts against MaxSeries, a line over 1 MiB is
// refused; MaxRankValues counts the rank labels of the routing families
// only, the others not being parsed. A body cut mid-line before the read
// stops is refused as Parse refuses it, and one without any sample line
// is ErrEmpty. A body Prometheus would refuse elsewhere (an HTML page, a
// refused line of another family) is not: its routing values are absent
// or read as Parse reads them. Lines after the stop are not read at all:
// a limit they would cross refuses nothing.
//
// e must be an engine of the table: the engine is not detected (Detect
// needs every family), so the caller takes it from a full read.
//
// memo, when not nil, is a SeriesMemo (one may serve a whole fleet): the
// routing lines it knows from earlier reads are read by their values
// alone, and it learns the others. The result is the same with or without
// it.
func ReadRouting(r io.Reader, e llmdiagv1.Engine, lim Limits, at time.Time, memo *SeriesMemo) (*Routing, error) {
	p, ok := routingPlans[e]
	if !ok {
		return nil, fmt.Errorf("read routing: no metric mapping for engine %s", e)
	}
	lim.defaults()
	rd := routingReaders.Get().(*routingReader)
	defer rd.release()
	rd.plan, rd.b, rd.cur = p, newBuilder(lim), -1
	rd.b.memo = memo.read()
	defer rd.b.memo.done()
	rd.status = append(rd.status[:0], make([]groupStatus, len(p.families))...)
	rd.sampled = append(rd.sampled[:0], make([]bool, len(p.families))...)
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	err := rd.read(br)
	br.Reset(nil) // drop r
	readers.Put(br)
	if err != nil {
		return nil, err
	}
	if !rd.stopped && rd.b.series == 0 {
		return nil, ErrEmpty
	}
	rd.b.checkHistograms()
	x := &extractor{m: p.m, families: rd.b.families}
	out := &Routing{At: at, Engine: e, Lines: rd.line, Series: rd.b.series, Stopped: rd.stopped}
	out.Queue, out.Running, out.KVUsage, out.KVCapacityTokens = x.routing()
	out.Errors = x.errs
	out.Warnings = rd.b.closeWarnings()
	return out, nil
}

// groupStatus is where the read is in one routing family's group of lines.
type groupStatus uint8

const (
	groupUnseen groupStatus = iota
	groupOpen               // its lines are being read
	groupEnded              // a line of another family followed them
)

// routingReader is one ReadRouting.
type routingReader struct {
	plan *routingPlan
	b    *builder
	// status is where each routing family's group is; cur is the routing
	// family whose group is open (-1: none). sampled marks the families a
	// sample line of was read: a group of HELP and TYPE lines alone may
	// have its samples elsewhere (the format forbids it, Prometheus's
	// parser does not), so it settles nothing.
	status  []groupStatus
	sampled []bool
	cur     int
	// pending holds the lines of the open group not yet parsed; starts and
	// numbers give each one's offset and line number.
	pending         []byte
	starts, numbers []int
	// long assembles a line longer than the read buffer.
	long    []byte
	line    int
	stopped bool
}

// routingReaders holds routingReaders between reads, for their buffers:
// what the builder keeps of the lines it parses is copied (textparse copies
// a line before its labels refer to it), so the buffers may be reused.
var routingReaders = sync.Pool{New: func() any { return new(routingReader) }}

// maxKeptPending bounds the pending buffer a routingReader keeps for the
// next read: a routing group of more lines than a few hundred is rare.
const maxKeptPending = 256 << 10

// release empties rd, keeping its buffers unless they grew large, and
// returns it to routingReaders.
func (rd *routingReader) release() {
	if cap(rd.pending) > maxKeptPending || cap(rd.long) > maxKeptPending {
		return
	}
	*rd = routingReader{status: rd.status[:0], sampled: rd.sampled[:0], pending: rd.pending[:0], starts: rd.starts[:0], numbers: rd.numbers[:0], long: rd.long[:0]}
	routingReaders.Put(rd)
}

// read reads lines until the end of the body or the stop.
func (rd *routingReader) read(br *bufio.Reader) error {
	for {
		text, err := rd.next(br)
		if err != nil {
			return err
		}
		if text == nil {
			break // the end of the body
		}
		stop, err := rd.take(text)
		if err != nil {
			return err
		}
		if stop {
			rd.stopped = true
			return nil
		}
	}
	return rd.endGroup()
}

// next returns the next line, its newline included, valid until the next
// call; nil at the end of the body. It refuses a line over maxLine and a
// last line without newline as Parse does.
func (rd *routingReader) next(br *bufio.Reader) ([]byte, error) {
	frag, err := br.ReadSlice('\n')
	text := frag
	if errors.Is(err, bufio.ErrBufferFull) {
		rd.long = append(rd.long[:0], frag...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(rd.long) > maxLine {
				return nil, &LimitError{Limit: LimitLine, Max: maxLine, What: "bytes in one line", Line: rd.line + 1}
			}
			frag, err = br.ReadSlice('\n')
			rd.long = append(rd.long, frag...)
		}
		text = rd.long
	}
	if len(text) > maxLine {
		return nil, &LimitError{Limit: LimitLine, Max: maxLine, What: "bytes in one line", Line: rd.line + 1}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	if len(text) == 0 {
		return nil, nil
	}
	rd.line++
	if err != nil {
		return nil, fmt.Errorf("parse metrics: line %d ends without a newline: the body is cut short", rd.line)
	}
	return text, nil
}

// The kinds of line, as classify tells them.
const (
	lineNeutral = iota // blank, or a comment other than HELP and TYPE
	lineMeta           // HELP or TYPE of the family key names
	lineSample         // a sample line (or what Prometheus's parser refuses)
)

// take takes one line: it parses the lines of a routing family's group
// once the group ends, skips the others (counting samples), and reports
// whether the read stops before text.
func (rd *routingReader) take(text []byte) (stop bool, err error) {
	kind, key := classify(text)
	if kind == lineNeutral {
		return false, nil
	}
	if fam, ok := rd.plan.lookup(key); ok {
		if fam != rd.cur {
			if err := rd.endGroup(); err != nil {
				return false, err
			}
			rd.cur = fam
			rd.status[fam] = groupOpen
		}
		if kind == lineSample {
			rd.sampled[fam] = true
		}
		rd.starts = append(rd.starts, len(rd.pending))
		rd.numbers = append(rd.numbers, rd.line)
		rd.pending = append(rd.pending, text...)
		return false, nil
	}
	if rd.cur >= 0 {
		if err := rd.endGroup(); err != nil {
			return false, err
		}
		if rd.settled() {
			return true, nil
		}
	}
	if kind == lineSample {
		return false, rd.b.count(rd.line)
	}
	return false, nil
}

// endGroup parses the lines of the open group, if any, and closes it.
func (rd *routingReader) endGroup() error {
	if rd.cur < 0 {
		return nil
	}
	rd.status[rd.cur] = groupEnded
	rd.cur = -1
	err := rd.b.parse(rd.pending, rd.starts, rd.numbers)
	rd.pending, rd.starts, rd.numbers = rd.pending[:0], rd.starts[:0], rd.numbers[:0]
	return err
}

// settled reports whether every routing concept's value is known: for
// each, its sources are read in order of preference until one that
// Extract would read (a series it keeps), and every family of each has
// been read whole, sample lines included. A histogram family is never
// settled: Parse may leave it out at the end (checkHistograms), when the
// next source counts.
func (rd *routingReader) settled() bool {
	x := &extractor{m: rd.plan.m, families: rd.b.families}
	for _, c := range routingConcepts {
	sources:
		for _, src := range rd.plan.m.sources(c) {
			for _, name := range src.Families() {
				fam := rd.plan.index[name]
				if rd.status[fam] != groupEnded || !rd.sampled[fam] || rd.b.types[name] == dto.MetricType_HISTOGRAM {
					return false
				}
			}
			if x.present(src) {
				break sources
			}
		}
	}
	return true
}

// classify tells a line's kind and, for HELP, TYPE and sample lines, the
// name it is filed under: the third field of a comment whose second is
// HELP or TYPE (unquoted if quoted), or the metric name the line starts with, after blanks (quoted
// within braces, or up to the first byte that cannot be in a name, as
// builder.familyOfLine reads it).
func classify(text []byte) (kind int, key []byte) {
	i := 0
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	s := text[i:]
	if len(s) == 0 || s[0] == '\n' {
		// Only blanks before the newline, the line's only one: Parse
		// drops it (blank).
		return lineNeutral, nil
	}
	if s[0] == '#' {
		// As familyOfLine: the second field says HELP or TYPE, whatever
		// the first (Prometheus's parser decides whether it is one).
		_, rest := field(s)
		f2, rest := field(rest)
		if string(f2) != "HELP" && string(f2) != "TYPE" {
			return lineNeutral, nil
		}
		f3, _ := field(rest)
		if len(f3) == 0 {
			return lineNeutral, nil
		}
		if f3[0] == '"' {
			if name, err := strconv.Unquote(string(f3)); err == nil {
				return lineMeta, []byte(name)
			}
		}
		return lineMeta, f3
	}
	if s[0] == '{' {
		return lineSample, quotedName(s[1:])
	}
	end := 0
	for end < len(s) && isNameByte(s[end]) {
		end++
	}
	return lineSample, s[:end]
}

// field returns the first field of s, split as strings.Fields splits
// (Unicode white space), and what follows it.
func field(s []byte) (f, rest []byte) {
	i := 0
	for i < len(s) {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(s[i:])
		}
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	j := i
	for j < len(s) {
		r, n := rune(s[j]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(s[j:])
		}
		if unicode.IsSpace(r) {
			break
		}
		j += n
	}
	return s[i:j], s[j:]
}

// quotedName is the quoted metric name that opens the braces of a sample
// line written with quoted names ({"name",…}); nil when there is none.
func quotedName(s []byte) []byte {
	s = bytes.TrimLeft(s, " \t")
	if len(s) == 0 || s[0] != '"' {
		return nil
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			name, err := strconv.Unquote(string(s[:i+1]))
			if err != nil {
				return nil
			}
			return []byte(name)
		}
	}
	return nil
}

// isNameByte reports whether c may be in a metric name
// (builder.familyOfLine).
func isNameByte(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
