package ring_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/simtest"
	"github.com/llmdiag/llmdiag/metrics"
	"github.com/llmdiag/llmdiag/sample"
	"github.com/llmdiag/llmdiag/sim"
	"github.com/llmdiag/llmdiag/source/scrape/ring"
)

// step is the interval the recorded rings were scraped at.
const step = 5 * time.Second

// recording is the seed simulator's five nodes (with DCGM) read every 5 s
// for span, as the scraper reads them (engine.Extract, engine.ExtractGPU),
// at times 5 s apart with up to 3 ms of jitter.
func recording(t testing.TB, span time.Duration) map[string][]*sample.Sample {
	t.Helper()
	recMu.Lock()
	defer recMu.Unlock()
	if rec, ok := recorded[span]; ok {
		return rec
	}
	cfg := simtest.Scenario(t, "seed", 1)
	cfg.Warmup = 2 * time.Minute
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	out := map[string][]*sample.Sample{}
	memo := engine.NewSeriesMemo() // as the scraper parses
	for i := range int(span / step) {
		f.Step(step)
		at := start.Add(time.Duration(i)*step + time.Duration(rng.Int64N(int64(3*time.Millisecond))))
		for _, id := range f.Nodes() {
			body, err := f.Metrics(id)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := engine.ParseMemo(bytes.NewReader(body), engine.Limits{}, memo)
			if err != nil {
				t.Fatal(err)
			}
			eng := engine.Detect(exp.Families)
			s := engine.Extract(eng, exp.Families, at)
			s.Up = true
			s.Warnings = exp.Warnings
			if d, err := f.DCGM(id); err == nil && len(d) > 0 {
				gexp, err := engine.Parse(bytes.NewReader(d), engine.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				s.GPU, _ = engine.ExtractGPU(gexp.Families)
			}
			out[id] = append(out[id], s)
		}
	}
	recorded[span] = out
	return out
}

// recorded holds the recordings made, by span: the tests share them.
var (
	recMu    sync.Mutex
	recorded = map[time.Duration]map[string][]*sample.Sample{}
)

// span is how long the tests' recording lasts: past the 1h kept, or 20m
// (past the 6m kept whole) with -short.
func span() time.Duration {
	if testing.Short() {
		return 20 * time.Minute
	}
	return 70 * time.Minute
}

// same reports how got differs from want, "" when it reads back whole.
func same(want, got *sample.Sample) string {
	if !want.At.Equal(got.At) {
		return fmt.Sprintf("at %v, want %v", got.At, want.At)
	}
	w, g := *want, *got
	w.At, g.At = time.Time{}, time.Time{}
	return cmp.Diff(&w, &g, protocmp.Transform(), bits)
}

// sameBytes reports whether a and b marshal alike: bit for bit, faster
// than cmp.
func sameBytes(a, b proto.Message) bool {
	opts := proto.MarshalOptions{Deterministic: true}
	x, err1 := opts.Marshal(a)
	y, err2 := opts.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// bits compares floats bit for bit (NaN equals the same NaN).
var bits = cmp.Comparer(func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) })

// TestReadsBack: every sample kept reads back as it was appended, bit for
// bit, over an hour and ten minutes of the seed fleet; the newest is the
// one given.
func TestReadsBack(t *testing.T) {
	rec := recording(t, span())
	for id, samples := range rec {
		r := ring.New(ring.Options{})
		byTime := map[int64]*sample.Sample{}
		for _, s := range samples {
			r.Append(s)
			byTime[s.At.UnixNano()] = s
		}
		kept := r.Samples()
		if len(kept) < 60 || len(kept) > 200 || len(kept) >= len(samples) {
			t.Errorf("%s: %d samples kept, want the last 6m whole and one a minute back to 1h (about 130)", id, len(kept))
		}
		for _, k := range kept {
			if d := same(byTime[k.At.UnixNano()], k); d != "" {
				t.Fatalf("%s: sample at %v reads back otherwise (-want +got):\n%s", id, k.At, d)
			}
		}
		if r.Newest() != samples[len(samples)-1] {
			t.Errorf("%s: Newest is not the sample appended last", id)
		}
	}
}

// everything is a sample with every field set: a field the ring does not
// keep fails TestEveryFieldKept.
func everything(t *testing.T, seed uint64) *sample.Sample {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := &sample.Sample{}
	fill(t, reflect.ValueOf(s).Elem(), rng)
	s.At = time.Unix(0, 1e18+int64(seed)*int64(5*time.Second))
	return s
}

func fill(t *testing.T, v reflect.Value, rng *rand.Rand) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1e9+rng.Int64N(1e6), 0)))
			return
		}
		for i := range v.NumField() {
			fill(t, v.Field(i), rng)
		}
	case reflect.Pointer:
		if v.Type() == reflect.TypeFor[*llmdiagv1.GPUMetrics]() {
			g := &llmdiagv1.GPUMetrics{Gpus: 8, ModelName: "H100", XidRead: true, ClockEventReasons: []string{"sw_power_cap"},
				ThrottledGpus: []string{"3"}, ClockEventMask: proto.Uint64(4),
				XidErrors: []*llmdiagv1.GPUXid{{Gpu: "3", Xid: 79, Last: true, Count: proto.Uint64(2)}}}
			r := g.ProtoReflect()
			for i, f := 0, r.Descriptor().Fields(); i < f.Len(); i++ {
				if fd := f.Get(i); fd.Kind().String() == "double" {
					r.Set(fd, protoreflect.ValueOfFloat64(rng.Float64()*100))
				}
			}
			v.Set(reflect.ValueOf(g))
			return
		}
		if v.Type() == reflect.TypeFor[*sample.Histogram]() {
			h := &sample.Histogram{Bounds: []float64{0.1, 1, math.Inf(1)}, Counts: []float64{1, 2, 3}, Sum: rng.Float64(), Count: 3}
			v.Set(reflect.ValueOf(h))
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), rng)
		v.Set(p)
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), rng)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			t.Fatalf("a sample field of type %s: teach fill (and the ring) about it", v.Type())
		}
		v.Set(reflect.ValueOf([]string{fmt.Sprint(rng.IntN(3)), "b"}))
	case reflect.Float64:
		v.SetFloat(rng.Float64() * 1e6)
	case reflect.Int, reflect.Int32:
		v.SetInt(1 + rng.Int64N(8))
	case reflect.String:
		v.SetString(fmt.Sprint("s", rng.IntN(2)))
	case reflect.Bool:
		v.SetBool(true)
	default:
		t.Fatalf("a sample field of kind %s: teach fill (and the ring) about it", v.Kind())
	}
}

