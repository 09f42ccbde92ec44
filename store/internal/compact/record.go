package compact

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/store"
)

// Codec encodes store records. Its Dict holds what the records share (bucket
// layouts, quantile lists, the phrases of diagnoses), so records it encoded
// decode only with it: a store shared between processes would have to share
// the Dict too. The zero Codec is ready; it is safe for concurrent use.
//
// A record is written as protobuf (Node, NodeMetrics, Diagnosis), less what
// it can be rebuilt from:
//
//   - the node id (the store's key) wherever it appears, and the fields the
//     Diagnosis and the Node repeat from the NodeMetrics or from each other
//     (model, engine, window, times, status, cause, routable, load score);
//   - in each Distribution: the bucket bounds (an id in the Dict), the
//     percentiles (recomputed from the buckets as metrics.Distribution does),
//     the mean (sum / count) and the count (the +Inf bucket's); bucket counts
//     that are whole numbers are written as varint differences;
//   - the Diagnosis's text, written as phrases of the Dict and numbers (see
//     appendText).
//
// Each is left out only when rebuilding it gives the same bits; otherwise it
// stays in the protobuf.
type Codec struct {
	dict Dict
	// scratch keeps Encode's working buffers (*encodeScratch) from one
	// record to the next.
	scratch sync.Pool
}

// encodeScratch is what Encode writes into before the record's own copy.
type encodeScratch struct {
	buf, wire, side []byte
	qs              []float64
	buckets         []histogram.Bucket // rebuilt's
	// diag, findings and list are textless's view of a Diagnosis.
	diag     llmdiagv1.Diagnosis
	findings []*llmdiagv1.Finding // one for each finding of the largest view yet
	list     []*llmdiagv1.Finding
}

// textless is d without its text, which appendDiagnosisText writes: a view
// in sc sharing d's sub-messages, so that only what is left of a diagnosis
// is marshalled (its text is some 97% of its wire). It holds every other
// field of Diagnosis and Finding (TestRecordKeepsEveryField fails for one
// added to the API and not here), unknown fields included. done clears the
// view, so that sc keeps nothing of d.
func (sc *encodeScratch) textless(d *llmdiagv1.Diagnosis) (view *llmdiagv1.Diagnosis, done func()) {
	v := &sc.diag
	v.Node, v.Model, v.Engine, v.Window = d.Node, d.Model, d.Engine, d.Window
	v.Status, v.RootCause, v.Routable, v.LoadScore, v.Confidence = d.Status, d.RootCause, d.Routable, d.LoadScore, d.Confidence
	v.ObservedAt, v.Staleness, v.Stale, v.Language, v.Role = d.ObservedAt, d.Staleness, d.Stale, d.Language, d.Role
	if u := d.ProtoReflect().GetUnknown(); len(u) > 0 {
		v.ProtoReflect().SetUnknown(u)
	}
	for len(sc.findings) < len(d.Findings) {
		sc.findings = append(sc.findings, new(llmdiagv1.Finding))
	}
	list := sc.list[:0]
	for i, f := range d.Findings {
		if f == nil {
			list = append(list, nil)
			continue
		}
		w := sc.findings[i]
		w.Indicator, w.Status, w.Slo = f.Indicator, f.Status, f.Slo
		if u := f.ProtoReflect().GetUnknown(); len(u) > 0 {
			w.ProtoReflect().SetUnknown(u)
		}
		list = append(list, w)
	}
	if len(list) > 0 {
		v.Findings = list
	}
	return v, func() {
		for _, w := range sc.findings[:len(list)] {
			w.Reset()
		}
		clear(list)
		sc.list = list[:0]
		v.Reset()
	}
}

