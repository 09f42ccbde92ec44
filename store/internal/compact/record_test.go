package compact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/diagnose/diagnosetest"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/histogram"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/storetest"
)

// wire is m marshalled deterministically: equal bytes mean equal bits,
// NaN payloads and unknown fields included.
func wire(t testing.TB, m proto.Message) []byte {
	t.Helper()
	if m == nil {
		return nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func recordWire(t testing.TB, r *store.Record) [3]string {
	var w [3]string
	if r.Node != nil {
		w[0] = "+" + string(wire(t, r.Node))
	}
	if r.Metrics != nil {
		w[1] = "+" + string(wire(t, r.Metrics))
	}
	if r.Diagnosis != nil {
		w[2] = "+" + string(wire(t, r.Diagnosis))
	}
	return w
}

// roundTrip encodes and decodes rec and checks nothing changed, rec
// included; it returns the encoded size. The decoded record may match rec
// or its proto.Clone copy (Clone turns a proto3 double -0 into 0): either is
// fine.
func roundTrip(t testing.TB, c *Codec, id string, rec *store.Record) int {
	t.Helper()
	unchanged := recordWire(t, rec)
	before := recordWire(t, clone(rec))
	b, err := c.Encode(id, rec)
	if err != nil {
		t.Fatal(err)
	}
	if after := recordWire(t, rec); after != unchanged {
		t.Fatalf("Encode modified its record")
	}
	got, err := c.Decode(id, b)
	if err != nil {
		t.Fatal(err)
	}
	if w := recordWire(t, got); w != before && w != unchanged {
		for i, name := range []string{"Node", "Metrics", "Diagnosis"} {
			if w[i] != before[i] {
				t.Errorf("%s differs after the round trip", name)
			}
		}
		t.Fatalf("record %q differs:\ngot  %v\nwant %v", id, got, rec)
	}
	// Messages decoded are the caller's: no two share a sub-message.
	if got.Node != nil && got.Metrics != nil {
		if got.Node.Staleness != nil && got.Node.Staleness == got.Metrics.Staleness ||
			got.Node.LastSeen != nil && got.Node.LastSeen == got.Metrics.ObservedAt {
			t.Fatal("decoded Node shares a message with Metrics")
		}
	}
	return len(b)
}

func TestRecordRoundTripFleet(t *testing.T) {
	var c Codec
	var total, plain int
	const nodes = 300
	storetest.Fleet(nodes, func(int) int { return 40 }, func(i int, n storetest.Node) {
		total += roundTrip(t, &c, n.Record.Node.GetId(), n.Record)
		plain += proto.Size(n.Record.Node) + proto.Size(n.Record.Metrics) + proto.Size(n.Record.Diagnosis)
	})
	phrases, phraseBytes := 0, 0
	if ps := c.dict.phrases.Load(); ps != nil {
		for _, p := range *ps {
			phrases++
			phraseBytes += len(p)
		}
	}
	t.Logf("%d B per record encoded, %d B as plain protobuf; %d lists and %d phrases (%d B) in the dict",
		total/nodes, plain/nodes, c.dict.Lists(), phrases, phraseBytes)
	if total*2 > plain {
		t.Errorf("encoded %d B per record, more than half of plain protobuf's %d B", total/nodes, plain/nodes)
	}
	if c.dict.Lists() != 4 { // three bucket layouts, one quantile list
		t.Errorf("dict holds %d lists, want 4", c.dict.Lists())
	}
}

func TestRecordRoundTripOddities(t *testing.T) {
	seed := func() *store.Record {
		m := diagnosetest.SeedMetrics()
		d := diagnose.Diagnose(diagnosetest.SeedInput(), diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
		n := &llmdiagv1.Node{
			Id: m.Node, Model: m.Model, Engine: m.Engine, Profile: diagnosetest.SeedProfile(),
			Status: d.Status, RootCause: d.RootCause, Routable: d.Routable, LoadScore: d.LoadScore,
			Staleness: m.Staleness, LastSeen: m.ObservedAt, Url: "http://x:8000/metrics",
		}
		return &store.Record{Node: n, Metrics: m, Diagnosis: d}
	}
	nan := math.Float64frombits(0x7ff8_0000_0000_0bad)
	unknown := protowire.AppendTag(nil, 999, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 42)
	tests := []struct {
		name   string
		id     string
		modify func(r *store.Record)
	}{
		{"seed", "deepseek-v4-node-01", func(*store.Record) {}},
		{"empty record", "x", func(r *store.Record) { *r = store.Record{} }},
		{"node only", "x", func(r *store.Record) { r.Metrics, r.Diagnosis = nil, nil }},
		{"metrics only", "deepseek-v4-node-01", func(r *store.Record) { r.Node, r.Diagnosis = nil, nil }},
		{"empty id", "", func(r *store.Record) { r.Node.Id, r.Metrics.Node, r.Diagnosis.Node = "", "", "" }},
		{"key differs from ids", "other", func(*store.Record) {}},
		{"nothing shared", "deepseek-v4-node-01", func(r *store.Record) {
			r.Node.Model, r.Node.Engine = "other-model", llmdiagv1.Engine_ENGINE_SGLANG
			r.Node.Staleness, r.Node.LastSeen = durationpb.New(time.Hour), timestamppb.New(time.Unix(1, 2))
			r.Diagnosis.Node, r.Diagnosis.Model, r.Diagnosis.Window = "d", "dm", "1h"
			r.Diagnosis.Engine = llmdiagv1.Engine_ENGINE_TGI
			r.Diagnosis.ObservedAt, r.Diagnosis.Staleness = timestamppb.New(time.Unix(3, 4)), durationpb.New(time.Minute)
			r.Diagnosis.Status, r.Diagnosis.RootCause = llmdiagv1.Status_STATUS_CRIT, llmdiagv1.Cause_CAUSE_OVERLOADED
			r.Diagnosis.Routable, r.Diagnosis.LoadScore = !r.Node.Routable, r.Node.LoadScore+1
			r.Diagnosis.Language = llmdiagv1.Language_LANGUAGE_ZH
		}},
		{"stale", "deepseek-v4-node-01", func(r *store.Record) { r.Metrics.Stale, r.Diagnosis.Stale = true, true }},
		{"load score -0 and NaN", "deepseek-v4-node-01", func(r *store.Record) {
			r.Node.LoadScore, r.Diagnosis.LoadScore = math.Copysign(0, -1), nan
		}},
		{"empty distributions", "deepseek-v4-node-01", func(r *store.Record) {
			r.Metrics.Ttft, r.Metrics.QueueTime = &llmdiagv1.Distribution{}, &llmdiagv1.Distribution{Sum: 3}
		}},
		{"no observations", "deepseek-v4-node-01", func(r *store.Record) {
			e := r.Metrics.E2E
			for i := range e.BucketCounts {
				e.BucketCounts[i] = 0
			}
			e.Count, e.Sum, e.Mean = 0, 0, nil
			e.Percentiles = percentiles(e.BucketBounds, e.BucketCounts, []float64{0.5, 0.95, 0.99})
		}},
		{"fractional and decreasing counts", "deepseek-v4-node-01", func(r *store.Record) {
			r.Metrics.Ttft.BucketCounts[3] = 12.5
			r.Metrics.E2E.BucketCounts[5] = 1
			r.Metrics.E2E.BucketCounts[0] = math.Copysign(0, -1)
		}},
		{"odd counts", "deepseek-v4-node-01", func(r *store.Record) {
			r.Metrics.Ttft.BucketCounts = []float64{math.Inf(1), nan, 1 << 60}
			r.Metrics.E2E.BucketCounts = r.Metrics.E2E.BucketCounts[:4]
		}},
		{"percentiles not from the buckets", "deepseek-v4-node-01", func(r *store.Record) {
			r.Metrics.Ttft.Percentiles[1].Value = 1.2345
		}},
		{"other quantiles", "deepseek-v4-node-01", func(r *store.Record) {
			e := r.Metrics.E2E
			e.Percentiles = percentiles(e.BucketBounds, e.BucketCounts, []float64{0.9, 0.999, 0.25, 0.9})
		}},
		{"mean and count not derived", "deepseek-v4-node-01", func(r *store.Record) {
			r.Metrics.E2E.Mean = nanPtr(nan)
			r.Metrics.Ttft.Count = 9999
			r.Metrics.Ttft.Mean = nil
		}},
		{"unknown fields", "deepseek-v4-node-01", func(r *store.Record) {
			r.Metrics.E2E.Percentiles[0].ProtoReflect().SetUnknown(unknown)
			r.Metrics.Ttft.ProtoReflect().SetUnknown(unknown)
			r.Metrics.Staleness.ProtoReflect().SetUnknown(unknown)
			r.Node.ProtoReflect().SetUnknown(unknown)
			r.Diagnosis.Findings[0].ProtoReflect().SetUnknown(unknown)
		}},
		{"odd text", "deepseek-v4-node-01", func(r *store.Record) {
			d := r.Diagnosis
			d.Summary = ""
			d.Evidence = []string{"", "1..2", ",5", "5,", "3.14.15", "12,345.67 tok/s", "0", "007", "數字 42 個 – ≥ 1.5×", "a\x00b 9"}
			d.RuledOut = nil
			d.Recommendations = []string{strings.Repeat("1234567890", 40)}
			d.Findings = append(d.Findings, &llmdiagv1.Finding{}, &llmdiagv1.Finding{Evidence: []string{"", ""}})
		}},
		{"unknown field on a shared time", "deepseek-v4-node-01", func(r *store.Record) {
			r.Node.LastSeen = timestamppb.New(r.Metrics.ObservedAt.AsTime())
			r.Node.LastSeen.ProtoReflect().SetUnknown(unknown)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Codec
			r := seed()
			tc.modify(r)
			roundTrip(t, &c, tc.id, r)
			// Encoding the same again shares the dict's lists.
			roundTrip(t, &c, tc.id, r)
		})
	}
}

func clone(r *store.Record) *store.Record {
	out := &store.Record{}
	if r.Node != nil {
		out.Node = cloneOf(r.Node)
	}
	if r.Metrics != nil {
		out.Metrics = cloneOf(r.Metrics)
	}
	if r.Diagnosis != nil {
		out.Diagnosis = cloneOf(r.Diagnosis)
	}
	return out
}

func TestRecordDictFull(t *testing.T) {
	var c Codec
	for i := range maxDictPhrases {
		c.dict.phraseID(fmt.Sprint("phrase ", i))
	}
	for i := range maxDictLists {
		c.dict.id([]float64{float64(i)})
	}
	storetest.Fleet(20, func(int) int { return 3 }, func(_ int, n storetest.Node) {
		roundTrip(t, &c, n.Record.Node.GetId(), n.Record)
	})
}

func nanPtr(v float64) *float64 { return &v }

func TestRecordDecodeErrors(t *testing.T) {
	var c, other Codec
	n := storetest.MakeNode(1, 2, nil)
	b, err := c.Encode(n.Record.Node.GetId(), n.Record)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Decode("x", b); err == nil {
		t.Error("a record decoded with another codec's dict")
	}
	for i := range len(b) {
		if _, err := c.Decode("x", b[:i]); err == nil {
			t.Fatalf("a record cut to %d of %d bytes decoded", i, len(b))
		}
	}
}

// FuzzRecord round-trips records whose NodeMetrics are arbitrary protobuf.
func FuzzRecord(f *testing.F) {
	storetest.Fleet(10, func(int) int { return 3 }, func(_ int, n storetest.Node) {
		b, _ := proto.Marshal(n.Record.Metrics)
		f.Add(b)
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &llmdiagv1.NodeMetrics{}
		if proto.Unmarshal(b, m) != nil {
			return
		}
		var c Codec
		d := diagnose.Diagnose(diagnose.Input{Metrics: m}, diagnose.DefaultThresholds(), llmdiagv1.Language_LANGUAGE_EN)
		n := &llmdiagv1.Node{Id: m.Node, Model: m.Model, Status: d.Status, LoadScore: d.LoadScore, LastSeen: m.ObservedAt}
		roundTrip(t, &c, m.Node, &store.Record{Node: n, Metrics: m, Diagnosis: d})
		if _, err := c.Decode(m.Node, b); err == nil && len(b) > 0 && b[0] != recordVersion {
			t.Fatal("decoded bytes of another format")
		}
	})
}

// TestQuantileMatchesHistogram checks the shortcut against histogram.Quantile
// (the store would only be less compact if they differed, never wrong).
func TestQuantileMatchesHistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	bounds := []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, math.Inf(1)}
	for range 20000 {
		counts := make([]float64, len(bounds))
		c := 0.0
		for i := range counts {
			if r.IntN(3) > 0 {
				c += float64(r.IntN(1 << uint(r.IntN(20))))
			}
			counts[i] = c
		}
		if r.IntN(5) == 0 {
			bounds[0] = -1
		} else {
			bounds[0] = 0.3
		}
		if !plainBuckets(bounds, counts) {
			continue
		}
		buckets := histogram.Buckets(&sample.Histogram{Bounds: bounds, Counts: counts})
		for _, q := range []float64{0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1, r.Float64()} {
			got, want := quantile(q, bounds, counts), histogram.Quantile(q, buckets)
			bits := math.Float64bits
			if bits(got.Value) != bits(want.Value) || bits(got.Lower) != bits(want.Lower) || bits(got.Upper) != bits(want.Upper) {
				t.Fatalf("q %v of %v: %+v, histogram.Quantile %+v", q, counts, got, want)
			}
		}
	}
}

// fill sets every field of m, and of the messages it holds down to depth,
// to a value other than its default: two elements in lists, one entry in
// maps, values that grow with seq so that no two fields read the same.
func fill(m protoreflect.Message, depth int, seq *int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		*seq++
		scalar := func() protoreflect.Value {
			switch fd.Kind() {
			case protoreflect.BoolKind:
				return protoreflect.ValueOfBool(true)
			case protoreflect.EnumKind:
				return protoreflect.ValueOfEnum(protoreflect.EnumNumber(1 + *seq%2))
			case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
				return protoreflect.ValueOfInt32(int32(*seq))
			case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
				return protoreflect.ValueOfInt64(int64(*seq))
			case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
				return protoreflect.ValueOfUint32(uint32(*seq))
			case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
				return protoreflect.ValueOfUint64(uint64(*seq))
			case protoreflect.FloatKind:
				return protoreflect.ValueOfFloat32(float32(*seq) + 0.5)
			case protoreflect.DoubleKind:
				return protoreflect.ValueOfFloat64(float64(*seq) + 0.25)
			case protoreflect.StringKind:
				return protoreflect.ValueOfString(fmt.Sprintf("%s %d", fd.Name(), *seq))
			case protoreflect.BytesKind:
				return protoreflect.ValueOfBytes([]byte{byte(*seq)})
			}
			return protoreflect.Value{}
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range 2 {
				if fd.Message() != nil {
					if depth > 0 {
						e := l.NewElement()
						fill(e.Message(), depth-1, seq)
						l.Append(e)
					}
					continue
				}
				l.Append(scalar())
				*seq++
			}
		case fd.IsMap():
			// No message of the record has a map today; a map added later
			// is caught by the round trip staying empty here: nothing to
			// fill, nothing lost.
		case fd.Message() != nil:
			if depth > 0 {
				fill(m.Mutable(fd).Message(), depth-1, seq)
			}
		default:
			m.Set(fd, scalar())
		}
	}
}

