package histogram

import (
	"bufio"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/sample"
)

var inf = math.Inf(+1)

// sameFloat reports whether got matches want: both NaN, equal (infinities
// included), or within a relative 1e-9 (Prometheus's expectations are
// printed with limited digits; promqltest itself allows 1e-6).
func sameFloat(got, want float64) bool {
	switch {
	case math.IsNaN(want) || math.IsNaN(got):
		return math.IsNaN(want) && math.IsNaN(got)
	case got == want:
		return true
	case want == 0:
		return math.Abs(got) < 1e-12
	}
	return math.Abs(got-want)/math.Abs(want) < 1e-9
}

func bk(pairs ...float64) []Bucket {
	bs := make([]Bucket, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		bs = append(bs, Bucket{UpperBound: pairs[i], Count: pairs[i+1]})
	}
	return bs
}

// TestQuantileByHand checks values and bucket bounds worked out by hand.
func TestQuantileByHand(t *testing.T) {
	nan := math.NaN()
	// vLLM TTFT from testdata/vllm-v1-dynamo-metrics_examples.prom: the only
	// non-empty buckets are le=0.02 (1 observation) and le=0.5 (the second).
	ttft := bk(0.001, 0, 0.005, 0, 0.01, 0, 0.02, 1, 0.04, 1, 0.06, 1, 0.08, 1, 0.1, 1, 0.25, 1, 0.5, 2, 0.75, 2, 1, 2, 2.5, 2, inf, 2)
	tests := []struct {
		name                string
		q                   float64
		buckets             []Bucket
		value, lower, upper float64
	}{
		// rank 0.5·2 = 1 → first bucket with count ≥ 1 is le=0.02, previous
		// bound 0.01 with count 0: 0.01 + 0.01·(1/1) = 0.02.
		{"vllm ttft p50", 0.5, ttft, 0.02, 0.01, 0.02},
		// rank 1.9 → le=0.5 (count 2), previous le=0.25 count 1:
		// 0.25 + 0.25·(0.9/1) = 0.475.
		{"vllm ttft p95", 0.95, ttft, 0.475, 0.25, 0.5},
		// rank 1.98 → 0.25 + 0.25·0.98 = 0.495.
		{"vllm ttft p99", 0.99, ttft, 0.495, 0.25, 0.5},
		// First bucket with a positive bound interpolates from 0:
		// rank 0.5·4 = 2 in le=1 (count 4): 0 + 1·(2/4) = 0.5.
		{"first bucket from zero", 0.5, bk(1, 4, 2, 4, inf, 4), 0.5, 0, 1},
		// rank 0.9·10 = 9 > 8 = count of the last finite bucket: +Inf bucket,
		// value is the largest finite bound.
		{"in +Inf bucket", 0.9, bk(1, 4, 2, 8, inf, 10), 2, 2, inf},
		// SGLang queue_time has a le="0.0" bucket: a quantile there is 0.
		{"le=0 bucket", 0.5, bk(0, 3, 0.1, 4, inf, 4), 0, math.Inf(-1), 0},
		// Unsorted input is sorted first: same as bk(1,4,2,8,inf,10),
		// rank 6 in le=2: 1 + 1·(2/4) = 1.5.
		{"unsorted", 0.6, bk(inf, 10, 2, 8, 1, 4), 1.5, 1, 2},
		// Duplicate bounds are merged: le=1 becomes 2+2 = 4.
		{"duplicate bounds", 0.6, bk(1, 2, 1, 2, 2, 8, inf, 10), 1.5, 1, 2},
		// The bucket is found by the first count ≥ rank: rank 4 is reached
		// exactly at le=1.
		{"rank on a boundary", 0.4, bk(1, 4, 2, 8, inf, 10), 1, 0, 1},
		{"single bucket", 0.5, bk(inf, 5), nan, nan, nan},
		{"no buckets", 0.5, nil, nan, nan, nan},
		{"no +Inf bucket", 0.5, bk(1, 1, 2, 2), nan, nan, nan},
		{"no observations", 0.5, bk(1, 0, inf, 0), nan, nan, nan},
		{"q below 0", -0.5, bk(1, 1, inf, 1), math.Inf(-1), nan, nan},
		{"q above 1", 1.5, bk(1, 1, inf, 1), inf, nan, nan},
		{"q NaN", nan, bk(1, 1, inf, 1), nan, nan, nan},
		// q=0 with an empty first bucket is 0/0: NaN, as in Prometheus.
		{"q=0 empty first bucket", 0, bk(1, 0, 2, 1, inf, 1), nan, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.buckets)
			got := Quantile(tc.q, tc.buckets)
			if !sameFloat(got.Value, tc.value) || !sameFloat(got.Lower, tc.lower) || !sameFloat(got.Upper, tc.upper) {
				t.Errorf("Quantile(%v) = %v in [%v, %v], want %v in [%v, %v]",
					tc.q, got.Value, got.Lower, got.Upper, tc.value, tc.lower, tc.upper)
			}
			if !slices.Equal(in, tc.buckets) {
				t.Errorf("Quantile modified its input: %v, was %v", tc.buckets, in)
			}
		})
	}
}

