package human

import (
	"fmt"
	"math"
)

// Seconds formats a duration given in seconds (a latency, a percentile's
// bucket bound): microseconds below a millisecond (250µs), milliseconds
// below a second with a tenth below ten (2.5ms, 120ms), seconds with
// hundredths below a minute (2.50s), then minutes with a tenth (13.3min).
// Zero is 0ms, NaN (no value) is "-", and infinities are +Inf and -Inf.
func Seconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == 0:
		return "0ms"
	case v < 0:
		return "-" + Seconds(-v)
	case v >= 60:
		return fmt.Sprintf("%.1fmin", v/60)
	case v >= 1:
		return fmt.Sprintf("%.2fs", v)
	case v >= 0.01:
		return fmt.Sprintf("%.0fms", v*1e3)
	case v >= 0.001:
		return fmt.Sprintf("%.1fms", v*1e3)
	}
	return fmt.Sprintf("%.0fµs", v*1e6)
}
