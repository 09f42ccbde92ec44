package prom

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// vector is a decoded instant-vector result, keeping only the labels a query
// reads: sample i has labels vals[i*k : (i+1)*k] (k = len of the names
// decodeVector was given, "" where a sample lacks one) and value vs[i].
type vector struct {
	k    int
	vals []string
	vs   []float64
}

func (v *vector) len() int { return len(v.vs) }

// labels returns the wanted labels of sample i.
func (v *vector) labels(i int) []string { return v.vals[i*v.k : (i+1)*v.k] }

// apiResponse is the envelope of a Prometheus API response.
type apiResponse struct {
	status, errorType, error string
	resultType               string
	warnings, infos          []string
}

// errSyntax marks a body that is not the JSON Prometheus writes.
var errSyntax = errors.New("malformed response body")

// decodeVector reads an API response body. It keeps of each sample only the
// labels names (in that order) and the value, and interns label values, so
// that a vector of a million samples costs a few allocations per distinct
// value instead of a map per sample (model.Sample's decoder).
//
// It is a strict reader of JSON (RFC 8259) for the response format of
// /api/v1/query: a result that is not a vector of float samples (a scalar,
// a matrix, native histograms) is an error.
//
// The samples go into vec, which is reset first; intern holds the label
// values already seen, and may be shared by calls that do not run at once.
func decodeVector(body []byte, names []string, vec *vector, intern map[string]string) (apiResponse, error) {
	return decode(body, names, vec, intern, false)
}

// decode is decodeVector; slow turns the fast path off (sampleFast), for
// tests.
func decode(body []byte, names []string, vec *vector, intern map[string]string, slow bool) (apiResponse, error) {
	d := decoder{b: body, names: names, interned: intern, slow: slow, last: make([]string, len(names))}
	vec.k, vec.vals, vec.vs = len(names), vec.vals[:0], vec.vs[:0]
	var r apiResponse
	d.ws()
	d.object(func(key []byte) {
		switch string(key) {
		case "status":
			r.status = d.str()
		case "errorType":
			r.errorType = d.str()
		case "error":
			r.error = d.str()
		case "warnings":
			r.warnings = d.strings()
		case "infos":
			r.infos = d.strings()
		case "data":
			if d.peek() == 'n' {
				d.skip()
				return
			}
			d.object(func(key []byte) {
				switch string(key) {
				case "resultType":
					r.resultType = d.str()
				case "result":
					d.result(vec)
				default:
					d.skip()
				}
			})
		default:
			d.skip()
		}
	})
	d.ws()
	if d.err == nil && d.i != len(d.b) {
		d.fail("data after the response")
	}
	if d.err != nil {
		return r, d.err
	}
	if r.status == "success" && r.resultType != "vector" {
		return r, fmt.Errorf("result is a %q, want a vector", r.resultType)
	}
	return r, nil
}

type decoder struct {
	b        []byte
	i        int
	err      error
	names    []string
	interned map[string]string
	// last is the value of each of names in the sample before: Prometheus
	// writes a node's series one after the other, so most samples repeat
	// their node's label, and are interned with a comparison rather than a
	// lookup.
	last []string
	// recent holds the values intern gave last, by recentSlot: the other
	// labels of a node's series (a bucket's le, a replica's index) take a
	// few dozen values, the same for every node, and are found here with
	// a comparison rather than a lookup.
	recent [256]string
	buf    []byte // unescaped string
	slow   bool   // no fast path (sampleFast), for tests
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", errSyntax, what, d.i)
	}
	d.i = len(d.b)
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) expect(c byte) bool {
	if d.peek() != c {
		d.fail(fmt.Sprintf("want %q", c))
		return false
	}
	d.i++
	return true
}

// object reads an object, calling member for each key with the decoder on
// its value, which member must consume.
func (d *decoder) object(member func(key []byte)) {
	if !d.expect('{') {
		return
	}
	if d.peek() == '}' {
		d.i++
		return
	}
	for d.err == nil {
		key := d.raw()
		if !d.expect(':') {
			return
		}
		d.ws()
		member(key)
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return
		default:
			d.fail("want , or }")
		}
	}
}

// array reads an array, calling elem with the decoder on each element.
func (d *decoder) array(elem func()) {
	if !d.expect('[') {
		return
	}
	if d.peek() == ']' {
		d.i++
		return
	}
	for d.err == nil {
		d.ws()
		elem()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return
		default:
			d.fail("want , or ]")
		}
	}
}

// raw reads a string and returns its content, unescaped; the slice is valid
// until the next call.
func (d *decoder) raw() []byte {
	if !d.expect('"') {
		return nil
	}
	start := d.i
	end := bytes.IndexByte(d.b[start:], '"')
	if end < 0 {
		d.fail("unterminated string")
		return nil
	}
	s := d.b[start : start+end]
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return d.escaped(start)
		}
	}
	d.i = start + end + 1
	return s
}

