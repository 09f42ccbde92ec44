package compact

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestDigitAt: digitAt finds the first digit as a byte-by-byte scan does,
// for every byte value at every place of strings of every length up to
// three words, UTF-8 and high bytes included.
func TestDigitAt(t *testing.T) {
	naive := func(s string) int {
		for k := range len(s) {
			if s[k] >= '0' && s[k] <= '9' {
				return k
			}
		}
		return len(s)
	}
	for n := range 25 {
		for at := range n {
			for c := range 256 {
				b := []byte(strings.Repeat("x", n))
				b[at] = byte(c)
				if at+1 < n {
					b[at+1] = '7' // a digit after, which must not hide one before
				}
				s := string(b)
				if got, want := digitAt(s), naive(s); got != want {
					t.Fatalf("digitAt(%q) = %d, want %d", s, got, want)
				}
			}
		}
	}
	for _, s := range []string{"", "KV pressure ~", "~45% (warn 90%", "队列 12 个请求", "\x80\xff\x2f\x3a 0", "/:/:/:/:/:/:/:/:9"} {
		if got, want := digitAt(s), naive(s); got != want {
			t.Errorf("digitAt(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestPhraseTable: the table finds every phrase of the map it was made
// from, with its id, and no other string, however alike (of one length,
// a byte or two apart).
func TestPhraseTable(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 9))
	ids := map[string]uint32{}
	add := func(p string) {
		if _, ok := ids[p]; !ok {
			ids[p] = uint32(len(ids))
		}
	}
	add("")
	for i := range 3000 {
		switch i % 4 {
		case 0: // short
			add(fmt.Sprint(r.IntN(1000))[:1] + strings.Repeat("a", r.IntN(7)))
		case 1: // the same first, middle and last eight bytes, another byte in between
			add("requests waiting " + string(rune('a'+r.IntN(26))) + string(rune('a'+r.IntN(26))) + " of the queue;")
		default:
			add(fmt.Sprintf(" phrase %x of a diagnosis ", r.Uint64()))
		}
	}
	tab := newPhraseTable(ids)
	if tab.n != len(ids) || len(tab.slots) < 2*len(ids) {
		t.Fatalf("table of %d phrases has n %d and %d slots", len(ids), tab.n, len(tab.slots))
	}
	for p, want := range ids {
		if got, ok := tab.get(p); !ok || got != want {
			t.Fatalf("get(%q) = %d, %v, want %d", p, got, ok, want)
		}
		for _, other := range []string{p + " ", "x" + p, strings.ToUpper(p) + "!"} {
			if _, in := ids[other]; in {
				continue
			}
			if id, ok := tab.get(other); ok {
				t.Fatalf("get(%q) = %d, a phrase the table was not given", other, id)
			}
		}
	}
	if _, ok := newPhraseTable(nil).get("x"); ok {
		t.Error("an empty table found a phrase")
	}
}