// Dict interns lists of float64 by value (at most maxDictLists) and phrases
// (at most maxDictPhrases); past those bounds records carry their lists and
// phrases themselves. A fleet needs a handful of lists and a few hundred
// phrases, so the Dict costs a few tens of KiB per store.
//
// Its lists and phrases only grow: readers load a slice and read below its
// length while the one writer at a time appends past it.
type Dict struct {
	mu    sync.Mutex
	ids   map[string]uint32
	lists atomic.Pointer[[][]float64]

	pmu       sync.Mutex
	phraseIDs map[string]uint32 // guarded by pmu
	// known is a copy of phraseIDs, read without the lock; renewed when
	// phraseIDs has grown by an eighth, so that copying stays linear in
	// the phrases. A phrase not in it is looked up under the lock.
	known   atomic.Pointer[phraseTable]
	phrases atomic.Pointer[[]string]

	// frozen: the Dict holds what NewPortableCodec put in and learns
	// nothing more.
	frozen bool
}

// NewPortableCodec returns a Codec whose Dict holds exactly lists, in order
// (bucket layouts and quantile lists), and learns nothing more: no other
// list and no phrase. Its records decode with any Codec made from the same
// lists, in any process, so its bytes may be shared (a Redis store). Lists
// not among them, and every Diagnosis text, are written inline. Callers must
// only ever append to lists: an id, once written, keeps its list.
func NewPortableCodec(lists [][]float64) *Codec {
	c := &Codec{}
	for _, l := range lists {
		c.dict.id(l)
	}
	c.dict.frozen = true
	return c
}

const maxDictLists = 4096

// id returns the id of vs, adding it if there is room.
func (d *Dict) id(vs []float64) (uint64, bool) {
	var buf [64 * 8]byte
	key := buf[:0]
	for _, v := range vs {
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(v))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if id, ok := d.ids[string(key)]; ok {
		return uint64(id), true
	}
	if d.frozen {
		return 0, false
	}
	var lists [][]float64
	if p := d.lists.Load(); p != nil {
		lists = *p
	}
	if len(lists) >= maxDictLists {
		return 0, false
	}
	if d.ids == nil {
		d.ids = make(map[string]uint32)
	}
	id := uint32(len(lists))
	lists = append(lists, slices.Clone(vs))
	d.lists.Store(&lists)
	d.ids[string(key)] = id
	return uint64(id), true
}

// list returns the list with id; callers must not modify it.
func (d *Dict) list(id uint64) ([]float64, error) {
	if p := d.lists.Load(); p != nil && id < uint64(len(*p)) {
		return (*p)[id], nil
	}
	return nil, fmt.Errorf("%w: no list %d", errCorrupt, id)
}

// Lists returns the number of lists interned.
func (d *Dict) Lists() int {
	if p := d.lists.Load(); p != nil {
		return len(*p)
	}
	return 0
}

const recordVersion = 1

// Record flags: which messages are present, and which fields are copies.
const (
	hasNode = 1 << iota
	hasMetrics
	hasDiagnosis
	nodeIDIsKey
	metricsNodeIsKey
	nodeModel      // = Metrics.Model
	nodeEngine     // = Metrics.Engine
	nodeStaleness  // = Metrics.Staleness
	nodeLastSeen   // = Metrics.ObservedAt
	diagNode       // = Metrics.Node
	diagModel      // = Metrics.Model
	diagEngine     // = Metrics.Engine
	diagWindow     // = Metrics.Window
	diagObservedAt // = Metrics.ObservedAt
	diagStaleness  // = Metrics.Staleness
	diagStale      // = Metrics.Stale
	diagStatus     // = Node.Status
	diagRootCause  // = Node.RootCause
	diagRoutable   // = Node.Routable
	diagLoadScore  // = Node.LoadScore
)

// Distribution flags: what was left out of one Distribution.
const (
	distBounds      = 1 << iota // id of the bounds in the Dict follows
	distCounts                  // number of counts, then varint differences follow
	distPercentiles             // id of the quantiles in the Dict follows
	distMean                    // sum / count
	distCount                   // the last bucket count
)

// distributions are the NodeMetrics' histograms, in the order their
// Distribution flags are written.
var distributions = []func(*llmdiagv1.NodeMetrics) *llmdiagv1.Distribution{
	(*llmdiagv1.NodeMetrics).GetTtft,
	(*llmdiagv1.NodeMetrics).GetE2E,
	(*llmdiagv1.NodeMetrics).GetInterToken,
	(*llmdiagv1.NodeMetrics).GetTimePerOutputToken,
	(*llmdiagv1.NodeMetrics).GetQueueTime,
}

