package compact

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// A Diagnosis's text is catalog sentences with figures filled in: "KV
// pressure ~45% (warn 90%, crit 95%)". Each string is written as tokens: the
// runs between numbers as ids of phrases in the Dict ("KV pressure ~",
// "% (warn ", "%, crit ", "%)"), numbers as packed digits, anything else as
// it is. The phrases a fleet's diagnoses use are few, so they fill the Dict
// quickly and every later record costs a byte or two per phrase.

// Token kinds, in the low 2 bits of a token's header; the rest is the
// phrase id, or the length of a literal or number. A header of tokEnd ends
// the string.
const (
	tokPhrase  = 0
	tokLiteral = 1
	tokNumber  = 2
	tokEnd     = 3
)

// maxDictPhrases bounds the phrases the Dict learns; later ones are written
// as literals.
const maxDictPhrases = 8192

// appendText appends s as tokens, then tokEnd.
func (c *Codec) appendText(b []byte, s string) []byte {
	for s != "" {
		k := numberLen(s)
		if k > 0 {
			b = protowire.AppendVarint(b, uint64(k)<<2|tokNumber)
			b = appendDigits(b, s[:k])
			s = s[k:]
			continue
		}
		k = digitAt(s)
		if id, ok := c.dict.phraseID(s[:k]); ok {
			b = protowire.AppendVarint(b, id<<2|tokPhrase)
		} else {
			b = protowire.AppendVarint(b, uint64(k)<<2|tokLiteral)
			b = append(b, s[:k]...)
		}
		s = s[k:]
	}
	return append(b, tokEnd)
}

// digitAt is the index of the first digit in s, len(s) when there is none.
// It tests eight bytes at a time: a byte is a digit when, XORed with '0',
// it is below 10, which adding 0x76 to its low 7 bits tells by its high bit
// (no carry reaches the next byte).
func digitAt(s string) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	k := 0
	for ; k+8 <= len(s); k += 8 {
		x := load8(s[k:]) ^ '0'*ones
		if digits := ^((x&^highs + 0x76*ones) | x) & highs; digits != 0 {
			return k + bits.TrailingZeros64(digits)/8
		}
	}
	for ; k < len(s) && (s[k] < '0' || s[k] > '9'); k++ {
	}
	return k
}

// load8 is the first eight bytes of s, little-endian (one load, compiled).
func load8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// numberLen is the length of the number s starts with: digits, with single
// '.' or ',' between them. 0 when s does not start with a digit.
func numberLen(s string) int {
	k := 0
	for k < len(s) {
		switch c := s[k]; {
		case c >= '0' && c <= '9':
			k++
		case (c == '.' || c == ',') && k > 0 && k+1 < len(s) && s[k+1] >= '0' && s[k+1] <= '9':
			k++
		default:
			return k
		}
	}
	return k
}

// digitCode packs the characters of a number in 4 bits each.
func digitCode(c byte) byte {
	switch c {
	case '.':
		return 10
	case ',':
		return 11
	}
	return c - '0'
}

const digitChars = "0123456789.,"

func appendDigits(b []byte, num string) []byte {
	for i := 0; i < len(num); i += 2 {
		v := digitCode(num[i]) << 4
		if i+1 < len(num) {
			v |= digitCode(num[i+1])
		}
		b = append(b, v)
	}
	return b
}

// textReader reads the strings appendText wrote into one buffer, so that
// they share one allocation.
type textReader struct {
	c    *Codec
	b    []byte // encoded
	text []byte // decoded so far
	ends []int  // end of each string in text
}

// next decodes the next string into r.text.
func (r *textReader) next() error {
	for {
		h, k := protowire.ConsumeVarint(r.b)
		if k < 0 {
			return errCorrupt
		}
		r.b = r.b[k:]
		v := h >> 2
		switch h & 3 {
		case tokEnd:
			if v != 0 {
				return errCorrupt
			}
			r.ends = append(r.ends, len(r.text))
			return nil
		case tokPhrase:
			p, err := r.c.dict.phrase(v)
			if err != nil {
				return err
			}
			r.text = append(r.text, p...)
		case tokLiteral:
			if v > uint64(len(r.b)) {
				return errCorrupt
			}
			r.text = append(r.text, r.b[:v]...)
			r.b = r.b[v:]
		case tokNumber:
			nb := (v + 1) / 2
			if nb > uint64(len(r.b)) {
				return errCorrupt
			}
			for i := range v {
				d := r.b[i/2] >> 4
				if i%2 == 1 {
					d = r.b[i/2] & 15
				}
				if int(d) >= len(digitChars) {
					return errCorrupt
				}
				r.text = append(r.text, digitChars[d])
			}
			r.b = r.b[nb:]
		}
	}
}

// count reads a list length.
func (r *textReader) count() (int, error) {
	n, k := protowire.ConsumeVarint(r.b)
	if k < 0 || n > uint64(len(r.b)) {
		return 0, errCorrupt
	}
	r.b = r.b[k:]
	return int(n), nil
}

