package histogram

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/llmdiag/llmdiag/sample"
)

func h(sum, count float64, pairs ...float64) *sample.Histogram {
	out := &sample.Histogram{Sum: sum, Count: count}
	for i := 0; i+1 < len(pairs); i += 2 {
		out.Bounds = append(out.Bounds, pairs[i])
		out.Counts = append(out.Counts, pairs[i+1])
	}
	return out
}

func TestSub(t *testing.T) {
	older := h(10, 4, 0.1, 1, 1, 3, inf, 4)
	tests := []struct {
		name         string
		newer, older *sample.Histogram
		want         *sample.Histogram
		reset        bool
	}{
		{
			// Per bucket: 3-1, 7-3, 9-4; sum 25-10, count 9-4.
			name:  "delta",
			newer: h(25, 9, 0.1, 3, 1, 7, inf, 9),
			older: older,
			want:  h(15, 5, 0.1, 2, 1, 4, inf, 5),
		},
		{
			name:  "no change",
			newer: older,
			older: older,
			want:  h(0, 0, 0.1, 0, 1, 0, inf, 0),
		},
		{
			// Engine restarted: fewer observations than before.
			name:  "count decreased",
			newer: h(2, 1, 0.1, 1, 1, 1, inf, 1),
			older: older,
			want:  h(2, 1, 0.1, 1, 1, 1, inf, 1),
			reset: true,
		},
		{
			// Total grew but one bucket fell: still a reset.
			name:  "bucket decreased",
			newer: h(30, 5, 0.1, 0, 1, 4, inf, 5),
			older: older,
			want:  h(30, 5, 0.1, 0, 1, 4, inf, 5),
			reset: true,
		},
		{
			name:  "bounds changed",
			newer: h(30, 6, 0.5, 2, inf, 6),
			older: older,
			want:  h(30, 6, 0.5, 2, inf, 6),
			reset: true,
		},
		{
			// The sum may fall (negative observations) without a reset.
			name:  "sum decreased",
			newer: h(5, 5, 0.1, 2, 1, 3, inf, 5),
			older: older,
			want:  h(-5, 1, 0.1, 1, 1, 0, inf, 1),
		},
		{name: "older nil", newer: older},
		{name: "newer nil", older: older},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := Clone(tc.newer)
			got, reset := Sub(tc.newer, tc.older)
			if !reflect.DeepEqual(got, tc.want) || reset != tc.reset {
				t.Errorf("Sub = %+v, reset %v; want %+v, reset %v", got, reset, tc.want, tc.reset)
			}
			if !reflect.DeepEqual(before, tc.newer) {
				t.Errorf("Sub modified newer")
			}
			if got != nil && got == tc.newer {
				t.Errorf("Sub returned newer itself, want a copy")
			}
		})
	}
}

func TestAdd(t *testing.T) {
	a := h(1.5, 3, 0.1, 1, 1, 2, inf, 3)
	tests := []struct {
		name    string
		a, b    *sample.Histogram
		want    *sample.Histogram
		wantErr error
	}{
		{name: "sum", a: a, b: h(2, 4, 0.1, 0, 1, 4, inf, 4), want: h(3.5, 7, 0.1, 1, 1, 6, inf, 7)},
		{name: "nil left", b: a, want: a},
		{name: "nil right", a: a, want: a},
		{name: "both nil"},
		{name: "different bounds", a: a, b: h(1, 1, 0.2, 1, 1, 1, inf, 1), wantErr: ErrLayout},
		{name: "different length", a: a, b: h(1, 1, 1, 1, inf, 1), wantErr: ErrLayout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Add(tc.a, tc.b)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Add error = %v, want %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Add = %+v, want %+v", got, tc.want)
			}
			if got != nil && (got == tc.a || got == tc.b) {
				t.Errorf("Add returned an operand, want a copy")
			}
		})
	}
	if a.Count != 3 || a.Counts[2] != 3 {
		t.Errorf("Add modified its operand: %+v", a)
	}
}

func TestValidate(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		h    *sample.Histogram
		ok   bool
	}{
		{"valid", h(1, 2, 0, 0, 0.1, 1, inf, 2), true},
		{"only +Inf", h(0, 0, inf, 0), true},
		{"nil", nil, false},
		{"no buckets", h(0, 0), false},
		{"no +Inf bucket", h(1, 2, 0.1, 1, 1, 2), false},
		{"NaN bucket count", h(1, 2, 0.1, nan, inf, 2), false},
		{"NaN count", h(1, nan, 0.1, 1, inf, 2), false},
		{"negative count", h(1, 2, 0.1, -1, inf, 2), false},
		{"unsorted bounds", h(1, 2, 1, 1, 0.1, 1, inf, 2), false},
		{"duplicate bounds", h(1, 2, 1, 1, 1, 1, inf, 2), false},
		{"NaN bound", h(1, 2, nan, 1, inf, 2), false},
		{"counts shorter", &sample.Histogram{Bounds: []float64{1, inf}, Counts: []float64{1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.h)
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestBuckets(t *testing.T) {
	got := Buckets(h(0, 3, 1, 1, inf, 3))
	want := []Bucket{{1, 1}, {inf, 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Buckets = %v, want %v", got, want)
	}
	if Buckets(nil) != nil {
		t.Errorf("Buckets(nil) != nil")
	}
}