// Encode returns rec, stored under key id, in few bytes. It does not modify
// rec.
func (c *Codec) Encode(id string, rec *store.Record) ([]byte, error) {
	n, m, d := rec.Node, rec.Metrics, rec.Diagnosis
	var flags uint64
	set := func(f uint64, same bool) {
		if same {
			flags |= f
		}
	}
	set(hasNode, n != nil)
	set(hasMetrics, m != nil)
	set(hasDiagnosis, d != nil)
	if n != nil {
		set(nodeIDIsKey, n.Id == id && id != "")
	}
	if m != nil {
		set(metricsNodeIsKey, m.Node == id && id != "")
	}
	if n != nil && m != nil {
		set(nodeModel, sameString(n.Model, m.Model))
		set(nodeEngine, n.Engine == m.Engine && n.Engine != 0)
		set(nodeStaleness, sameMessage(n.Staleness, m.Staleness))
		set(nodeLastSeen, sameMessage(n.LastSeen, m.ObservedAt))
	}
	if d != nil && m != nil {
		set(diagNode, sameString(d.Node, m.Node))
		set(diagModel, sameString(d.Model, m.Model))
		set(diagEngine, d.Engine == m.Engine && d.Engine != 0)
		set(diagWindow, sameString(d.Window, m.Window))
		set(diagObservedAt, sameMessage(d.ObservedAt, m.ObservedAt))
		set(diagStaleness, sameMessage(d.Staleness, m.Staleness))
		set(diagStale, d.Stale && m.Stale)
	}
	if d != nil && n != nil {
		set(diagStatus, d.Status == n.Status && d.Status != 0)
		set(diagRootCause, d.RootCause == n.RootCause && d.RootCause != 0)
		set(diagRoutable, d.Routable && n.Routable)
		set(diagLoadScore, math.Float64bits(d.LoadScore) == math.Float64bits(n.LoadScore) && d.LoadScore != 0)
	}

	// The fields each message leaves out, by field number.
	var nodeDrop, metricsDrop, diagDrop fieldSet
	for _, f := range copies {
		if flags&f.flag != 0 {
			switch f.msg {
			case msgNode:
				nodeDrop.add(f.field)
			case msgMetrics:
				metricsDrop.add(f.field)
			case msgDiagnosis:
				diagDrop.add(f.field)
			}
		}
	}
	sc, _ := c.scratch.Get().(*encodeScratch)
	if sc == nil {
		sc = &encodeScratch{buf: make([]byte, 0, 2048)}
	}
	defer c.scratch.Put(sc)
	side := sc.side[:0]
	defer func() { sc.side = side[:0] }()
	var distDrop [numFields]fieldSet
	var distNest fieldSet
	if m != nil {
		for i, get := range distributions {
			if dist := get(m); dist != nil {
				side, distDrop[distFields[i]] = c.stripDistribution(side, dist, sc)
				distNest.add(distFields[i])
			}
		}
	}
	if d != nil {
		side = c.appendDiagnosisText(side, d)
		diagDrop |= diagText
	}

	opts := proto.MarshalOptions{}
	buf := append(sc.buf[:0], recordVersion)
	buf = protowire.AppendVarint(buf, flags)
	wire := sc.wire[:0]
	defer func() { sc.buf, sc.wire = buf[:0], wire[:0] }()
	var err error
	write := func(msg proto.Message, f filter) {
		if err != nil {
			return
		}
		if wire, err = opts.MarshalAppend(wire[:0], msg); err != nil {
			return
		}
		buf, err = appendMessage(buf, wire, f)
	}
	if n != nil {
		write(n, filter{drop: nodeDrop, types: &nodeTypes})
	}
	if m != nil {
		write(m, filter{drop: metricsDrop, types: &metricsTypes, nest: distNest, sub: &distDrop, subTypes: &distTypes})
	}
	if d != nil {
		view, done := sc.textless(d)
		write(view, filter{drop: diagDrop, types: &diagTypes, nest: fieldSet(0).with(fDiagFindings), sub: &findingDrop, subTypes: &findingTypes})
		done()
	}
	if err != nil {
		return nil, err
	}
	buf = append(buf, side...)
	return slices.Clone(buf), nil
}

