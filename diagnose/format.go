package diagnose

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// FormatDuration writes d the way a person reads it, in the given language:
// "850 ms", "2.5 s", "13.3 min", "1.2 h" (Chinese: "850 毫秒", "2.5 秒",
// "13.3 分钟", "1.2 小时").
func FormatDuration(d time.Duration, lang llmdiagv1.Language) string {
	return newPrinter(lang).seconds(d.Seconds())
}

// printer writes text in one language: catalog messages and the figures they
// quote. rec, when set, records every catalog entry written (see recorder).
type printer struct {
	zh  bool
	rec *recorder
}

func newPrinter(lang llmdiagv1.Language) printer {
	return printer{zh: lang == llmdiagv1.Language_LANGUAGE_ZH}
}

// unit returns the English or Chinese form.
func (p printer) unit(en, zh string) string {
	if p.zh {
		return zh
	}
	return en
}

// seconds formats a latency given in seconds.
func (p printer) seconds(s float64) string {
	switch {
	case math.IsNaN(s):
		return "?"
	case math.IsInf(s, 1):
		return "∞"
	case s < 1:
		return withUnit(s*1000, 0, p.unit(" ms", " 毫秒"))
	case s < 60:
		return withUnit(s, 1, p.unit(" s", " 秒"))
	case s < 3600:
		return withUnit(s/60, 1, p.unit(" min", " 分钟"))
	default:
		return withUnit(s/3600, 1, p.unit(" h", " 小时"))
	}
}

// withUnit is trimFloat(v, prec) + unit, in one allocation.
func withUnit(v float64, prec int, unit string) string {
	var buf [48]byte
	return string(append(appendTrimFloat(buf[:0], v, prec), unit...))
}

