package server

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/readmask"
)

// TestPreparedAnswersAreBounded: the answers of one generation are kept up
// to the byte bound, and no further; a newer generation starts afresh, and
// an answer prepared at an older one is not kept.
func TestPreparedAnswersAreBounded(t *testing.T) {
	a := answers{max: 250}
	p := &prepared{wire: make([]byte, 100)}
	for i, node := range []string{"a", "b", "c"} {
		a.put(1, answerKey{node: node}, p)
		if kept := a.get(1, answerKey{node: node}) != nil; kept != (i < 2) {
			t.Errorf("answer %d of 100 B under a 250 B bound kept: %v", i+1, kept)
		}
	}
	if a.bytes != 200 {
		t.Errorf("%d bytes held, want 200", a.bytes)
	}
	if a.get(2, answerKey{node: "a"}) != nil {
		t.Error("an answer of generation 1 served at generation 2")
	}
	a.put(2, answerKey{node: "c"}, p)
	if a.get(2, answerKey{node: "c"}) == nil || a.get(1, answerKey{node: "a"}) != nil || a.bytes != 100 {
		t.Errorf("generation 2 did not replace generation 1 (%d bytes held)", a.bytes)
	}
	a.put(1, answerKey{node: "d"}, p) // prepared from an older store
	if a.get(1, answerKey{node: "d"}) != nil || a.get(2, answerKey{node: "d"}) != nil {
		t.Error("an answer of an older generation was kept")
	}
}

// TestPreparedMaskShapesAreBounded: answers are kept for at most
// maxShapes distinct masks a generation; a mask already kept is kept for
// other nodes too, and the whole answer is never counted. At the next
// generation the masks served again keep their places ahead of any other;
// one prepared and never served again does not.
func TestPreparedMaskShapesAreBounded(t *testing.T) {
	a := answers{maxShapes: 2}
	p := &prepared{wire: make([]byte, 10)}
	ask := func(gen uint64, key answerKey) bool {
		if a.get(gen, key) != nil {
			return true
		}
		if !a.admits(gen, key.mask) {
			return false
		}
		a.put(gen, key, p)
		return a.shapes[key.mask] != nil || key.mask == ""
	}
	for i, tc := range []struct {
		key  answerKey
		kept bool
	}{
		{answerKey{node: "a", mask: "status"}, true},
		{answerKey{node: "a", mask: "routable"}, true},
		{answerKey{node: "a", mask: "load_score"}, false}, // a third shape
		{answerKey{node: "b", mask: "status"}, true},      // a shape already kept
		{answerKey{node: "b"}, true},                      // the whole answer
		{answerKey{node: "c"}, true},
		{answerKey{node: "a", mask: "status"}, true}, // served again
	} {
		if kept := ask(1, tc.key); kept != tc.kept {
			t.Errorf("generation 1, ask %d (%v): kept %v, want %v", i, tc.key, kept, tc.kept)
		}
	}
	if len(a.shapes) != 2 {
		t.Errorf("%d shapes counted, want 2", len(a.shapes))
	}
	// Generation 2: "status" was served again, "routable" only prepared.
	for i, tc := range []struct {
		key  answerKey
		kept bool
	}{
		{answerKey{node: "a", mask: "load_score"}, true}, // the place routable held
		{answerKey{node: "a", mask: "routable"}, false},
		{answerKey{node: "a", mask: "status"}, true}, // asked late, its place kept
	} {
		if kept := ask(2, tc.key); kept != tc.kept {
			t.Errorf("generation 2, ask %d (%v): kept %v, want %v", i, tc.key, kept, tc.kept)
		}
	}
	if len(a.shapes) != 2 || a.byKey[answerKey{node: "a", mask: "status"}] == nil {
		t.Errorf("generation 2: %d shapes counted, status prepared %v", len(a.shapes), a.byKey[answerKey{node: "a", mask: "status"}] != nil)
	}
	// Generation 3: neither was served again at 2; the first asked win.
	for i, mask := range []string{"a", "b", "c"} {
		if kept := ask(3, answerKey{node: "a", mask: mask}); kept != (i < 2) {
			t.Errorf("generation 3, mask %q: kept %v, want %v", mask, kept, i < 2)
		}
	}
}

// TestParsedMasksAreBounded: read masks are kept parsed up to
// maxParsedMasks; past it a mask is parsed on each call, and answered the
// same; a refused mask is never kept.
func TestParsedMasksAreBounded(t *testing.T) {
	var c maskCache
	parses := 0
	for i := range maxParsedMasks + 10 {
		paths := []string{"status", fmt.Sprint("n", i)}
		for range 2 {
			m, err := c.get("nodes", paths, func() (readmask.Mask, error) {
				parses++
				return readmask.Parse(&llmdiagv1.Node{}, []string{"status"})
			})
			if err != nil || m.Key() != "status" {
				t.Fatalf("mask %d: %q, %v", i, m.Key(), err)
			}
		}
	}
	if len(c.m) != maxParsedMasks || parses != maxParsedMasks+2*10 {
		t.Errorf("%d masks kept, %d parses; want %d kept, %d parses", len(c.m), parses, maxParsedMasks, maxParsedMasks+20)
	}
	var d maskCache
	for range 2 {
		if _, err := d.get("nodes", []string{"nope"}, func() (readmask.Mask, error) { return nodeMask(&fieldmaskpb.FieldMask{Paths: []string{"nope"}}) }); err == nil {
			t.Fatal("an unknown path was not refused")
		}
	}
	if len(d.m) != 0 {
		t.Error("a refused mask was kept")
	}
}