// numFields bounds the field numbers a fieldSet holds.
const numFields = 64

// fieldSet is a set of field numbers below numFields.
type fieldSet uint64

func (s *fieldSet) add(n protowire.Number)          { *s |= 1 << n }
func (s fieldSet) with(n protowire.Number) fieldSet { s.add(n); return s }
func (s fieldSet) has(n protowire.Number) bool      { return n < numFields && s&(1<<n) != 0 }

// fieldNumber is the number of the field name of m's type.
func fieldNumber(m proto.Message, name string) protowire.Number {
	fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil || fd.Number() >= numFields {
		panic("compact: no field " + name)
	}
	return fd.Number()
}

const (
	msgNode = iota
	msgMetrics
	msgDiagnosis
)

var (
	fDiagFindings = fieldNumber(&llmdiagv1.Diagnosis{}, "findings")

	// copies are the fields left out under each record flag.
	copies = []struct {
		flag  uint64
		msg   int
		field protowire.Number
	}{
		{nodeIDIsKey, msgNode, fieldNumber(&llmdiagv1.Node{}, "id")},
		{nodeModel, msgNode, fieldNumber(&llmdiagv1.Node{}, "model")},
		{nodeEngine, msgNode, fieldNumber(&llmdiagv1.Node{}, "engine")},
		{nodeStaleness, msgNode, fieldNumber(&llmdiagv1.Node{}, "staleness")},
		{nodeLastSeen, msgNode, fieldNumber(&llmdiagv1.Node{}, "last_seen")},
		{metricsNodeIsKey, msgMetrics, fieldNumber(&llmdiagv1.NodeMetrics{}, "node")},
		{diagNode, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "node")},
		{diagModel, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "model")},
		{diagEngine, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "engine")},
		{diagWindow, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "window")},
		{diagObservedAt, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "observed_at")},
		{diagStaleness, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "staleness")},
		{diagStale, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "stale")},
		{diagStatus, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "status")},
		{diagRootCause, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "root_cause")},
		{diagRoutable, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "routable")},
		{diagLoadScore, msgDiagnosis, fieldNumber(&llmdiagv1.Diagnosis{}, "load_score")},
	}

	// distFields are the NodeMetrics fields of distributions, in order.
	distFields = []protowire.Number{
		fieldNumber(&llmdiagv1.NodeMetrics{}, "ttft"),
		fieldNumber(&llmdiagv1.NodeMetrics{}, "e2e"),
		fieldNumber(&llmdiagv1.NodeMetrics{}, "inter_token"),
		fieldNumber(&llmdiagv1.NodeMetrics{}, "time_per_output_token"),
		fieldNumber(&llmdiagv1.NodeMetrics{}, "queue_time"),
	}
	fDistPercentiles = fieldNumber(&llmdiagv1.Distribution{}, "percentiles")
	fDistMean        = fieldNumber(&llmdiagv1.Distribution{}, "mean")
	fDistCount       = fieldNumber(&llmdiagv1.Distribution{}, "count")
	fDistBounds      = fieldNumber(&llmdiagv1.Distribution{}, "bucket_bounds")
	fDistCounts      = fieldNumber(&llmdiagv1.Distribution{}, "bucket_counts")

	// diagText are the Diagnosis's text fields, findingDrop[findings] the
	// Finding's: written by appendDiagnosisText.
	diagText = fieldSet(0).
			with(fieldNumber(&llmdiagv1.Diagnosis{}, "summary")).
			with(fieldNumber(&llmdiagv1.Diagnosis{}, "evidence")).
			with(fieldNumber(&llmdiagv1.Diagnosis{}, "ruled_out")).
			with(fieldNumber(&llmdiagv1.Diagnosis{}, "recommendations"))
	findingDrop = func() (s [numFields]fieldSet) {
		s[fDiagFindings] = fieldSet(0).
			with(fieldNumber(&llmdiagv1.Finding{}, "name")).
			with(fieldNumber(&llmdiagv1.Finding{}, "value")).
			with(fieldNumber(&llmdiagv1.Finding{}, "conclusion")).
			with(fieldNumber(&llmdiagv1.Finding{}, "evidence"))
		return s
	}()
)

