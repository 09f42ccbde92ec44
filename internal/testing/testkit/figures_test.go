package testkit

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestNear(t *testing.T) {
	for _, tc := range []struct {
		got, want, tol float64
		near           bool
	}{
		{1, 1, 0, true},
		{0.5, 0.5 + 1e-10, 1e-9, true},
		{0.5, 0.5 + 1e-8, 1e-9, false},
		{1e6, 1e6 + 1e-4, 1e-9, true}, // relative above 1
		{1e6, 1e6 + 1e-2, 1e-9, false},
		{math.NaN(), math.NaN(), 0, true},
		{math.NaN(), 1, 1, false},
		{1, math.NaN(), 1, false},
		{math.Inf(1), math.Inf(1), 0, true},
	} {
		if got := Near(tc.got, tc.want, tc.tol); got != tc.near {
			t.Errorf("Near(%v, %v, %v) = %v", tc.got, tc.want, tc.tol, got)
		}
	}
	one, two := 1.0, 2.0
	if !NearPtr(nil, nil, 0) || NearPtr(&one, nil, 0) || NearPtr(nil, &one, 0) || NearPtr(&one, &two, 0) || !NearPtr(&one, &one, 0) {
		t.Error("NearPtr: both absent agree, one absent does not, both present compare")
	}
	if Show(nil) != "absent" || Show(&two) != "2" {
		t.Errorf("Show = %q, %q", Show(nil), Show(&two))
	}
}

type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Helper() {}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func TestFigures(t *testing.T) {
	one, three := 1.0, 3.0
	e := &errorsTB{TB: t}
	fig := Figures(e, 1e-12)
	fig("same", &one, &one)
	fig("queue", &three, nil)
	fig("kv", nil, &one)
	fig("both absent", nil, nil)
	if got := strings.Join(e.errs, "; "); got != "queue = 3, want absent; kv = absent, want 1" {
		t.Fatalf("Figures reported %q", got)
	}
}
