package engine

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// crossMemo is a memo every checkSame reads through after its own: it has
// learnt the lines of every body read before, of every engine.
var crossMemo = NewSeriesMemo()

// checkMemo fails t unless ReadRouting of body reads the same through a
// fresh memo, through that memo again (every line known), and through
// crossMemo as without a memo (want, wantErr).
func checkMemo(t *testing.T, body []byte, e llmdiagv1.Engine, lim Limits, want *Routing, wantErr error) {
	t.Helper()
	fresh := NewSeriesMemo()
	for _, m := range []struct {
		name string
		memo *SeriesMemo
	}{{"fresh memo", fresh}, {"learnt memo", fresh}, {"memo of other bodies", crossMemo}} {
		got, err := ReadRouting(bytes.NewReader(body), e, lim, readAt, m.memo)
		if d := routingDiff(got, err, want, wantErr); d != "" {
			t.Errorf("%s: %s through a %s: %s", e, shorten(string(body)), m.name, d)
		}
	}
}

// routingDiff says how two reads differ, "" when they do not.
func routingDiff(a *Routing, aerr error, b *Routing, berr error) string {
	if d, done := errDiff(aerr, berr); done {
		return d
	}
	if err := sameValues(a.values(), b.values()); err != nil {
		return err.Error()
	}
	if !slices.Equal(a.Errors, b.Errors) || !slices.Equal(a.Warnings, b.Warnings) {
		return fmt.Sprintf("errors %q, warnings %q; want %q, %q", a.Errors, a.Warnings, b.Errors, b.Warnings)
	}
	if a.Lines != b.Lines || a.Series != b.Series || a.Stopped != b.Stopped || a.At != b.At || a.Engine != b.Engine {
		return fmt.Sprintf("lines %d series %d stopped %v; want %d %d %v", a.Lines, a.Series, a.Stopped, b.Lines, b.Series, b.Stopped)
	}
	return ""
}

// TestSeriesMemoNextRead: a memo that learnt one exposition reads the next
// (the same series with other values, or lines changed in every way the
// parser tells apart) as a read without it does.
func TestSeriesMemoNextRead(t *testing.T) {
	const waiting0 = `vllm:num_requests_waiting{engine="0",model_name="m"} 2`
	tests := []struct{ name, from, to string }{
		{"values", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} 9.5`},
		{"NaN", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} NaN`},
		{"Inf", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} +Inf`},
		{"negative", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} -1e3`},
		{"exponent", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} 2e-1`},
		{"underscore, refused", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} 1_0`},
		{"hex float, refused", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} 0x1p3`},
		{"hex", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} 0x10`},
		{"not a number", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} many`},
		{"timestamp", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} 3 1700000000000`},
		{"tab before the value", waiting0, "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"}\t3"},
		{"two spaces", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"}  3`},
		{"carriage return", waiting0, "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 3\r"},
		{"brace in the value", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} 3{`},
		{"exemplar", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m"} 3 # {trace_id="a"} 1`},
		{"given twice", waiting0, `vllm:num_requests_waiting{engine="1",model_name="m"} 2`},
		{"another label", waiting0, `vllm:num_requests_waiting{engine="0",model_name="m",x="y"} 2`},
		{"type changed", "# TYPE vllm:num_requests_waiting gauge", "# TYPE vllm:num_requests_waiting counter"},
		{"type repeated", "# TYPE vllm:num_requests_waiting gauge", "# TYPE vllm:num_requests_waiting gauge\n# TYPE vllm:num_requests_waiting counter"},
		{"help changed", "# HELP vllm:num_requests_waiting Requests waiting.", "# HELP vllm:num_requests_waiting Requests \xff waiting."},
		{"indented", waiting0, " " + waiting0},
		{"line dropped", waiting0 + "\n", ""},
	}
	before := []byte(vllmRouting)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(vllmRouting, tc.from) {
				t.Fatalf("%q is not in the exposition", tc.from)
			}
			after := []byte(strings.Replace(vllmRouting, tc.from, tc.to, 1))
			for _, lim := range []Limits{{}, {MaxSeries: 7}, {MaxRankValues: 1}} {
				memo := NewSeriesMemo()
				e := llmdiagv1.Engine_ENGINE_VLLM
				if _, err := ReadRouting(bytes.NewReader(before), e, Limits{}, readAt, memo); err != nil {
					t.Fatal(err)
				}
				want, wantErr := ReadRouting(bytes.NewReader(after), e, lim, readAt, nil)
				got, err := ReadRouting(bytes.NewReader(after), e, lim, readAt, memo)
				if d := routingDiff(got, err, want, wantErr); d != "" {
					t.Errorf("limits %+v: %s", lim, d)
				}
			}
		})
	}
}