// bound formats a bucket bound as configured: "480 s", "0.5 s", "+Inf".
func (p printer) bound(b float64) string {
	if math.IsInf(b, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(b, 'g', -1, 64) + p.unit(" s", " 秒")
}

// percentile formats a latency percentile with the bucket it lies in:
// "13.3 min (bucket 480 s–960 s)". When the quantile lies in the +Inf bucket
// the value is the largest finite bound, a floor: "≥ 2.1 h (…)".
func (p printer) percentile(q *llmdiagv1.Percentile) string {
	v := p.seconds(q.GetValue())
	if math.IsInf(q.GetUpperBound(), 1) {
		v = "≥ " + v
	}
	b := p.bound(q.GetLowerBound()) + "–" + p.bound(q.GetUpperBound())
	if p.zh {
		return v + "（桶 " + b + "）"
	}
	return v + " (bucket " + b + ")"
}

// percent formats a 0..1 fraction: "~30%".
func percent(v float64) string {
	if v > 0 && v < 0.005 {
		return "<1%"
	}
	return "~" + fixed(math.Round(v*100), 0) + "%"
}

// exactPercent formats a threshold fraction without "~": "90%".
func exactPercent(v float64) string {
	return withUnit(v*100, 1, "%")
}

// count formats a gauge such as a queue length: "0", "8", "2.5".
func count(v float64) string { return trimFloat(v, 1) }

// ratio formats a dimensionless ratio with two decimals: "0.00", "∞".
func ratio(v float64) string {
	if math.IsInf(v, 1) {
		return "∞"
	}
	return fixed(v, 2)
}

// times formats a multiple: "165×", "3.2×".
func times(v float64) string {
	if math.IsInf(v, 1) {
		return "∞×"
	}
	if v >= 100 {
		return thousands(math.Round(v)) + "×"
	}
	return trimFloat(v, 1) + "×"
}

// rate formats a token rate: "~20,000 tok/s", "121 tok/s", "3.0 tok/s".
// Above 1,000 it keeps two significant figures, as a dashboard reader would.
func rate(v float64) string {
	switch {
	case v >= 1000:
		mag := math.Pow(10, math.Floor(math.Log10(v))-1)
		return "~" + thousands(math.Round(v/mag)*mag) + " tok/s"
	case v >= 100:
		return fixed(v, 0) + " tok/s"
	default:
		return trimFloat(v, 1) + " tok/s"
	}
}

// perSecond formats an event rate: "0.05/s", "1.2/s", "120/s".
func perSecond(v float64) string {
	if v >= 100 {
		return fixed(v, 0) + "/s"
	}
	return strconv.FormatFloat(v, 'g', 2, 64) + "/s"
}

// tokens formats a token count: "8,192", "~100,000".
func tokens(v float64) string {
	if v >= 10000 {
		mag := math.Pow(10, math.Floor(math.Log10(v))-1)
		return "~" + thousands(math.Round(v/mag)*mag)
	}
	return thousands(math.Round(v))
}

// byteSize formats a byte count: "512 B", "3.4 MB", "1.2 GB" (powers of 10).
func byteSize(v float64) string {
	for _, u := range []struct {
		scale float64
		unit  string
	}{{1e12, " TB"}, {1e9, " GB"}, {1e6, " MB"}, {1e3, " kB"}} {
		if v >= u.scale {
			return trimFloat(v/u.scale, 1) + u.unit
		}
	}
	return trimFloat(v, 0) + " B"
}

// billions formats a parameter count given in billions: "37B".
func billions(v float64) string { return trimFloat(v, 1) + "B" }

// trimFloat formats v with at most prec decimals and no trailing zeros.
func trimFloat(v float64, prec int) string {
	var buf [48]byte
	return string(appendTrimFloat(buf[:0], v, prec))
}

// appendTrimFloat appends trimFloat(v, prec) to b.
func appendTrimFloat(b []byte, v float64, prec int) []byte {
	start := len(b)
	b = appendFixed(b, v, prec)
	if bytes.IndexByte(b[start:], '.') >= 0 {
		b = b[:start+len(bytes.TrimRight(bytes.TrimRight(b[start:], "0"), "."))]
	}
	if string(b[start:]) == "-0" {
		b = append(b[:start], '0')
	}
	return b
}

// appendFixed is strconv.AppendFloat(b, v, 'f', prec, 64), the decimal
// nearest v's exact value (a tie to the even one), without strconv's
// general algorithm for what a diagnosis mostly formats: v from 0 and
// below 2^52 at prec decimals, prec at most 3. It rounds v·10^prec to a
// whole number: the product rounds, but math.FMA gives its error exactly,
// which decides where the rounded product is a tie or a whole number.
func appendFixed(b []byte, v float64, prec int) []byte {
	if prec < 0 || prec >= len(pow10) || !(v >= 0) || math.Signbit(v) {
		return strconv.AppendFloat(b, v, 'f', prec, 64)
	}
	p := pow10[prec]
	t := v * p
	if !(t < 1<<52) {
		return strconv.AppendFloat(b, v, 'f', prec, 64)
	}
	// v·p is exactly t + e, e within half of t's unit in the last place.
	// t's fraction is exact and a multiple of that unit: unless it is one
	// half, e cannot carry v·p across one half, and it decides a tie.
	e := math.FMA(v, p, -t)
	whole := math.Floor(t)
	frac := t - whole
	n := uint64(whole)
	if frac > 0.5 || frac == 0.5 && (e > 0 || e == 0 && n%2 == 1) {
		n++
	}
	unit := uint64(p)
	b = strconv.AppendUint(b, n/unit, 10)
	if prec == 0 {
		return b
	}
	b = append(b, '.')
	r := n % unit
	for u := unit / 10; u > 0; u /= 10 {
		b = append(b, byte('0'+r/u))
		r %= u
	}
	return b
}

// fixed is strconv.FormatFloat(v, 'f', prec, 64) by appendFixed.
func fixed(v float64, prec int) string {
	var buf [32]byte
	return string(appendFixed(buf[:0], v, prec))
}

// pow10 are the powers of ten appendFixed scales by.
var pow10 = [...]float64{1, 10, 100, 1000}

// thousands formats a whole number with comma separators: "20,000".
func thousands(v float64) string {
	s := fixed(math.Abs(v), 0)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// join lists items the way the language does: "a, b" or "a、b".
func (p printer) join(items []string) string {
	return strings.Join(items, p.unit(", ", "、"))
}

// sentence capitalises the first letter, for English text that starts with
// a catalog fragment.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// signedPercent formats a relative change: "+25%", "-10%", "0%".
func signedPercent(v float64) string {
	r := math.Round(v * 100)
	switch {
	case r > 0:
		return "+" + fixed(r, 0) + "%"
	case r < 0:
		return fixed(r, 0) + "%"
	}
	return "0%"
}
