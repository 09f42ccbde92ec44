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
// other nodes too, the whole answer is never counted, and a newer
// generation counts afresh.
func TestPreparedMaskShapesAreBounded(t *testing.T) {
	a := answers{maxShapes: 2}
	p := &prepared{wire: make([]byte, 10)}
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
	} {
		if admits := a.admits(1, tc.key.mask); admits != tc.kept {
			t.Errorf("ask %d (%v): admitted %v, want %v", i, tc.key, admits, tc.kept)
		}
		a.put(1, tc.key, p)
		if kept := a.get(1, tc.key) != nil; kept != tc.kept {
			t.Errorf("ask %d (%v): kept %v, want %v", i, tc.key, kept, tc.kept)
		}
	}
	if len(a.shapes) != 2 {
		t.Errorf("%d shapes counted, want 2", len(a.shapes))
	}
	a.put(2, answerKey{node: "a", mask: "load_score"}, p)
	if a.get(2, answerKey{node: "a", mask: "load_score"}) == nil || len(a.shapes) != 1 {
		t.Errorf("generation 2 did not count shapes afresh (%d counted)", len(a.shapes))
	}
	if !a.admits(2, "routable") {
		t.Error("generation 2 refused a second shape")
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