// TestQuantilePrometheus compares against the results Prometheus's own tests
// expect (testdata/promql.txt).
func TestQuantilePrometheus(t *testing.T) {
	f, err := os.Open("testdata/promql.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	var scratch []Bucket
	for line := 0; sc.Scan(); {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "|")
		if len(fields) < 4 {
			t.Fatalf("line %d: want name | q | buckets | want, got %q", line, text)
		}
		name := strings.TrimSpace(fields[0])
		q := mustFloat(t, line, fields[1])
		want := mustFloat(t, line, fields[3])
		var flags string
		if len(fields) > 4 {
			flags = strings.TrimSpace(fields[4])
		}
		var buckets []Bucket
		for _, pair := range strings.Fields(fields[2]) {
			le, count, ok := strings.Cut(pair, ":")
			if !ok {
				t.Fatalf("line %d: bucket %q is not le:count", line, pair)
			}
			buckets = append(buckets, Bucket{UpperBound: mustFloat(t, line, le), Count: mustFloat(t, line, count)})
		}
		n++
		t.Run(name, func(t *testing.T) {
			got := Quantile(q, buckets)
			// The same from buckets prepared in scratch that earlier cases
			// used, whatever its length.
			h := &sample.Histogram{}
			for _, b := range buckets {
				h.Bounds, h.Counts = append(h.Bounds, b.UpperBound), append(h.Counts, b.Count)
			}
			if into := PrepareHistogramInto(h, &scratch).Quantile(q); !sameEstimate(into, got) {
				t.Errorf("PrepareHistogramInto: %+v, Quantile %+v", into, got)
			}
			if !sameFloat(got.Value, want) {
				t.Errorf("Quantile(%v) = %v, Prometheus gives %v", q, got.Value, want)
			}
			if got.ForcedMonotonic != (flags == "forced") || got.FixedPrecision != (flags == "fixed") {
				t.Errorf("forced=%v fixed=%v, want flags %q", got.ForcedMonotonic, got.FixedPrecision, flags)
			}
			if !math.IsNaN(got.Value) && !math.IsInf(got.Value, 0) &&
				!(got.Lower <= got.Value && got.Value <= got.Upper) {
				t.Errorf("value %v outside its bucket [%v, %v]", got.Value, got.Lower, got.Upper)
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("read %d cases, want at least 50", n)
	}
}

// sameEstimate: the same bits in every field, NaN for NaN.
func sameEstimate(a, b Estimate) bool {
	same := func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || (math.IsNaN(x) && math.IsNaN(y))
	}
	return same(a.Value, b.Value) && same(a.Lower, b.Lower) && same(a.Upper, b.Upper) &&
		a.ForcedMonotonic == b.ForcedMonotonic && a.FixedPrecision == b.FixedPrecision
}

func mustFloat(t *testing.T, line int, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		t.Fatalf("line %d: %v", line, err)
	}
	return v
}
