package diagnose

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// SLOMetric is the latency histogram an SLO is about.
type SLOMetric string

// The latency metrics an SLO may name.
const (
	// SLOTTFT is the time to first token.
	SLOTTFT SLOMetric = "ttft"
	// SLOInterToken is the gap between output tokens: the engine's
	// inter-token histogram, or its time per output token where that is what
	// it exports (as llmdiag reads the inter-token latency everywhere).
	SLOInterToken SLOMetric = "inter_token"
	// SLOE2E is the end-to-end request latency.
	SLOE2E SLOMetric = "e2e"
)

// SLOMetrics are the metrics an SLO may name, in the order findings list
// them.
var sloMetrics = [...]SLOMetric{SLOTTFT, SLOInterToken, SLOE2E}

// SLO is a latency objective: at least Objective of the requests (of Model,
// or of every model) finish Metric within Target, over Period. Attainment is
// read from the latency histogram's buckets (histogram.AttainmentAt) and the
// error budget's burn over the windows of BurnAlerts (docs/slo.md).
type SLO struct {
	// Name identifies the SLO in findings and rules; it defaults to
	// "<metric>-<target>" (e.g. "ttft-2s").
	Name string
	// Metric is the latency the SLO is about.
	Metric SLOMetric
	// Target is the latency a request must not exceed to count as good.
	Target time.Duration
	// Objective is the share of good requests promised, in (0, 1).
	Objective float64
	// Period is the span the objective is promised over (7d to 366d).
	Period time.Duration
	// Model restricts the SLO to nodes serving this model; "" is every
	// model.
	Model string
}

// SLOSet is a list of SLOs that never changes once made. Its zero value is
// empty. It keeps Thresholds comparable with ==: two sets are equal when
// they are the same set (NewSLOSet), which is what the callers that compare
// thresholds (a peer group checking it was built with the thresholds it is
// asked about) need.
type SLOSet struct{ list *[]SLO }

// NewSLOSet returns the set of a copy of slos.
func NewSLOSet(slos ...SLO) SLOSet {
	if len(slos) == 0 {
		return SLOSet{}
	}
	c := slices.Clone(slos)
	return SLOSet{&c}
}

// List returns the SLOs, which the caller must not modify; nil when empty.
func (s SLOSet) List() []SLO {
	if s.list == nil {
		return nil
	}
	return *s.list
}

// Minimum and maximum SLO periods: the burn alerts' factors are shares of a
// period's budget (BurnAlerts), which make little sense below a week.
const (
	minSLOPeriod = 7 * 24 * time.Hour
	maxSLOPeriod = 366 * 24 * time.Hour
)

// sloNameRE is what an SLO name may be: it becomes a Prometheus label value
// and a file-friendly word.
var sloNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// ErrBudget is 1 − Objective, the share of requests the SLO allows to miss.
func (s SLO) ErrBudget() float64 { return 1 - s.Objective }

// validate reports what is wrong with s, each error naming slos[i].key.
func (s SLO) validate(i int) []error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("slos[%d].%s: "+format, append([]any{i, key}, args...)...))
		}
	}
	check(sloNameRE.MatchString(s.Name), "name", "want letters, digits and _ . : - (starting with a letter or digit), got %q", s.Name)
	known := false
	for _, m := range sloMetrics {
		known = known || s.Metric == m
	}
	check(known, "metric", "want ttft, inter_token or e2e, got %q", s.Metric)
	check(s.Target > 0, "target", "must be positive, got %v", s.Target)
	check(s.Objective > 0 && s.Objective < 1, "objective", "must be in (0, 1), e.g. 0.99, got %v", s.Objective)
	check(s.Period >= minSLOPeriod && s.Period <= maxSLOPeriod, "period", "must be from 7d to 366d, got %s", model.Duration(s.Period))
	return errs
}

// validateSLOs checks every SLO and that names are unique.
func validateSLOs(slos []SLO) []error {
	var errs []error
	seen := map[string]int{}
	for i, s := range slos {
		errs = append(errs, s.validate(i)...)
		if j, ok := seen[s.Name]; ok && s.Name != "" {
			errs = append(errs, fmt.Errorf("slos[%d].name: %q repeats slos[%d]", i, s.Name, j))
		}
		seen[s.Name] = i
	}
	return errs
}

// sloKeys are the keys of one SLO in the thresholds file, in the order
// WriteThresholds prints them.
var sloKeys = [...]string{"name", "metric", "target", "objective", "period", "model"}

