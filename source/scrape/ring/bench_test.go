package ring_test

import (
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/source/scrape/ring"
)

// BenchmarkRing keeps the seed fleet's recorded hour (its five nodes,
// with DCGM, every 5 s) in rings, with the defaults (every sample of the
// last 6m, the first of each minute back to 1h):
//
//   - append: ns/op is one Append at a full ring;
//   - window=5m, window=1h: ns/op is one Window, the base read back.
func BenchmarkRing(b *testing.B) {
	rec, ids := benchRecording(b)
	// Every sample but the last: append appends it again and again.
	fill := func() []*ring.Ring { return fillRings(rec, ids, 1) }
	b.Run("append", func(b *testing.B) {
		rs := fill()
		for i := 0; b.Loop(); i++ {
			r := rs[i%len(rs)]
			last := rec[ids[i%len(rs)]]
			s := *last[len(last)-1]
			s.At = s.At.Add(time.Duration(i) * 5 * time.Second)
			r.Append(&s)
		}
	})
	for _, w := range []time.Duration{5 * time.Minute, time.Hour} {
		b.Run("window="+w.String(), func(b *testing.B) {
			rs := fill()
			for i := 0; b.Loop(); i++ {
				if _, base := rs[i%len(rs)].Window(time.Time{}, w); base == nil {
					b.Fatal("no base")
				}
			}
		})
	}
}

// BenchmarkRingMemory keeps the recording of BenchmarkRing in rings and
// reports the heap they hold: live-B/node, per node (runtime.GC,
// HeapAlloc after less before), and kept/node the samples kept;
// live-B/sample-before is what the same samples take as Go values, every
// one kept (the ring before: a slice of *sample.Sample), and
// live-B/sample-after the ring's per sample kept. Run it with
// -benchtime 1x.
func BenchmarkRingMemory(b *testing.B) {
	rec, ids := benchRecording(b)
	fill := func() []*ring.Ring { return fillRings(rec, ids, 0) }
	{
		for b.Loop() {
			before := live()
			rs := fill()
			after := live()
			kept := 0
			for _, r := range rs {
				kept += r.Len()
			}
			b.ReportMetric(float64(after-before)/float64(len(rs)), "live-B/node")
			b.ReportMetric(float64(kept)/float64(len(rs)), "kept/node")
			b.ReportMetric(float64(after-before)/float64(kept), "live-B/sample-after")
			runtime.KeepAlive(rs)
			// The same samples as Go values, every one kept (the ring
			// before).
			var all [][]*sample.Sample
			before = live()
			for _, id := range ids {
				all = append(all, cloneAll(b, rec[id]))
			}
			after = live()
			n := 0
			for _, a := range all {
				n += len(a)
			}
			b.ReportMetric(float64(after-before)/float64(n), "live-B/sample-before")
			runtime.KeepAlive(all)
		}
	}
}

// benchRecording is the benchmarks' recording (65 minutes of the seed
// fleet) and its node ids, sorted.
func benchRecording(b *testing.B) (map[string][]*sample.Sample, []string) {
	rec := recording(b, 65*time.Minute)
	ids := make([]string, 0, len(rec))
	for id := range rec {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return rec, ids
}

// fillRings keeps each node's recording in a ring of its own, but for its
// last spare samples.
func fillRings(rec map[string][]*sample.Sample, ids []string, spare int) []*ring.Ring {
	rs := make([]*ring.Ring, len(ids))
	for i, id := range ids {
		rs[i] = ring.New(ring.Options{})
		for _, s := range rec[id][:len(rec[id])-spare] {
			rs[i].Append(s)
		}
	}
	return rs
}

// live is the heap in use after two collections: the first leaves what
// sync.Pools hold (the recording's parse buffers) to the second.
func live() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// cloneAll copies samples deep, so that they take memory of their own as
// the samples the scraper kept did.
func cloneAll(_ *testing.B, samples []*sample.Sample) []*sample.Sample {
	out := make([]*sample.Sample, len(samples))
	for i, s := range samples {
		out[i] = deepCopy(reflect.ValueOf(s)).Interface().(*sample.Sample)
	}
	return out
}

func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		if m, ok := v.Interface().(proto.Message); ok {
			return reflect.ValueOf(proto.Clone(m))
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(deepCopy(v.Elem()))
		return p
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(deepCopy(v.Index(i)))
		}
		return c
	case reflect.Array:
		c := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			c.Index(i).Set(deepCopy(v.Index(i)))
		}
		return c
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return v
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(v) // unexported fields as they are
		for i := range v.NumField() {
			if c.Field(i).CanSet() {
				c.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return c
	}
	return v
}
