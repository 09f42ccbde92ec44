package prom

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/llmdiag/llmdiag/engine"
)

func TestParseFloat(t *testing.T) {
	cases := []string{
		"0", "1", "-1", "0.5", "1.0", "+Inf", "-Inf", "NaN", "1e3", "1E-3", "0.04545454545454546",
		"9007199254740993", "9007199254740992", "123456789012345678901234567890", "0.0000000000000000000001",
		"0.00000000000000000000001", "00.5", "-0", ".5", "5.", "", "-", "1..2", "1_000", "0x1p-2", "inf",
		"1767225600.123", "3.4028234663852886e+38", "4.9e-324", "12345678901234567", "0.1234567890123456789",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		v := r.Float64() * math.Pow(10, float64(r.IntN(30)-15))
		cases = append(cases,
			strconv.FormatFloat(v, 'f', -1, 64),
			strconv.FormatFloat(v, 'g', -1, 64),
			strconv.FormatFloat(float64(r.IntN(1e6))/float64(1+r.IntN(1000)), 'f', r.IntN(20), 64))
	}
	for _, c := range cases {
		got, ok := parseFloat([]byte(c))
		want, err := strconv.ParseFloat(c, 64)
		if ok != (err == nil) || (ok && math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want))) {
			t.Errorf("parseFloat(%q) = %v, %v; ParseFloat gives %v, %v", c, got, ok, want, err)
		}
	}
}

func TestDecodeVector(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		names    []string
		vals     []string
		vs       []float64
		status   string
		warnings []string
		err      bool
	}{
		{
			name:  "labels kept in order, others skipped, escapes",
			body:  `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"+Inf","x":{"a":[1,true,null]},"instance":"a\"\\\/\u00e9\ud83d\ude00"},"value":[1.5,"NaN"]},{"value":[2,"-1e3"],"metric":{}}]},"warnings":["w1","w2"],"infos":["i"]}`,
			names: []string{"instance", "le"}, vals: []string{"a\"\\/é😀", "+Inf", "", ""}, vs: []float64{math.NaN(), -1000},
			status: "success", warnings: []string{"w1", "w2"},
		},
		{name: "empty", body: ` { "status" : "success" , "data" : { "resultType" : "vector" , "result" : [ ] } } `, names: []string{"instance"}, status: "success"},
		{name: "error envelope", body: `{"status":"error","errorType":"bad_data","error":"parse error","data":null}`, status: "error"},
		{name: "scalar", body: `{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}`, err: true},
		{name: "matrix", body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2"]]}]}}`, err: true},
		{name: "native histogram", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{}]}]}}`, err: true},
		{name: "truncated", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2"]}`, err: true},
		{name: "trailing garbage", body: `{"status":"success"} x`, err: true},
		{name: "bad value", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}`, err: true},
		{name: "no value", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}`, err: true},
		{name: "two values", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2"],"value":[1,"3"]}]}}`, err: true},
		{name: "raw control character", body: "{\"status\":\"succ\ness\"}", err: true},
		{name: "bad escape", body: `{"status":"\q"}`, err: true},
		{name: "not json", body: `<html>502 Bad Gateway</html>`, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var vec vector
			r, err := decodeVector([]byte(tc.body), tc.names, &vec, map[string]string{})
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if tc.err {
				return
			}
			if r.status != tc.status || !slices.Equal(r.warnings, tc.warnings) {
				t.Errorf("status %q warnings %q, want %q %q", r.status, r.warnings, tc.status, tc.warnings)
			}
			if !slices.Equal(vec.vals, tc.vals) || !slices.EqualFunc(vec.vs, tc.vs, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
				t.Errorf("vals %q vs %v, want %q %v", vec.vals, vec.vs, tc.vals, tc.vs)
			}
		})
	}
	var syntax = errSyntax
	_ = errors.Is(syntax, errSyntax)
}

// FuzzDecodeVector: any body either decodes into a consistent vector or is
// an error; it never panics.
func FuzzDecodeVector(f *testing.F) {
	f.Add([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a","le":"1"},"value":[1,"2"]}]}}`))
	f.Add([]byte(`{"status":"error","errorType":"bad_data","error":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var vec vector
		_, err := decodeVector(body, []string{"instance", "le"}, &vec, map[string]string{})
		if err == nil && len(vec.vals) != 2*len(vec.vs) {
			t.Fatalf("%d labels for %d values", len(vec.vals), len(vec.vs))
		}
	})
}

// sameDecode fails t unless body decodes the same with and without the
// fast path: the same envelope, samples, labels and error.
func sameDecode(t *testing.T, body []byte, names []string) {
	t.Helper()
	var fast, slow vector
	rf, errf := decode(body, names, &fast, map[string]string{}, false)
	rs, errs := decode(body, names, &slow, map[string]string{}, true)
	if fmt.Sprint(errf) != fmt.Sprint(errs) || fmt.Sprint(rf) != fmt.Sprint(rs) {
		t.Fatalf("fast %v %v, slow %v %v\nbody %q", rf, errf, rs, errs, body)
	}
	if !slices.Equal(fast.vals, slow.vals) || !slices.EqualFunc(fast.vs, slow.vs, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
		t.Fatalf("fast %q %v, slow %q %v\nbody %q", fast.vals, fast.vs, slow.vals, slow.vs, body)
	}
}

// TestDecodeFastPath: the fast path for samples as Prometheus writes them
// reads exactly what the general reader does, of the fleet's answers and
// of bodies that stray from that form anywhere (spaces, escapes, members
// out of order or missing, cuts, bytes changed), which it leaves to the
// general reader.
func TestDecodeFastPath(t *testing.T) {
	names := []string{"instance", "le"}
	bodies := [][]byte{
		[]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a","le":"1"},"value":[1,"2"]},{"metric":{},"value":[1.5e3,"-Inf"]},{"metric":{"le":"0.5","instance":"b","x":"y"},"value":[-2,"0.25"]}]}}`),
		[]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a\"b","le":"1"},"value":[1,"2"]},{ "metric":{"instance":"c"},"value":[1,"3"]},{"value":[1,"4"],"metric":{"instance":"d"}},{"metric":{"instance":"e"},"value":[01,"5"],"x":1}]}}`),
	}
	for _, c := range synthBodies(plan(t, defaultBuilder("5m"), engine.Engines()...), synthFleet(20, true), testNow) {
		bodies = append(bodies, c.Body)
	}
	files, _ := filepath.Glob("testdata/fleet/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	r := rand.New(rand.NewPCG(13, 7))
	for _, body := range bodies {
		sameDecode(t, body, names)
		sameDecode(t, body, []string{"instance", "dp_rank", "model_name"})
		for range 200 {
			b := slices.Clone(body)
			switch i := r.IntN(len(b)); r.IntN(5) {
			case 0:
				b = slices.Insert(b, i, ' ')
			case 1:
				b = slices.Insert(b, i, '\\', 'u', '0', '0', '4', '1')
			case 2:
				b = b[:i]
			case 3:
				b[i] = byte(r.IntN(256))
			default:
				b = slices.Delete(b, i, i+1)
			}
			sameDecode(t, b, names)
		}
	}
}

// FuzzDecodeFastPath: any body decodes the same with and without the fast
// path.
func FuzzDecodeFastPath(f *testing.F) {
	f.Add([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a","le":"1"},"value":[1,"2"]}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) { sameDecode(t, body, []string{"instance", "le"}) })
}
