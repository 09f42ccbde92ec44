package histogram

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/llmdiag/llmdiag/sample"
)

var (
	// ErrInvalid marks a histogram that breaks the classic-histogram rules
	// Validate checks.
	ErrInvalid = errors.New("invalid histogram")
	// ErrLayout marks histograms whose bucket bounds differ.
	ErrLayout = errors.New("histogram bucket layouts differ")
)

// Validate checks that h is a usable cumulative histogram: at least one
// bucket, as many counts as bounds, bounds strictly ascending with +Inf last,
// and no NaN or negative counts. Errors wrap ErrInvalid.
func Validate(h *sample.Histogram) error {
	switch {
	case h == nil:
		return fmt.Errorf("%w: nil", ErrInvalid)
	case len(h.Bounds) == 0:
		return fmt.Errorf("%w: no buckets", ErrInvalid)
	case len(h.Bounds) != len(h.Counts):
		return fmt.Errorf("%w: %d bounds but %d counts", ErrInvalid, len(h.Bounds), len(h.Counts))
	case !math.IsInf(h.Bounds[len(h.Bounds)-1], +1):
		return fmt.Errorf("%w: no +Inf bucket", ErrInvalid)
	case math.IsNaN(h.Count) || h.Count < 0:
		return fmt.Errorf("%w: count is %v", ErrInvalid, h.Count)
	}
	for i, b := range h.Bounds {
		if math.IsNaN(b) || (i > 0 && b <= h.Bounds[i-1]) {
			return fmt.Errorf("%w: bucket bounds not strictly ascending at le=%v", ErrInvalid, b)
		}
		if c := h.Counts[i]; math.IsNaN(c) || c < 0 {
			return fmt.Errorf("%w: bucket le=%v has count %v", ErrInvalid, b, c)
		}
	}
	return nil
}

// SameLayout reports whether a and b have the same bucket bounds.
func SameLayout(a, b *sample.Histogram) bool {
	return a != nil && b != nil && slices.Equal(a.Bounds, b.Bounds)
}

// Clone returns a deep copy of h; nil for nil.
func Clone(h *sample.Histogram) *sample.Histogram {
	if h == nil {
		return nil
	}
	return &sample.Histogram{
		Bounds: slices.Clone(h.Bounds),
		Counts: slices.Clone(h.Counts),
		Sum:    h.Sum,
		Count:  h.Count,
	}
}

// Sub returns the observations newer holds beyond older: per-bucket, sum and
// count differences, the histogram of a window between two reads of the same
// cumulative histogram.
//
// When the histogram was reset between the reads (the bucket bounds changed,
// or the count or any bucket count decreased, as after an engine restart)
// Sub returns a copy of newer as the delta and reset true, as Prometheus's
// counter-reset handling does. The sum is not used to detect resets: it may
// legitimately fall when observations are negative.
//
// When either is nil, Sub returns nil and false: no window can be formed.
func Sub(newer, older *sample.Histogram) (delta *sample.Histogram, reset bool) {
	if newer == nil || older == nil {
		return nil, false
	}
	if !SameLayout(newer, older) || len(newer.Counts) != len(older.Counts) || newer.Count < older.Count {
		return Clone(newer), true
	}
	for i, c := range newer.Counts {
		if c < older.Counts[i] {
			return Clone(newer), true
		}
	}
	d := &sample.Histogram{
		Bounds: slices.Clone(newer.Bounds),
		Counts: make([]float64, len(newer.Counts)),
		Sum:    newer.Sum - older.Sum,
		Count:  newer.Count - older.Count,
	}
	for i, c := range newer.Counts {
		d.Counts[i] = c - older.Counts[i]
	}
	return d, false
}

// Add returns the bucket-wise sum of a and b, which must have the same
// bounds (else an error wrapping ErrLayout). A nil operand is an empty
// histogram: Add(nil, b) is a copy of b, which makes Add a fold over series.
func Add(a, b *sample.Histogram) (*sample.Histogram, error) {
	switch {
	case a == nil:
		return Clone(b), nil
	case b == nil:
		return Clone(a), nil
	case !SameLayout(a, b) || len(a.Counts) != len(b.Counts):
		return nil, fmt.Errorf("%w: %s", ErrLayout, layoutDiff(a, b))
	}
	s := Clone(a)
	for i, c := range b.Counts {
		s.Counts[i] += c
	}
	s.Sum += b.Sum
	s.Count += b.Count
	return s, nil
}

// layoutDiff describes where the layouts of a and b first differ.
func layoutDiff(a, b *sample.Histogram) string {
	if len(a.Bounds) != len(b.Bounds) {
		return fmt.Sprintf("%d vs %d buckets", len(a.Bounds), len(b.Bounds))
	}
	for i, x := range a.Bounds {
		if x != b.Bounds[i] {
			return fmt.Sprintf("bucket %d is le=%v vs le=%v", i, x, b.Bounds[i])
		}
	}
	return fmt.Sprintf("%d bounds but %d and %d counts", len(a.Bounds), len(a.Counts), len(b.Counts))
}
