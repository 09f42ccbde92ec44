package human

import (
	"math"
	"testing"
)

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{math.NaN(), "-"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
		{0, "0ms"},
		{0.00000042, "0µs"},
		{0.000042, "42µs"},
		{0.00025, "250µs"},
		{0.001, "1.0ms"},
		{0.0025, "2.5ms"},
		{0.01, "10ms"},
		{0.12, "120ms"},
		{0.9994, "999ms"},
		{1, "1.00s"},
		{2.5, "2.50s"},
		{59.99, "59.99s"},
		{60, "1.0min"},
		{800, "13.3min"},
		{-0.12, "-120ms"},
	} {
		if got := Seconds(tc.v); got != tc.want {
			t.Errorf("Seconds(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