// appendDiagnosisText appends every string of d, lists preceded by their
// length.
func (c *Codec) appendDiagnosisText(b []byte, d *llmdiagv1.Diagnosis) []byte {
	list := func(ss []string) {
		b = protowire.AppendVarint(b, uint64(len(ss)))
		for _, s := range ss {
			b = c.appendText(b, s)
		}
	}
	b = c.appendText(b, d.Summary)
	list(d.Evidence)
	list(d.RuledOut)
	list(d.Recommendations)
	for _, f := range d.Findings {
		b = c.appendText(b, f.GetName())
		b = c.appendText(b, f.GetValue())
		b = c.appendText(b, f.GetConclusion())
		list(f.GetEvidence())
	}
	return b
}

// restoreText reads back into d the strings appendDiagnosisText wrote at the start of
// b, and returns the rest of b.
func (c *Codec) restoreText(b []byte, d *llmdiagv1.Diagnosis) ([]byte, error) {
	// Decode every string, then cut them from one string.
	r := &textReader{c: c, b: b, text: make([]byte, 0, 4*len(b))}
	var lists []int
	walk := func(one func(), list func()) {
		one()
		list()
		list()
		list()
		for range d.Findings {
			one()
			one()
			one()
			list()
		}
	}
	var err error
	walk(func() {
		if err == nil {
			err = r.next()
		}
	}, func() {
		if err != nil {
			return
		}
		var n int
		if n, err = r.count(); err != nil {
			return
		}
		lists = append(lists, n)
		for i := 0; i < n && err == nil; i++ {
			err = r.next()
		}
	})
	if err != nil {
		return nil, err
	}
	text := string(r.text)
	s, start := 0, 0
	str := func() string {
		end := r.ends[s]
		s++
		v := text[start:end]
		start = end
		return v
	}
	l := 0
	one := func(p *string) { *p = str() }
	list := func(ss *[]string) {
		n := lists[l]
		l++
		if n == 0 {
			return
		}
		*ss = make([]string, n)
		for i := range *ss {
			(*ss)[i] = str()
		}
	}
	one(&d.Summary)
	list(&d.Evidence)
	list(&d.RuledOut)
	list(&d.Recommendations)
	for _, f := range d.Findings {
		one(&f.Name)
		one(&f.Value)
		one(&f.Conclusion)
		list(&f.Evidence)
	}
	return r.b, nil
}

// phraseID returns the id of phrase p, adding it if there is room.
func (d *Dict) phraseID(p string) (uint64, bool) {
	if known := d.known.Load(); known != nil {
		if id, ok := known.get(p); ok {
			return uint64(id), true
		}
	}
	if d.frozen {
		return 0, false // it has no phrase
	}
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if id, ok := d.phraseIDs[p]; ok {
		d.renew()
		return uint64(id), true
	}
	var phrases []string
	if ps := d.phrases.Load(); ps != nil {
		phrases = *ps
	}
	if len(phrases) >= maxDictPhrases {
		return 0, false
	}
	if d.phraseIDs == nil {
		d.phraseIDs = make(map[string]uint32)
	}
	p = strings.Clone(p)
	id := uint32(len(phrases))
	phrases = append(phrases, p)
	d.phrases.Store(&phrases)
	d.phraseIDs[p] = id
	d.renew()
	return uint64(id), true
}

// renew copies phraseIDs to known when it has grown by an eighth since;
// d.pmu must be held.
func (d *Dict) renew() {
	n := 0
	if known := d.known.Load(); known != nil {
		n = known.n
	}
	if len(d.phraseIDs) > n+n/8 {
		d.known.Store(newPhraseTable(d.phraseIDs))
	}
}

// phraseTable is a read-only copy of a Dict's phrase ids, open-addressed
// (probed in order, at most half full) and hashed with a seed of its own
// (hash/maphash), so that no set of phrases collides by design: a record's
// text is mostly phrases, and phraseID runs for each; a map lookup costs
// about twice as much.
type phraseTable struct {
	seed  maphash.Seed
	slots []phraseSlot
	mask  uint64
	n     int
}

type phraseSlot struct {
	p  string
	id uint32
	ok bool
}

func newPhraseTable(ids map[string]uint32) *phraseTable {
	size := 16
	for size < 2*len(ids) {
		size *= 2
	}
	t := &phraseTable{seed: maphash.MakeSeed(), slots: make([]phraseSlot, size), mask: uint64(size - 1), n: len(ids)}
	for p, id := range ids {
		i := maphash.String(t.seed, p) & t.mask
		for t.slots[i].ok {
			i = (i + 1) & t.mask
		}
		t.slots[i] = phraseSlot{p: p, id: id, ok: true}
	}
	return t
}

func (t *phraseTable) get(p string) (uint32, bool) {
	for i := maphash.String(t.seed, p) & t.mask; t.slots[i].ok; i = (i + 1) & t.mask {
		if t.slots[i].p == p {
			return t.slots[i].id, true
		}
	}
	return 0, false
}

func (d *Dict) phrase(id uint64) (string, error) {
	if ps := d.phrases.Load(); ps != nil && id < uint64(len(*ps)) {
		return (*ps)[id], nil
	}
	return "", fmt.Errorf("%w: no phrase %d", errCorrupt, id)
}