// escaped reads the rest of a string that has escapes, from start.
func (d *decoder) escaped(start int) []byte {
	d.buf = append(d.buf[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return d.buf
		case c < 0x20:
			d.fail("control character in string")
			return nil
		case c != '\\':
			d.buf = append(d.buf, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			break
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			d.buf = append(d.buf, e)
		case 'b':
			d.buf = append(d.buf, '\b')
		case 'f':
			d.buf = append(d.buf, '\f')
		case 'n':
			d.buf = append(d.buf, '\n')
		case 'r':
			d.buf = append(d.buf, '\r')
		case 't':
			d.buf = append(d.buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					save := d.i
					d.i += 2
					if r2, ok = d.hex4(); !ok {
						return nil
					}
					if utf16.DecodeRune(r, r2) == utf8.RuneError {
						d.i, r2 = save, -1
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			d.buf = utf8.AppendRune(d.buf, r)
		default:
			d.fail("invalid escape")
			return nil
		}
	}
	d.fail("unterminated string")
	return nil
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		d.fail("short \\u escape")
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 32)
	if err != nil {
		d.fail("invalid \\u escape")
		return 0, false
	}
	d.i += 4
	return rune(v), true
}

// str reads a string.
func (d *decoder) str() string { return string(d.raw()) }

// strings reads an array of strings, or null.
func (d *decoder) strings() []string {
	if d.peek() == 'n' {
		d.skip()
		return nil
	}
	var out []string
	d.array(func() { out = append(out, d.str()) })
	return out
}

// number reads a JSON number and returns its text.
func (d *decoder) number() []byte {
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if digits() == 0 {
		d.fail("invalid number")
		return nil
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			d.fail("invalid number")
			return nil
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			d.fail("invalid number")
			return nil
		}
	}
	return d.b[start:d.i]
}

// skip reads any value.
func (d *decoder) skip() {
	switch c := d.peek(); {
	case c == '{':
		d.object(func([]byte) { d.skip() })
	case c == '[':
		d.array(d.skip)
	case c == '"':
		d.raw()
	case c == '-' || (c >= '0' && c <= '9'):
		d.number()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
				d.i += len(lit)
				return
			}
		}
		d.fail("invalid value")
	}
}

// result reads the samples of a vector into vec. The per-sample path is
// written without closures: it runs a million times per refresh of a large
// fleet.
func (d *decoder) result(vec *vector) {
	if !d.expect('[') {
		return
	}
	if d.peek() == ']' {
		d.i++
		return
	}
	for d.err == nil {
		d.sample(vec)
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return
		default:
			d.fail("want , or ]")
		}
	}
}

// sample reads one sample: {"metric": {…}, "value": [t, "v"]}.
func (d *decoder) sample(vec *vector) {
	base := len(vec.vals)
	for range vec.k {
		vec.vals = append(vec.vals, "")
	}
	if !d.slow && d.sampleFast(vec, base) {
		return
	}
	hasValue := false
	if !d.expect('{') {
		return
	}
	for d.err == nil && d.peek() != '}' {
		key := d.raw()
		if !d.expect(':') {
			return
		}
		switch string(key) {
		case "metric":
			d.metric(vec.vals[base:])
		case "value":
			if hasValue {
				d.fail("sample has two values")
				return
			}
			d.value(vec)
			hasValue = true
		case "histogram", "histograms", "values":
			d.fail(fmt.Sprintf("unsupported sample member %q (not a float vector)", key))
		default:
			d.skip()
		}
		if d.peek() == ',' {
			d.i++
			continue
		}
		if d.peek() != '}' {
			d.fail("want , or }")
		}
	}
	if !d.expect('}') {
		return
	}
	if !hasValue {
		d.fail("sample without value")
	}
}

var (
	metricOpen = []byte(`{"metric":{`)
	valueOpen  = []byte(`,"value":[`)
)

// sampleFast reads a sample written as Prometheus writes it,
// {"metric":{"name":"value",…},"value":[t,"v"]} with no whitespace and no
// escape, giving what sample gives; for anything else it reads nothing,
// leaves vec as it was and reports false, and sample reads it (and
// reports what is wrong with it). It takes two thirds of sample's time.
func (d *decoder) sampleFast(vec *vector, base int) bool {
	b, i := d.b, d.i
	if !bytes.HasPrefix(b[i:], metricOpen) {
		return false
	}
	i += len(metricOpen)
	vals := vec.vals[base:]
	undo := func() bool {
		clear(vals)
		return false
	}
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			name, next, ok := plainString(b, i)
			if !ok || next+1 >= len(b) || b[next] != ':' {
				return undo()
			}
			value, after, ok := plainString(b, next+1)
			if !ok || after >= len(b) {
				return undo()
			}
			for j, n := range d.names {
				if n == string(name) {
					if d.last[j] != string(value) {
						d.last[j] = d.intern(value)
					}
					vals[j] = d.last[j]
					break
				}
			}
			i = after + 1
			if b[after] == '}' {
				break
			}
			if b[after] != ',' {
				return undo()
			}
		}
	}
	if !bytes.HasPrefix(b[i:], valueOpen) {
		return undo()
	}
	i += len(valueOpen)
	n := numberLen(b[i:])
	if n == 0 || i+n >= len(b) || b[i+n] != ',' {
		return undo()
	}
	text, after, ok := plainString(b, i+n+1)
	if !ok || after+1 >= len(b) || b[after] != ']' || b[after+1] != '}' {
		return undo()
	}
	v, ok := parseFloat(text)
	if !ok {
		return undo()
	}
	vec.vs = append(vec.vs, v)
	d.i = after + 2
	return true
}