// TestEveryFieldKept: a sample with every field set reads back whole, so
// a field added to sample.Sample and not to the ring fails here.
func TestEveryFieldKept(t *testing.T) {
	r := ring.New(ring.Options{})
	var in []*sample.Sample
	for i := range 40 {
		s := everything(t, uint64(i))
		if i%3 == 1 { // some concepts absent: UNKNOWN reads back nil
			s.Queue, s.Hists[sample.ITL], s.Totals[sample.E2E], s.GPU = nil, nil, nil, nil
		}
		in = append(in, s)
		r.Append(s)
	}
	kept := r.Samples()
	if len(kept) != len(in) {
		t.Fatalf("%d samples kept of %d within 6m", len(kept), len(in))
	}
	for i, k := range kept {
		if d := same(in[i], k); d != "" {
			t.Fatalf("sample %d reads back otherwise (-want +got):\n%s", i, d)
		}
	}
}

// TestWindowsAsBefore compares the ring with keeping every sample (the
// reference: metrics.Pick over the last hour's samples) over the seed
// fleet's recorded hour and ten minutes, at every refresh: 1m, 5m and the
// lifetime read the same samples, so the same indicators, bit for bit;
// 30m and 1h start at a sample less than Step (1m) before the
// reference's (1h, at the oldest kept: less than Step and an interval
// after), and their indicators are those of the samples picked.
func TestWindowsAsBefore(t *testing.T) {
	rec := recording(t, span())
	now := func(s *sample.Sample) time.Time { return s.At.Add(time.Second) }
	for id, samples := range rec {
		r := ring.New(ring.Options{})
		var all []*sample.Sample
		for i, s := range samples {
			r.Append(s)
			all = append(all, s)
			for len(all) > 720 || s.At.Sub(all[0].At) > time.Hour {
				all = all[1:]
			}
			for _, w := range []struct {
				name  string
				d     time.Duration
				exact bool
			}{{"1m", time.Minute, true}, {"5m", 5 * time.Minute, true}, {metrics.Lifetime, 0, true}, {"30m", 30 * time.Minute, false}, {"1h", time.Hour, false}} {
				if !w.exact && i%12 != 0 {
					continue // once a minute: these read back decoded samples
				}
				wantN, wantB := metrics.Pick(all, w.d)
				if w.d == 0 {
					wantN, wantB = all[len(all)-1], nil
				}
				gotN, gotB := r.Window(time.Time{}, w.d)
				if gotN != wantN {
					t.Fatalf("%s at %d, %s: newest is not the sample appended last", id, i, w.name)
				}
				if (gotB == nil) != (wantB == nil) {
					t.Fatalf("%s at %d, %s: base %v, want %v", id, i, w.name, gotB, wantB)
				}
				if gotB == nil {
					continue
				}
				// Earlier by less than a minute; at the reference's oldest
				// (the last 720 samples), up to a minute and an interval
				// later.
				off, least := wantB.At.Sub(gotB.At), time.Duration(0)
				if wantB == all[0] {
					least = -(time.Minute + step + 3*time.Millisecond) + 1
				}
				if w.exact && off != 0 || off < least || off >= time.Minute {
					t.Fatalf("%s at %d, %s: base at %v, want %v (exact %v)", id, i, w.name, gotB.At, wantB.At, w.exact)
				}
				// The indicators are those of the samples picked, bit for bit.
				var orig *sample.Sample
				for _, s := range samples {
					if s.At.Equal(gotB.At) {
						orig = s
					}
				}
				want := metrics.Compute(wantN, orig, w.name, nil, now(s), 30*time.Second)
				got := metrics.Compute(gotN, gotB, w.name, nil, now(s), 30*time.Second)
				if !sameBytes(want, got) {
					t.Fatalf("%s at %d, %s: indicators differ (-want +got):\n%s", id, i, w.name, cmp.Diff(want, got, protocmp.Transform(), bits))
				}
			}
		}
	}
}

// TestOffsetWindow: a window ending in the past ends at the latest sample
// kept at or before then, read back whole.
func TestOffsetWindow(t *testing.T) {
	var in []*sample.Sample
	r := ring.New(ring.Options{})
	for i := range 30 {
		s := everything(t, uint64(i))
		in = append(in, s)
		r.Append(s)
	}
	until := in[20].At.Add(time.Second)
	n, b := r.Window(until, time.Minute)
	if d := same(in[20], n); d != "" {
		t.Fatalf("newest (-want +got):\n%s", d)
	}
	if d := same(in[8], b); d != "" {
		t.Fatalf("base (-want +got):\n%s", d)
	}
	if n, b := r.Window(in[0].At.Add(-time.Second), time.Minute); n != nil || b != nil {
		t.Errorf("a window before the first sample: %v, %v; want none", n, b)
	}
}