// decodeSLOs reads the value of the slos key: a sequence of mappings of
// sloKeys. Every error names slos[i].key and its line.
func decodeSLOs(n *yaml.Node) ([]SLO, []error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, []error{fmt.Errorf("line %d: slos: want a list of SLOs", n.Line)}
	}
	var (
		out  []SLO
		errs []error
	)
	for i, item := range n.Content {
		if item.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("line %d: slos[%d]: want a mapping of %s", item.Line, i, strings.Join(sloKeys[:], ", ")))
			continue
		}
		var s SLO
		seen := map[string]int{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, v := item.Content[j], item.Content[j+1]
			key := k.Value
			at := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("line %d: slos[%d].%s: "+format, append([]any{v.Line, i, key}, args...)...))
			}
			if first, ok := seen[key]; ok {
				at("repeated (first on line %d)", first)
				continue
			}
			seen[key] = k.Line
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				at("want a single value")
				continue
			}
			switch key {
			case "name", "model":
				if v.Tag != "!!str" {
					at("want a string, got %q", v.Value)
					continue
				}
				if key == "name" {
					s.Name = v.Value
				} else {
					s.Model = v.Value
				}
			case "metric":
				s.Metric = SLOMetric(v.Value)
			case "target":
				d, err := time.ParseDuration(v.Value)
				if v.Tag != "!!str" || err != nil {
					at("want a duration such as \"2s\" or \"200ms\", got %q", v.Value)
					continue
				}
				s.Target = d
			case "objective":
				f, err := strconv.ParseFloat(v.Value, 64)
				if (v.Tag != "!!float" && v.Tag != "!!int") || err != nil || math.IsNaN(f) {
					at("want a number such as 0.99, got %q", v.Value)
					continue
				}
				s.Objective = f
			case "period":
				d, err := model.ParseDuration(v.Value)
				if v.Tag != "!!str" || err != nil {
					at("want a duration such as \"28d\" or \"720h\", got %q", v.Value)
					continue
				}
				s.Period = time.Duration(d)
			default:
				errs = append(errs, fmt.Errorf("line %d: slos[%d]: unknown key %q (want %s)", k.Line, i, key, strings.Join(sloKeys[:], ", ")))
			}
		}
		for _, req := range []string{"metric", "target", "objective", "period"} {
			if _, ok := seen[req]; !ok {
				errs = append(errs, fmt.Errorf("line %d: slos[%d].%s: missing", item.Line, i, req))
			}
		}
		if s.Name == "" && s.Metric != "" && s.Target > 0 {
			s.Name = string(s.Metric) + "-" + ShortDuration(s.Target)
		}
		out = append(out, s)
	}
	return out, errs
}

// writeSLOs writes the slos key: the SLOs of t, or a commented example
// and an empty list.
func writeSLOs(b *strings.Builder, slos []SLO) {
	b.WriteString("\n")
	for _, line := range wrap("Latency SLOs: at least objective of the requests (of model, or of every model) finish "+
		"metric (ttft, inter_token or e2e) within target, over period (7d to 366d). "+
		"Attainment is read from the latency histogram's buckets, as a lower and an upper bound when target is not a bucket bound; "+
		"the error budget's burn over 1h and 5m at 2% of the period's budget per hour is CRIT, "+
		"over 6h and 30m at 5% per 6 hours is WARN (docs/slo.md). Default: none. For example:", 76) {
		b.WriteString("# " + line + "\n")
	}
	b.WriteString("#   slos:\n" +
		"#     - name: ttft-2s\n" +
		"#       metric: ttft\n" +
		"#       target: \"2s\"\n" +
		"#       objective: 0.99\n" +
		"#       period: \"28d\"\n" +
		"#       model: deepseek-v4   # optional: every model when left out\n")
	if len(slos) == 0 {
		b.WriteString("slos: []\n")
		return
	}
	b.WriteString("slos:\n")
	for _, s := range slos {
		b.WriteString("  - name: " + strconv.Quote(s.Name) + "\n" +
			"    metric: " + string(s.Metric) + "\n" +
			"    target: " + strconv.Quote(ShortDuration(s.Target)) + "\n" +
			"    objective: " + strconv.FormatFloat(s.Objective, 'g', -1, 64) + "\n" +
			"    period: " + strconv.Quote(model.Duration(s.Period).String()) + "\n")
		if s.Model != "" {
			b.WriteString("    model: " + strconv.Quote(s.Model) + "\n")
		}
	}
}