// filter says which fields of a message appendMessage leaves out.
type filter struct {
	drop  fieldSet
	types *wireTypes // of the message's fields: a field is dropped only
	// with its own wire type, never an unknown field of the same number
	nest     fieldSet             // message fields written filtered
	sub      *[numFields]fieldSet // what to drop from each of those
	subTypes *wireTypes           // their fields' wire types
}

// wireTypes are the wire types of a message's fields, by number.
type wireTypes [numFields]protowire.Type

// typesOf returns the wire types protobuf writes the fields of m with.
func typesOf(m proto.Message) (t wireTypes) {
	fields := m.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Number() >= numFields {
			continue
		}
		var typ protowire.Type
		switch fd.Kind() {
		case protoreflect.BoolKind, protoreflect.EnumKind,
			protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
			protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
			typ = protowire.VarintType
		case protoreflect.DoubleKind, protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
			typ = protowire.Fixed64Type
		case protoreflect.FloatKind, protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
			typ = protowire.Fixed32Type
		default: // strings, bytes, messages
			typ = protowire.BytesType
		}
		if fd.IsList() && fd.IsPacked() {
			typ = protowire.BytesType
		}
		t[fd.Number()] = typ
	}
	return t
}

var (
	nodeTypes    = typesOf(&llmdiagv1.Node{})
	metricsTypes = typesOf(&llmdiagv1.NodeMetrics{})
	distTypes    = typesOf(&llmdiagv1.Distribution{})
	diagTypes    = typesOf(&llmdiagv1.Diagnosis{})
	findingTypes = typesOf(&llmdiagv1.Finding{})
)

// appendMessage appends the protobuf message wire to dst, length first,
// without the fields f drops.
func appendMessage(dst, wire []byte, f filter) ([]byte, error) {
	// Reserve room for the length, write the message, then the length.
	reserve := protowire.SizeVarint(uint64(len(wire)))
	lenAt := len(dst)
	dst = append(dst, make([]byte, reserve)...)
	start := len(dst)
	for len(wire) > 0 {
		num, typ, k := protowire.ConsumeTag(wire)
		if k < 0 {
			return nil, protowire.ParseError(k)
		}
		v := protowire.ConsumeFieldValue(num, typ, wire[k:])
		if v < 0 {
			return nil, protowire.ParseError(v)
		}
		field := wire[:k+v]
		wire = wire[k+v:]
		known := num < numFields && f.types[num] == typ
		switch {
		case known && f.drop.has(num):
		case known && f.nest.has(num):
			inner, _ := protowire.ConsumeBytes(field[k:])
			dst = protowire.AppendTag(dst, num, typ)
			var err error
			if dst, err = appendMessage(dst, inner, filter{drop: f.sub[num], types: f.subTypes}); err != nil {
				return nil, err
			}
		default:
			dst = append(dst, field...)
		}
	}
	size := uint64(len(dst) - start)
	if k := protowire.SizeVarint(size); k < reserve {
		copy(dst[lenAt+k:], dst[start:])
		dst = dst[:len(dst)-(reserve-k)]
	}
	protowire.AppendVarint(dst[lenAt:lenAt], size)
	return dst, nil
}