// plainString reads the JSON string at b[i] when it has no escape and no
// control character: its content, and the index after its closing quote.
func plainString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	// One pass: the strings are short (a label, a number), too short for
	// an IndexByte and a second pass to pay.
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// numberLen is the length of the JSON number b starts with, as number
// reads it; 0 when b does not start with one.
func numberLen(b []byte) int {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if digits() == 0 {
		return 0
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0
		}
	}
	return i
}

// metric reads a sample's labels, keeping those of d.names in vals.
func (d *decoder) metric(vals []string) {
	if !d.expect('{') {
		return
	}
	for d.err == nil && d.peek() != '}' {
		name := d.raw()
		if !d.expect(':') {
			return
		}
		j := slices.IndexFunc(d.names, func(n string) bool { return n == string(name) })
		if j >= 0 {
			vals[j] = d.internStr()
		} else {
			d.skip()
		}
		if d.peek() == ',' {
			d.i++
			continue
		}
		if d.peek() != '}' {
			d.fail("want , or }")
		}
	}
	d.expect('}')
}

// value reads [timestamp, "value"].
func (d *decoder) value(vec *vector) {
	if !d.expect('[') {
		return
	}
	d.ws()
	d.number()
	if !d.expect(',') {
		return
	}
	v, ok := parseFloat(d.raw())
	if !ok && d.err == nil {
		d.fail("invalid sample value")
		return
	}
	vec.vs = append(vec.vs, v)
	d.expect(']')
}

// internStr reads a string, sharing the copy of every distinct value.
func (d *decoder) internStr() string { return d.intern(d.raw()) }

// intern returns b as a string, sharing the copy of every distinct value.
func (d *decoder) intern(b []byte) string {
	slot := &d.recent[recentSlot(b)]
	if *slot == string(b) {
		return *slot
	}
	s, ok := d.interned[string(b)]
	if !ok {
		s = string(b)
		d.interned[s] = s
	}
	*slot = s
	return s
}

// recentSlot is b's place in decoder.recent: its length and three of its
// bytes mixed, enough to tell apart the few dozen values of a label.
func recentSlot(b []byte) uint8 {
	n := len(b)
	if n == 0 {
		return 0
	}
	h := uint32(n)*0x9e3779b1 ^ uint32(b[0])*0x85ebca6b ^ uint32(b[n/2])*0xc2b2ae35 ^ uint32(b[n-1])*0x27d4eb2f
	return uint8(h>>24 ^ h>>8)
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat is strconv.ParseFloat(string(b), 64), faster for the plain
// decimals Prometheus writes: a mantissa below 2^53 scaled by a power of ten
// up to 1e22 is converted with one exact operation, which rounds as
// ParseFloat does (Clinger's fast path, ParseFloat's own first attempt).
// Anything else ("+Inf", "NaN", exponents, long mantissas) goes to
// ParseFloat.
func parseFloat(b []byte) (float64, bool) {
	i, neg := 0, false
	if len(b) > 0 && b[0] == '-' {
		i, neg = 1, true
	}
	var mant uint64
	digits, frac, dot := 0, 0, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			if digits == 0 && c == '0' && !dot {
				if i+1 < len(b) && b[i+1] >= '0' && b[i+1] <= '9' {
					return slowFloat(b) // leading zeros: let ParseFloat judge
				}
			}
			mant = mant*10 + uint64(c-'0')
			digits++
			if dot {
				frac++
			}
			if digits > 15 && mant >= 1<<53 {
				return slowFloat(b)
			}
		case c == '.' && !dot:
			dot = true
		default:
			return slowFloat(b)
		}
	}
	if digits == 0 || frac > 22 || (dot && b[len(b)-1] == '.') {
		return slowFloat(b)
	}
	v := float64(mant) / pow10[frac]
	if neg {
		v = -v
	}
	return v, true
}

func slowFloat(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	// ParseFloat keeps its argument only in its error, which is dropped
	// here: the bytes need no string of their own.
	v, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
	return v, err == nil
}