// TestSeriesMemoBounded: a memo learns at most MaxMemoLines lines and reads
// on as without it past them.
func TestSeriesMemoBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("# TYPE vllm:num_requests_waiting gauge\n")
	for i := range MaxMemoLines + 100 {
		fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"0\",x=\"%d\"} 1\n", i)
	}
	body := []byte(b.String())
	memo := NewSeriesMemo()
	e := llmdiagv1.Engine_ENGINE_VLLM
	lim := Limits{MaxSeries: 2 * MaxMemoLines}
	want, wantErr := ReadRouting(bytes.NewReader(body), e, lim, readAt, nil)
	for range 2 {
		got, err := ReadRouting(bytes.NewReader(body), e, lim, readAt, memo)
		if d := routingDiff(got, err, want, wantErr); d != "" {
			t.Fatal(d)
		}
	}
	if tab := memo.table.Load(); len(tab.series)+len(tab.meta) != MaxMemoLines {
		t.Errorf("the memo holds %d lines, want %d", len(tab.series)+len(tab.meta), MaxMemoLines)
	}
}

// TestSeriesMemoConcurrentReads: reads through one memo at once (a fleet's
// fast lane), each of an exposition of its own values, read as without it.
func TestSeriesMemoConcurrentReads(t *testing.T) {
	memo := NewSeriesMemo()
	e := llmdiagv1.Engine_ENGINE_VLLM
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				body := []byte(strings.ReplaceAll(vllmRouting, "} 2\n", fmt.Sprintf("} %d\n", g*100+i)))
				want, wantErr := ReadRouting(bytes.NewReader(body), e, Limits{}, readAt, nil)
				got, err := ReadRouting(bytes.NewReader(body), e, Limits{}, readAt, memo)
				if d := routingDiff(got, err, want, wantErr); d != "" {
					t.Errorf("reader %d, read %d: %s", g, i, d)
					return
				}
			}
		})
	}
	wg.Wait()
	if tab := memo.table.Load(); len(tab.series) == 0 {
		t.Error("the memo learnt nothing")
	}
}

// TestParseMemoSame: every exposition in testdata and the simulator's
// parses through a fresh memo, that memo again and one that has learnt all
// the others as without one.
func TestParseMemoSame(t *testing.T) {
	files, err := filepath.Glob("testdata/*.prom")
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{"seed vLLM": seedVLLM(t)}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies[f] = b
	}
	cross := NewSeriesMemo()
	for name, body := range bodies {
		want, wantErr := Parse(bytes.NewReader(body), Limits{})
		fresh := NewSeriesMemo()
		for _, memo := range []*SeriesMemo{fresh, fresh, cross} {
			got, err := ParseMemo(bytes.NewReader(body), Limits{}, memo)
			if d := expositionDiff(got, err, want, wantErr); d != "" {
				t.Errorf("%s: %s", name, d)
			}
		}
	}
}

