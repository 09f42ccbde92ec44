package ring

import (
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// absentBits is the value of a column whose concept the sample does not
// have: a signalling NaN with a payload of its own ("llmd"), which no
// exposition parses to (a parsed NaN is the quiet 0x7ff8000000000001) and
// the XOR encoding keeps bit for bit.
const absentBits = 0x7ff000006c6c6d64

var absent = math.Float64frombits(absentBits)

func isAbsent(v float64) bool { return math.Float64bits(v) == absentBits }

// scalars are the optional figures of a sample, in column order. Each
// gives the address of its field, to read and to fill.
var scalars = [...]func(*sample.Sample) **float64{
	func(s *sample.Sample) **float64 { return &s.Queue },
	func(s *sample.Sample) **float64 { return &s.Running },
	func(s *sample.Sample) **float64 { return &s.KVUsage },
	func(s *sample.Sample) **float64 { return &s.KVCapacityTokens },
	func(s *sample.Sample) **float64 { return &s.PromptTokens },
	func(s *sample.Sample) **float64 { return &s.GenerationTokens },
	func(s *sample.Sample) **float64 { return &s.Preemptions },
	func(s *sample.Sample) **float64 { return &s.RequestsFinished },
	func(s *sample.Sample) **float64 { return &s.RequestsAborted },
	func(s *sample.Sample) **float64 { return &s.Effects.PrefixCacheQueries },
	func(s *sample.Sample) **float64 { return &s.Effects.PrefixCacheHits },
	func(s *sample.Sample) **float64 { return &s.Effects.PrefixCacheHitRate },
	func(s *sample.Sample) **float64 { return &s.Effects.SpecDrafts },
	func(s *sample.Sample) **float64 { return &s.Effects.SpecDraftTokens },
	func(s *sample.Sample) **float64 { return &s.Effects.SpecAcceptedTokens },
	func(s *sample.Sample) **float64 { return &s.Effects.SpecAcceptRate },
	func(s *sample.Sample) **float64 { return &s.Effects.SpecAcceptLength },
	func(s *sample.Sample) **float64 { return &s.Effects.LoRAAdaptersRunning },
	func(s *sample.Sample) **float64 { return &s.Effects.LoRAAdaptersWaiting },
	func(s *sample.Sample) **float64 { return &s.Effects.LoRAMax },
	func(s *sample.Sample) **float64 { return &s.KVTransfer.Count },
	func(s *sample.Sample) **float64 { return &s.KVTransfer.Seconds },
	func(s *sample.Sample) **float64 { return &s.KVTransfer.Bytes },
	func(s *sample.Sample) **float64 { return &s.KVTransfer.Failures },
}

// gpuFields are GPUMetrics' optional doubles, in column order: the GPUs'
// figures, which change at every read. The rest of the message is the
// meta's.
var gpuFields = func() []protoreflect.FieldDescriptor {
	var out []protoreflect.FieldDescriptor
	fields := (&llmdiagv1.GPUMetrics{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Kind() == protoreflect.DoubleKind && f.HasPresence() && f.Cardinality() != protoreflect.Repeated {
			out = append(out, f)
		}
	}
	return out
}()

// A sample's fixed figures, in slot order: the scalars, each latency's
// total (sum, count), the GPU's doubles. A block's columns are the slots
// its layout keeps, then each histogram it has (sum, count, the cumulative
// counts).
const (
	totalsAt = len(scalars)
	gpuAt    = totalsAt + 2*int(sample.NumHists)
)

var nFixed = gpuAt + len(gpuFields)

// layout is which fixed figures a block keeps and which histograms its
// samples have, with their bounds: it fixes the block's columns.
type layout struct {
	slots  []int                      // the fixed slots kept, ascending: column i is slots[i]
	kept   []bool                     // by slot
	bounds [sample.NumHists][]float64 // nil: the histogram is absent
	at     [sample.NumHists]int       // first column of each histogram present
	cols   int
}

// layoutOf is the layout of s (whose fixed figures are f), keeping also
// the slots prev keeps (when not nil), so that a figure that comes and
// goes does not start a block each time it comes back.
func layoutOf(f []float64, s *sample.Sample, prev *layout) *layout {
	l := &layout{kept: make([]bool, nFixed)}
	for slot, v := range f {
		if !isAbsent(v) || prev != nil && prev.kept[slot] {
			l.kept[slot] = true
			l.slots = append(l.slots, slot)
		}
	}
	l.cols = len(l.slots)
	for h, hist := range s.Hists {
		if hist != nil {
			l.bounds[h] = slices.Clip(hist.Bounds)
			l.at[h] = l.cols
			l.cols += 2 + len(hist.Bounds)
		}
	}
	return l
}

// fits reports whether l keeps every fixed figure s has (f), and s's
// histograms are those of l, with the same bounds (bit for bit) and as
// many counts.
func (l *layout) fits(f []float64, s *sample.Sample) bool {
	for slot, v := range f {
		if !l.kept[slot] && !isAbsent(v) {
			return false
		}
	}
	for h, hist := range s.Hists {
		b := l.bounds[h]
		if (hist == nil) != (b == nil) {
			return false
		}
		if hist == nil {
			continue
		}
		if len(hist.Bounds) != len(b) || len(hist.Counts) != len(b) {
			return false
		}
		for i, v := range hist.Bounds {
			if math.Float64bits(v) != math.Float64bits(b[i]) {
				return false
			}
		}
	}
	return true
}

// fixed is s's fixed figures by slot, absent where s has none.
func fixed(s *sample.Sample) []float64 {
	f := make([]float64, nFixed)
	for i, get := range scalars {
		f[i] = value(*get(s))
	}
	for h, t := range s.Totals {
		if t == nil {
			f[totalsAt+2*h], f[totalsAt+2*h+1] = absent, absent
		} else {
			f[totalsAt+2*h], f[totalsAt+2*h+1] = t.Sum, t.Count
		}
	}
	var g protoreflect.Message
	if s.GPU != nil {
		g = s.GPU.ProtoReflect()
	}
	for i, fd := range gpuFields {
		f[gpuAt+i] = absent
		if g != nil && g.Has(fd) {
			f[gpuAt+i] = g.Get(fd).Float()
		}
	}
	return f
}

// meta is what a sample holds besides its figures and its time.
type meta struct {
	up                       bool
	engine                   llmdiagv1.Engine
	model                    string
	created                  time.Time
	dp, tp, pp, ep           int
	role                     llmdiagv1.Role
	roleSource               string
	errors, warnings         []string
	loraRunning, loraWaiting []string
	kvOffload                string
	gpu                      bool
	gpuRest                  []byte // GPUMetrics without its doubles, marshalled
}

func metaOf(s *sample.Sample) *meta {
	m := &meta{
		up: s.Up, engine: s.Engine, model: s.Model, created: s.CountersCreated,
		dp: s.DataParallel, tp: s.TensorParallel, pp: s.PipelineParallel, ep: s.ExpertParallel,
		role: s.Role, roleSource: s.RoleSource,
		errors: slices.Clip(s.Errors), warnings: slices.Clip(s.Warnings),
		loraRunning: slices.Clip(s.Effects.LoRARunning), loraWaiting: slices.Clip(s.Effects.LoRAWaiting),
		kvOffload: s.Effects.KVOffload,
	}
	if s.GPU != nil {
		m.gpu = true
		rest := proto.CloneOf(s.GPU)
		r := rest.ProtoReflect()
		for _, f := range gpuFields {
			r.Clear(f)
		}
		// Deterministic, so that equal messages compare equal as bytes.
		m.gpuRest, _ = proto.MarshalOptions{Deterministic: true}.Marshal(rest)
	}
	return m
}

func (m *meta) equal(o *meta) bool {
	return m.up == o.up && m.engine == o.engine && m.model == o.model && m.created == o.created &&
		m.dp == o.dp && m.tp == o.tp && m.pp == o.pp && m.ep == o.ep &&
		m.role == o.role && m.roleSource == o.roleSource &&
		sameStrings(m.errors, o.errors) && sameStrings(m.warnings, o.warnings) &&
		sameStrings(m.loraRunning, o.loraRunning) && sameStrings(m.loraWaiting, o.loraWaiting) &&
		m.kvOffload == o.kvOffload && m.gpu == o.gpu && string(m.gpuRest) == string(o.gpuRest)
}

// sameStrings is slices.Equal telling nil from empty, so that a sample
// reads back as it was recorded.
func sameStrings(a, b []string) bool { return (a == nil) == (b == nil) && slices.Equal(a, b) }

// row writes s's figures (its fixed ones f) into row (len l.cols) in
// column order; s fits l.
func (l *layout) row(f []float64, s *sample.Sample, row []float64) {
	for c, slot := range l.slots {
		row[c] = f[slot]
	}
	for h, hist := range s.Hists {
		if hist == nil {
			continue
		}
		at := l.at[h]
		row[at], row[at+1] = hist.Sum, hist.Count
		copy(row[at+2:], hist.Counts)
	}
}

func value(p *float64) float64 {
	if p == nil {
		return absent
	}
	return *p
}

// sampleOf makes the sample of row, meta m and time at under l.
func (l *layout) sampleOf(at int64, m *meta, row []float64) *sample.Sample {
	s := &sample.Sample{
		At: time.Unix(0, at), Up: m.up, Engine: m.engine, Model: m.model, CountersCreated: m.created,
		DataParallel: m.dp, TensorParallel: m.tp, PipelineParallel: m.pp, ExpertParallel: m.ep,
		Role: m.role, RoleSource: m.roleSource, Errors: m.errors, Warnings: m.warnings,
	}
	s.Effects.LoRARunning, s.Effects.LoRAWaiting, s.Effects.KVOffload = m.loraRunning, m.loraWaiting, m.kvOffload
	f := make([]float64, nFixed)
	for i := range f {
		f[i] = absent
	}
	for c, slot := range l.slots {
		f[slot] = row[c]
	}
	// The optional figures share one allocation.
	n := 0
	for _, v := range f[:totalsAt] {
		if !isAbsent(v) {
			n++
		}
	}
	vals := make([]float64, 0, n)
	for i, get := range scalars {
		if v := f[i]; !isAbsent(v) {
			vals = append(vals, v)
			*get(s) = &vals[len(vals)-1]
		}
	}
	for h := range s.Totals {
		if sum := f[totalsAt+2*h]; !isAbsent(sum) {
			s.Totals[h] = &sample.Total{Sum: sum, Count: f[totalsAt+2*h+1]}
		}
	}
	if m.gpu {
		g := &llmdiagv1.GPUMetrics{}
		// Marshalled by metaOf from a message of this type: it reads back.
		_ = proto.Unmarshal(m.gpuRest, g)
		r := g.ProtoReflect()
		for i, fd := range gpuFields {
			if v := f[gpuAt+i]; !isAbsent(v) {
				r.Set(fd, protoreflect.ValueOfFloat64(v))
			}
		}
		s.GPU = g
	}
	for h, b := range l.bounds {
		if b == nil {
			continue
		}
		at := l.at[h]
		s.Hists[h] = &sample.Histogram{Bounds: b, Counts: slices.Clone(row[at+2 : at+2+len(b)]), Sum: row[at], Count: row[at+1]}
	}
	return s
}