// TestRecordKeepsEveryField: a Diagnosis with every field set (its
// findings' too), alone and beside the Node and NodeMetrics whose copies
// it carries, comes back whole, unknown fields included: what Encode
// writes of a diagnosis besides its text (textless) misses no field.
func TestRecordKeepsEveryField(t *testing.T) {
	seq := 0
	d := &llmdiagv1.Diagnosis{}
	fill(d.ProtoReflect(), 3, &seq)
	if len(d.Findings) != 2 || d.Findings[0].GetSlo() == nil || d.GetObservedAt() == nil {
		t.Fatalf("fill left the diagnosis short: %v", d)
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 42)
	d.ProtoReflect().SetUnknown(unknown)
	d.Findings[1].ProtoReflect().SetUnknown(unknown)
	var c Codec
	roundTrip(t, &c, "alone", &store.Record{Diagnosis: d})
	var n storetest.Node
	storetest.Fleet(1, func(int) int { return 1 }, func(_ int, node storetest.Node) { n = node })
	rec := n.Record
	rec.Diagnosis = d
	roundTrip(t, &c, rec.Node.GetId(), rec)
	// And with the fields it shares with them the same as theirs.
	d = proto.Clone(d).(*llmdiagv1.Diagnosis)
	d.Node, d.Model, d.Engine, d.Window = rec.Metrics.Node, rec.Metrics.Model, rec.Metrics.Engine, rec.Metrics.Window
	d.ObservedAt, d.Staleness, d.Stale = rec.Metrics.ObservedAt, rec.Metrics.Staleness, rec.Metrics.Stale
	d.Status, d.RootCause, d.Routable, d.LoadScore = rec.Node.Status, rec.Node.RootCause, rec.Node.Routable, rec.Node.LoadScore
	rec.Diagnosis = d
	roundTrip(t, &c, rec.Node.GetId(), rec)
}
