package loadgen

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Dist is a length distribution in tokens: a mixture of weighted classes.
// Its text form (ParseDist) is a comma-separated list of classes, each
// [WEIGHT:]SHAPE, where SHAPE is N (exactly N), A-B (uniform in [A, B]) or
// M~S (log-normal with median M and log-space sigma S). For example
// "256", "100-400", "0.9:200~0.5,0.1:4000".
type Dist []Class

// Class is one component of a Dist.
type Class struct {
	Weight float64
	// Lo and Hi bound a uniform class (equal for a fixed length); Median
	// and Sigma make a log-normal one (Sigma > 0).
	Lo, Hi        int
	Median, Sigma float64
}

// MaxTokens bounds any length a Dist draws.
const MaxTokens = 1 << 20

// ParseDist parses the text form of a Dist.
func ParseDist(s string) (Dist, error) {
	var d Dist
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		c := Class{Weight: 1}
		if w, shape, ok := strings.Cut(part, ":"); ok {
			x, err := strconv.ParseFloat(w, 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%q: weight %q is not a positive number", s, w)
			}
			c.Weight, part = x, shape
		}
		switch {
		case strings.Contains(part, "~"):
			m, sg, _ := strings.Cut(part, "~")
			med, err1 := strconv.ParseFloat(m, 64)
			sigma, err2 := strconv.ParseFloat(sg, 64)
			if err1 != nil || err2 != nil || !(med >= 1) || !(sigma > 0) || med > MaxTokens || sigma > 10 {
				return nil, fmt.Errorf("%q: log-normal %q: want MEDIAN~SIGMA with median ≥ 1 and 0 < sigma ≤ 10", s, part)
			}
			c.Median, c.Sigma = med, sigma
		case strings.Contains(part, "-"):
			a, b, _ := strings.Cut(part, "-")
			lo, err1 := strconv.Atoi(a)
			hi, err2 := strconv.Atoi(b)
			if err1 != nil || err2 != nil || lo < 1 || hi < lo || hi > MaxTokens {
				return nil, fmt.Errorf("%q: range %q: want A-B with 1 ≤ A ≤ B ≤ %d", s, part, MaxTokens)
			}
			c.Lo, c.Hi = lo, hi
		default:
			n, err := strconv.Atoi(part)
			if err != nil || n < 1 || n > MaxTokens {
				return nil, fmt.Errorf("%q: length %q: want a whole number from 1 to %d", s, part, MaxTokens)
			}
			c.Lo, c.Hi = n, n
		}
		d = append(d, c)
	}
	if len(d) == 0 {
		return nil, errors.New("empty length distribution")
	}
	return d, nil
}

// Sample draws a length.
func (d Dist) Sample(rng *rand.Rand) int {
	var total float64
	for _, c := range d {
		total += c.Weight
	}
	u := rng.Float64() * total
	c := d[len(d)-1]
	for _, k := range d {
		if u < k.Weight {
			c = k
			break
		}
		u -= k.Weight
	}
	if c.Sigma > 0 {
		return int(min(max(math.Round(c.Median*math.Exp(c.Sigma*rng.NormFloat64())), 1), MaxTokens))
	}
	return c.Lo + rng.IntN(c.Hi-c.Lo+1)
}