// stripDistribution appends to b how to rebuild what dist need not carry,
// and returns the fields dist need not carry.
func (c *Codec) stripDistribution(b []byte, dist *llmdiagv1.Distribution, sc *encodeScratch) ([]byte, fieldSet) {
	var flags uint64
	var boundsID, quantilesID uint64
	var counts []byte
	bounds, cum := dist.BucketBounds, dist.BucketCounts

	if ps := dist.Percentiles; len(ps) > 0 {
		qs := sc.qs[:0]
		for _, p := range ps {
			qs = append(qs, p.Quantile)
		}
		sc.qs = qs
		if rebuilt(ps, bounds, cum, &sc.buckets) {
			if id, ok := c.dict.id(qs); ok {
				flags |= distPercentiles
				quantilesID = id
			}
		}
	}
	if dist.Mean != nil && dist.Count > 0 && math.Float64bits(*dist.Mean) == math.Float64bits(dist.Sum/dist.Count) {
		flags |= distMean
	}
	if len(cum) > 0 && dist.Count != 0 && math.Float64bits(dist.Count) == math.Float64bits(cum[len(cum)-1]) {
		flags |= distCount
	}
	if len(bounds) > 0 {
		if id, ok := c.dict.id(bounds); ok {
			flags |= distBounds
			boundsID = id
		}
	}
	if len(cum) > 0 {
		if enc, ok := countDeltas(cum); ok {
			flags |= distCounts
			counts = enc
		}
	}

	var drop fieldSet
	b = protowire.AppendVarint(b, flags)
	if flags&distBounds != 0 {
		b = protowire.AppendVarint(b, boundsID)
		drop.add(fDistBounds)
	}
	if flags&distCounts != 0 {
		b = append(b, counts...)
		drop.add(fDistCounts)
	}
	if flags&distPercentiles != 0 {
		b = protowire.AppendVarint(b, quantilesID)
		drop.add(fDistPercentiles)
	}
	if flags&distMean != 0 {
		drop.add(fDistMean)
	}
	if flags&distCount != 0 {
		drop.add(fDistCount)
	}
	return b, drop
}

// percentiles are the percentiles metrics.Distribution gives for the
// buckets: histogram.Quantile's estimates, worked out directly for the usual
// buckets (see quantiles).
func percentiles(bounds, counts, qs []float64) []*llmdiagv1.Percentile {
	ps := make([]llmdiagv1.Percentile, len(qs))
	out := make([]*llmdiagv1.Percentile, len(qs))
	plain := plainBuckets(bounds, counts)
	var buckets histogram.Prepared
	prepared := false
	for i, q := range qs {
		var e histogram.Estimate
		if plain && q >= 0 && q <= 1 {
			e = quantile(q, bounds, counts)
		} else {
			if !prepared {
				buckets, prepared = histogram.PrepareHistogram(&sample.Histogram{Bounds: bounds, Counts: counts}), true
			}
			e = buckets.Quantile(q)
		}
		ps[i] = llmdiagv1.Percentile{Quantile: q, Value: e.Value, LowerBound: e.Lower, UpperBound: e.Upper}
		out[i] = &ps[i]
	}
	return out
}

// rebuilt reports whether percentiles rebuilds ps exactly from the buckets
// (the same bits, and no unknown fields in ps), without building them;
// buf is scratch for the buckets.
func rebuilt(ps []*llmdiagv1.Percentile, bounds, counts []float64, buf *[]histogram.Bucket) bool {
	plain := plainBuckets(bounds, counts)
	var buckets histogram.Prepared
	prepared := false
	bits := math.Float64bits
	for _, p := range ps {
		if len(p.ProtoReflect().GetUnknown()) > 0 {
			return false
		}
		q := p.Quantile
		var e histogram.Estimate
		if plain && q >= 0 && q <= 1 {
			e = quantile(q, bounds, counts)
		} else {
			if !prepared {
				buckets, prepared = histogram.PrepareHistogramInto(&sample.Histogram{Bounds: bounds, Counts: counts}, buf), true
			}
			e = buckets.Quantile(q)
		}
		if bits(p.Value) != bits(e.Value) || bits(p.LowerBound) != bits(e.Lower) || bits(p.UpperBound) != bits(e.Upper) {
			return false
		}
	}
	return true
}

