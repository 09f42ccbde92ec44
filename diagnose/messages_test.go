package diagnose

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// anyArg formats as "x" under every verb, so arity can be checked without
// knowing each verb's type.
type anyArg struct{}

func (anyArg) Format(s fmt.State, _ rune) { fmt.Fprint(s, "x") }

// arity is the number of arguments a format string consumes, or -1 when no
// count from 0 to 9 formats cleanly.
func arity(format string) int {
	for n := range 10 {
		args := make([]any, n)
		for i := range args {
			args[i] = anyArg{}
		}
		if !strings.Contains(fmt.Sprintf(format, args...), "%!") {
			return n
		}
	}
	return -1
}

func TestCatalogComplete(t *testing.T) {
	for id := range numMsgs {
		e := catalog[id]
		if e.en == "" || e.zh == "" {
			t.Errorf("message %d lacks a translation: en %q, zh %q", id, e.en, e.zh)
			continue
		}
		en, zh := arity(e.en), arity(e.zh)
		if en < 0 || en != zh {
			t.Errorf("message %d: en takes %d arguments, zh %d (-1 = malformed)\n en: %s\n zh: %s", id, en, zh, e.en, e.zh)
		}
	}
}

func TestFormat(t *testing.T) {
	en, zh := newPrinter(llmdiagv1.Language_LANGUAGE_EN), newPrinter(llmdiagv1.Language_LANGUAGE_ZH)
	for _, tc := range []struct {
		got, want string
	}{
		{percent(0.30), "~30%"},
		{percent(0.004), "<1%"},
		{percent(0), "~0%"},
		{rate(20000), "~20,000 tok/s"},
		{rate(19874), "~20,000 tok/s"},
		{rate(1234), "~1,200 tok/s"},
		{rate(121), "121 tok/s"},
		{rate(121.0 / 40), "3 tok/s"},
		{rate(12.34), "12.3 tok/s"},
		{count(0), "0"},
		{count(2.5), "2.5"},
		{ratio(0), "0.00"},
		{times(165.3), "165×"},
		{times(6.91), "6.9×"},
		{thousands(1234567), "1,234,567"},
		{tokens(8192), "8,192"},
		{tokens(123456), "~120,000"},
		{perSecond(0.05), "0.05/s"},
		{perSecond(250), "250/s"},
		{en.seconds(0.25), "250 ms"},
		{en.seconds(2.1), "2.1 s"},
		{en.seconds(40), "40 s"},
		{en.seconds(798), "13.3 min"},
		{en.seconds(7680), "2.1 h"},
		{zh.seconds(798), "13.3 分钟"},
		{zh.seconds(40), "40 秒"},
		{FormatDuration(15*time.Second, llmdiagv1.Language_LANGUAGE_EN), "15 s"},
		{FormatDuration(90*time.Minute, llmdiagv1.Language_LANGUAGE_ZH), "1.5 小时"},
		{en.percentile(&llmdiagv1.Percentile{Quantile: 0.99, Value: 798, LowerBound: 480, UpperBound: 960}), "13.3 min (bucket 480 s–960 s)"},
		{zh.percentile(&llmdiagv1.Percentile{Quantile: 0.99, Value: 798, LowerBound: 480, UpperBound: 960}), "13.3 分钟（桶 480 秒–960 秒）"},
		{en.percentile(&llmdiagv1.Percentile{Quantile: 0.99, Value: 7680, LowerBound: 7680, UpperBound: math.Inf(1)}), "≥ 2.1 h (bucket 7680 s–+Inf)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// sprintf writes what fmt.Sprintf writes: for every catalog entry, in both
// languages, with every mix of string and int arguments of its arity (the
// one that formats cleanly must take the fast path), and for the formats
// and arguments it leaves to Sprintf.
func TestSprintfIsSprintf(t *testing.T) {
	check := func(format string, args []any, wantFast bool) {
		t.Helper()
		want := fmt.Sprintf(format, args...)
		got, ok := sprintf(format, args)
		if ok && got != want {
			t.Fatalf("sprintf(%q, %v) = %q, Sprintf %q", format, args, got, want)
		}
		if wantFast && !ok {
			t.Fatalf("sprintf(%q, %v) left to Sprintf", format, args)
		}
	}
	for id, e := range catalog {
		for _, format := range []string{e.en, e.zh} {
			n := arity(format)
			if n < 0 {
				t.Fatalf("entry %d: no arity", id)
			}
			clean := 0
			for mask := range 1 << n {
				args := make([]any, n)
				for i := range args {
					if mask>>i&1 == 1 {
						args[i] = -1234 * (i + 1)
					} else {
						args[i] = fmt.Sprint("a", i, "%d")
					}
				}
				fast := !strings.Contains(fmt.Sprintf(format, args...), "%!")
				if fast {
					clean++
				}
				check(format, args, fast)
			}
			if clean != 1 {
				t.Fatalf("entry %d %q: %d clean mixes of arguments, want 1", id, format, clean)
			}
		}
	}
	for _, c := range []struct {
		format string
		args   []any
	}{
		{"%s", nil},
		{"%s", []any{"a", "b"}},
		{"%[2]s %s", []any{"a", "b"}},
		{"%[2]s %[1]s", []any{"a", "b", "c"}},
		{"%[3]s", []any{"a"}},
		{"%[0]s", []any{"a"}},
		{"%[10]s", []any{"a"}},
		{"%[1]", []any{"a"}},
		{"%d", []any{int64(1)}},
		{"%d", []any{uint8(1)}},
		{"%d", []any{uint(1)}},
		{"%d", []any{"a"}},
		{"%s", []any{1}},
		{"%v %q %x", []any{"a", "b", 3}},
		{"%5s", []any{"a"}},
		{"100%", nil},
		{"100%% %s", []any{"é"}},
	} {
		check(c.format, c.args, false)
	}
	// The integers the catalog's callers pass, each its own type.
	for _, v := range []any{0, -7, int32(-8), int64(math.MinInt64), uint32(math.MaxUint32), uint64(math.MaxUint64)} {
		check("×%d.", []any{v}, true)
	}
}

// trimFloat writes what it always wrote: strconv's 'f' format without
// trailing zeros (nor a trailing point), "-0" as "0".
func TestTrimFloat(t *testing.T) {
	old := func(v float64, prec int) string {
		s := strconv.FormatFloat(v, 'f', prec, 64)
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		if s == "-0" {
			s = "0"
		}
		return s
	}
	for _, v := range []float64{0, math.Copysign(0, -1), -0.04, -0.05, 0.04, 1, 10, 100, 1.25, 1.05, 2.5e-7, 123456789.95, 1e21, 1e300, -1e-300, math.Inf(1), math.Inf(-1), math.NaN(), 0.1 + 0.2, 59.96, 999.5} {
		for _, prec := range []int{0, 1, 2} {
			if got, want := trimFloat(v, prec), old(v, prec); got != want {
				t.Errorf("trimFloat(%v, %d) = %q, want %q", v, prec, got, want)
			}
			if got, want := withUnit(v, prec, " s"), old(v, prec)+" s"; got != want {
				t.Errorf("withUnit(%v, %d) = %q, want %q", v, prec, got, want)
			}
		}
	}
}

// TestDetached: what printer.f hands fmt.Sprintf when sprintf declines
// formats as the arguments themselves would, for the types it copies, and
// as a wrong type for any other.
func TestDetached(t *testing.T) {
	args := []any{"a", -1, int32(-2), int64(-3), uint32(4), uint64(5), 6.5}
	const format = "%v %v %v %v %v %v %v %q"
	if got, want := fmt.Sprintf(format, detached(args)...), fmt.Sprintf(format, args...); got != want {
		t.Errorf("detached: %q, the arguments themselves %q", got, want)
	}
	if got := fmt.Sprintf("%s %d", detached([]any{true, struct{}{}})...); strings.Count(got, "%!") != 2 {
		t.Errorf("unsupported arguments read %q, want two bad verbs", got)
	}
}

// TestPrinterAllocs: a catalog entry costs one allocation, its text: the
// arguments' boxes stay on the caller's stack (printer.f does not let them
// escape, not even to fmt.Sprintf).
func TestPrinterAllocs(t *testing.T) {
	var p printer
	a, b := strings.Repeat("x", 3), strings.Repeat("y", 4) // not constants
	var s string
	if n := testing.AllocsPerRun(100, func() { s = p.f(evSpec, a, b) }); n != 1 {
		t.Errorf("printer.f allocated %v times a call (%q), want 1", n, s)
	}
}