// expositionDiff says how two parses differ, "" when they do not.
func expositionDiff(a *Exposition, aerr error, b *Exposition, berr error) string {
	if d, done := errDiff(aerr, berr); done {
		return d
	}
	if !maps.EqualFunc(a.Families, b.Families, func(x, y *dto.MetricFamily) bool { return proto.Equal(x, y) }) {
		for k, x := range a.Families {
			if y := b.Families[k]; !proto.Equal(x, y) {
				return fmt.Sprintf("family %s: %v\nwant %v", k, shorten(x.String()), shorten(y.String()))
			}
		}
		return "families differ"
	}
	ra, rb := *a, *b
	ra.Families, rb.Families = nil, nil
	if !reflect.DeepEqual(ra, rb) {
		return fmt.Sprintf("%+v, want %+v", ra, rb)
	}
	return ""
}

// errDiff compares two reads' errors: done when either failed, with how
// they differ ("" when alike).
func errDiff(aerr, berr error) (diff string, done bool) {
	switch {
	case (aerr == nil) != (berr == nil) || aerr != nil && aerr.Error() != berr.Error():
		return fmt.Sprintf("error %v, want %v", aerr, berr), true
	case aerr != nil:
		return "", true
	}
	return "", false
}

// FuzzParseMemo: a body parses through a memo that has learnt another
// exposition, and through that memo again once it has learnt the body
// itself, as it parses without one.
func FuzzParseMemo(f *testing.F) {
	learnt := []byte(vllmRouting)
	f.Add(learnt)
	// The same series with other values, some not read alike.
	f.Add([]byte(strings.ReplaceAll(vllmRouting, " 2\n", " 1_0\n")))
	f.Add([]byte(strings.ReplaceAll(vllmRouting, " 3\n", " NaN 17\n")))
	f.Add([]byte(strings.ReplaceAll(vllmRouting, "gauge", "counter")))
	f.Add([]byte(strings.ReplaceAll(vllmRouting, `engine="1"`, `engine="0"`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		if d := parseMemoDiff(learnt, body); d != "" {
			t.Fatal(d)
		}
	})
}

// parseMemoDiff says how body parses through a memo that learnt learnt,
// then through it again, otherwise than without a memo ("" when alike).
func parseMemoDiff(learnt, body []byte) string {
	memo := NewSeriesMemo()
	if _, err := ParseMemo(bytes.NewReader(learnt), Limits{}, memo); err != nil {
		return fmt.Sprintf("learning: %v", err)
	}
	want, wantErr := Parse(bytes.NewReader(body), Limits{})
	for range 2 {
		got, err := ParseMemo(bytes.NewReader(body), Limits{}, memo)
		if d := expositionDiff(got, err, want, wantErr); d != "" {
			return d
		}
	}
	return ""
}

// TestParseMemoMutated: 3,000 bodies made from an exposition by cutting,
// inserting quotes, newlines, braces and blanks, deleting and overwriting
// bytes (a fixed seed) parse through a memo that learnt the exposition,
// and through it again, as without one.
func TestParseMemoMutated(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := []byte(vllmRouting)
	for range 3000 {
		b := slices.Clone(base)
		for range 1 + r.IntN(4) {
			switch r.IntN(4) {
			case 0:
				b = b[:r.IntN(len(b)+1)]
			case 1:
				b = slices.Insert(b, r.IntN(len(b)+1), "\"\n {}#= \\"[r.IntN(9)])
			case 2:
				if len(b) > 0 {
					i := r.IntN(len(b))
					b = slices.Delete(b, i, i+1)
				}
			case 3:
				if len(b) > 0 {
					b[r.IntN(len(b))] = byte(r.IntN(256))
				}
			}
		}
		if d := parseMemoDiff(base, b); d != "" {
			t.Fatalf("%q: %s", b, d)
		}
	}
}

// TestParseMemoGroupsAndTwice: series given twice, histogram and summary
// lines and their buckets read through a memo (which keeps what it
// derives from their labels) as without one, whether each line is one the
// memo knows, one it learns or one it cannot (a timestamp), in either
// order, and with labels written in another order.
func TestParseMemoGroupsAndTwice(t *testing.T) {
	const learnt = `# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 1
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 3
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 2
# TYPE vllm:time_to_first_token_seconds summary
vllm:time_to_first_token_seconds{engine="0",quantile="0.5"} 0.2
vllm:time_to_first_token_seconds{engine="0",quantile="0.99"} 0.9
vllm:time_to_first_token_seconds_sum{engine="0"} 4
vllm:time_to_first_token_seconds_count{engine="0"} 10
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2
`
	const (
		waiting  = `vllm:num_requests_waiting{engine="0",model_name="m"} 2` + "\n"
		bucket   = `vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 1` + "\n"
		quantile = `vllm:time_to_first_token_seconds{engine="0",quantile="0.5"} 0.2` + "\n"
	)
	tests := []struct{ name, body string }{
		{"as learnt", learnt},
		{"gauge twice", learnt + waiting},
		{"gauge twice, the second with a timestamp", learnt + `vllm:num_requests_waiting{engine="0",model_name="m"} 2 1700000000000` + "\n"},
		{"gauge twice, the first with a timestamp", strings.Replace(learnt, waiting, `vllm:num_requests_waiting{engine="0",model_name="m"} 2 1700000000000`+"\n"+waiting, 1)},
		{"gauge twice, labels in another order", learnt + `vllm:num_requests_waiting{model_name="m",engine="0"} 3` + "\n"},
		{"gauge twice, both new", learnt + `vllm:num_requests_waiting{engine="1"} 3` + "\n" + `vllm:num_requests_waiting{engine="1"} 4` + "\n"},
		{"bucket twice", strings.Replace(learnt, bucket, bucket+bucket, 1)},
		{"bucket twice, the second with a timestamp", strings.Replace(learnt, bucket, bucket+strings.TrimSuffix(bucket, "\n")+" 1700000000000\n", 1)},
		{"buckets out of order", learnt + "# TYPE vllm:x histogram\n" + `vllm:x_bucket{le="+Inf"} 2` + "\n" + `vllm:x_bucket{le="0.5"} 1` + "\n" + `vllm:x_count 2` + "\n"},
		{"buckets out of order, counts falling", learnt + "# TYPE vllm:x histogram\n" + `vllm:x_bucket{le="+Inf"} 2` + "\n" + `vllm:x_bucket{le="0.5"} 3` + "\n" + `vllm:x_count 2` + "\n"},
		{"bucket with le NaN", strings.Replace(learnt, bucket, bucket+`vllm:e2e_request_latency_seconds_bucket{engine="0",le="NaN",model_name="m"} 1`+"\n", 1)},
		{"bucket without le", strings.Replace(learnt, bucket, bucket+`vllm:e2e_request_latency_seconds_bucket{engine="0",model_name="m"} 1`+"\n", 1)},
		{"bucket of another engine", strings.Replace(learnt, bucket, bucket+`vllm:e2e_request_latency_seconds_bucket{engine="1",le="1.0",model_name="m"} 1`+"\n", 1)},
		{"quantile twice", strings.Replace(learnt, quantile, quantile+quantile, 1)},
		{"quantile not a number", strings.Replace(learnt, quantile, quantile+`vllm:time_to_first_token_seconds{engine="0",quantile="half"} 0.2`+"\n", 1)},
		{"histogram typed a summary", strings.Replace(learnt, "seconds histogram", "seconds summary", 1)},
		{"summary typed a histogram", strings.Replace(learnt, "first_token_seconds summary", "first_token_seconds histogram", 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, from := range []string{learnt, tc.body} {
				if d := parseMemoDiff([]byte(from), []byte(tc.body)); d != "" {
					t.Error(d)
				}
			}
		})
	}
}

// TestMemoValueDigits: a value of digits alone reads as strconv.ParseFloat
// reads it, up to the longest the shortcut takes and past it.
func TestMemoValueDigits(t *testing.T) {
	for _, val := range []string{"0", "00", "7", "007", "10", "4096", "123456789012345", "999999999999999", "9999999999999999", "12345678901234567890", "-1", "1.5", "1e3", "+1"} {
		got, ok := memoValue([]byte(val))
		want, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("memoValue(%q) = %v, %v; ParseFloat %v, %v", val, got, ok, want, err)
		}
	}
}