// plainBuckets reports whether histogram.Quantile would use the buckets as
// they are: bounds ascending, +Inf last, and counts whole numbers that do not
// decrease, small enough that no two differ by Prometheus's 1e-12 noise
// tolerance, with some observations.
func plainBuckets(bounds, counts []float64) bool {
	n := len(bounds)
	if n < 2 || len(counts) != n || !math.IsInf(bounds[n-1], 1) || !(counts[n-1] > 0) {
		return false
	}
	for i := range n {
		if c := counts[i]; !(c >= 0 && c < 1<<32 && c == math.Trunc(c)) {
			return false
		}
		if i > 0 && !(bounds[i] > bounds[i-1] && counts[i] >= counts[i-1]) {
			return false
		}
	}
	return true
}

// quantile is histogram.Quantile(q, buckets) for plainBuckets and q in
// [0, 1], step for step.
func quantile(q float64, bounds, counts []float64) histogram.Estimate {
	n := len(bounds)
	rank := q * counts[n-1]
	b := sort.Search(n-1, func(i int) bool { return counts[i] >= rank })
	var est histogram.Estimate
	switch {
	case b == n-1:
		est.Value = bounds[b-1]
		est.Lower, est.Upper = bounds[b-1], math.Inf(+1)
		return est
	case b == 0 && bounds[0] <= 0:
		est.Value = bounds[0]
		est.Lower, est.Upper = math.Inf(-1), bounds[0]
		return est
	}
	var (
		start float64
		end   = bounds[b]
		count = counts[b]
	)
	if b > 0 {
		start = bounds[b-1]
		count -= counts[b-1]
		rank -= counts[b-1]
	}
	est.Value = start + (end-start)*(rank/count)
	est.Lower, est.Upper = start, end
	return est
}

// countDeltas writes cumulative counts that are whole numbers below 2^53 as
// the varint differences between them, when adding them back up gives the
// same bits.
func countDeltas(cum []float64) ([]byte, bool) {
	b := protowire.AppendVarint(make([]byte, 0, len(cum)+2), uint64(len(cum)))
	var prev float64
	for _, c := range cum {
		delta := c - prev
		if !(delta >= 0 && delta < 1<<53 && delta == math.Trunc(delta)) {
			return nil, false
		}
		if math.Float64bits(prev+float64(uint64(delta))) != math.Float64bits(c) {
			return nil, false
		}
		b = protowire.AppendVarint(b, uint64(delta))
		prev = c
	}
	return b, true
}

func sameString(a, b string) bool { return a == b && a != "" }

func sameMessage(a, b proto.Message) bool {
	return a != nil && b != nil && !isNil(a) && !isNil(b) && proto.Equal(a, b)
}

func isNil(m proto.Message) bool { return !m.ProtoReflect().IsValid() }

// Decode returns the record Encode wrote for key id.
func (c *Codec) Decode(id string, b []byte) (*store.Record, error) {
	if len(b) == 0 || b[0] != recordVersion {
		return nil, fmt.Errorf("%w: record version", errCorrupt)
	}
	b = b[1:]
	flags, k := protowire.ConsumeVarint(b)
	if k < 0 {
		return nil, errCorrupt
	}
	b = b[k:]
	rec := &store.Record{}
	next := func(msg proto.Message) error {
		v, k := protowire.ConsumeBytes(b)
		if k < 0 {
			return errCorrupt
		}
		b = b[k:]
		return proto.Unmarshal(v, msg)
	}
	if flags&hasNode != 0 {
		rec.Node = &llmdiagv1.Node{}
		if err := next(rec.Node); err != nil {
			return nil, err
		}
	}
	if flags&hasMetrics != 0 {
		rec.Metrics = &llmdiagv1.NodeMetrics{}
		if err := next(rec.Metrics); err != nil {
			return nil, err
		}
	}
	if flags&hasDiagnosis != 0 {
		rec.Diagnosis = &llmdiagv1.Diagnosis{}
		if err := next(rec.Diagnosis); err != nil {
			return nil, err
		}
	}
	n, m, d := rec.Node, rec.Metrics, rec.Diagnosis

	if m != nil {
		if flags&metricsNodeIsKey != 0 {
			m.Node = id
		}
		for _, get := range distributions {
			if dist := get(m); dist != nil {
				var err error
				if b, err = c.restoreDistribution(b, dist); err != nil {
					return nil, err
				}
			}
		}
	}
	if d != nil {
		var err error
		if b, err = c.restoreText(b, d); err != nil {
			return nil, err
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left", errCorrupt, len(b))
	}
	if n != nil {
		if flags&nodeIDIsKey != 0 {
			n.Id = id
		}
		if m != nil {
			if flags&nodeModel != 0 {
				n.Model = m.Model
			}
			if flags&nodeEngine != 0 {
				n.Engine = m.Engine
			}
			if flags&nodeStaleness != 0 {
				n.Staleness = cloneOf(m.Staleness)
			}
			if flags&nodeLastSeen != 0 {
				n.LastSeen = cloneOf(m.ObservedAt)
			}
		}
	}
	if d != nil && m != nil {
		if flags&diagNode != 0 {
			d.Node = m.Node
		}
		if flags&diagModel != 0 {
			d.Model = m.Model
		}
		if flags&diagEngine != 0 {
			d.Engine = m.Engine
		}
		if flags&diagWindow != 0 {
			d.Window = m.Window
		}
		if flags&diagObservedAt != 0 {
			d.ObservedAt = cloneOf(m.ObservedAt)
		}
		if flags&diagStaleness != 0 {
			d.Staleness = cloneOf(m.Staleness)
		}
		if flags&diagStale != 0 {
			d.Stale = m.Stale
		}
	}
	if d != nil && n != nil {
		if flags&diagStatus != 0 {
			d.Status = n.Status
		}
		if flags&diagRootCause != 0 {
			d.RootCause = n.RootCause
		}
		if flags&diagRoutable != 0 {
			d.Routable = n.Routable
		}
		if flags&diagLoadScore != 0 {
			d.LoadScore = n.LoadScore
		}
	}
	return rec, nil
}

func cloneOf[M proto.Message](m M) M { return proto.Clone(m).(M) }

// restoreDistribution rebuilds what stripDistribution left out of dist from
// the start of b, and returns the rest of b.
func (c *Codec) restoreDistribution(b []byte, dist *llmdiagv1.Distribution) ([]byte, error) {
	varint := func() (uint64, error) {
		v, k := protowire.ConsumeVarint(b)
		if k < 0 {
			return 0, errCorrupt
		}
		b = b[k:]
		return v, nil
	}
	flags, err := varint()
	if err != nil {
		return nil, err
	}
	if flags&distBounds != 0 {
		id, err := varint()
		if err != nil {
			return nil, err
		}
		bounds, err := c.dict.list(id)
		if err != nil {
			return nil, err
		}
		dist.BucketBounds = slices.Clone(bounds)
	}
	if flags&distCounts != 0 {
		n, err := varint()
		if err != nil {
			return nil, err
		}
		if n > uint64(len(b)) {
			return nil, errCorrupt
		}
		counts := make([]float64, n)
		var prev float64
		for i := range counts {
			delta, err := varint()
			if err != nil {
				return nil, err
			}
			prev += float64(delta)
			counts[i] = prev
		}
		dist.BucketCounts = counts
	}
	if flags&distPercentiles != 0 {
		id, err := varint()
		if err != nil {
			return nil, err
		}
		qs, err := c.dict.list(id)
		if err != nil {
			return nil, err
		}
		dist.Percentiles = percentiles(dist.BucketBounds, dist.BucketCounts, qs)
	}
	if flags&distCount != 0 && len(dist.BucketCounts) > 0 {
		dist.Count = dist.BucketCounts[len(dist.BucketCounts)-1]
	}
	if flags&distMean != 0 {
		dist.Mean = sample.F(dist.Sum / dist.Count)
	}
	return b, nil
}
