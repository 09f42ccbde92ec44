package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// Row is one line of the run's table: a figure, its value, the bound it is
// held to ("" for a figure only reported) and whether it kept it.
type Row struct {
	Figure, Value, Bound string
	// Failed is set when the figure broke its bound: the run fails.
	Failed bool
}

// Table is the run's figures, in order.
type Table struct {
	Rows []Row
}

// Report adds a figure held to no bound.
func (t *Table) Report(figure, value string) {
	t.Rows = append(t.Rows, Row{Figure: figure, Value: value})
}

// Check adds a figure held to bound; ok says whether it kept it.
func (t *Table) Check(figure, value, bound string, ok bool) {
	t.Rows = append(t.Rows, Row{Figure: figure, Value: value, Bound: bound, Failed: !ok})
}

// Failures are the figures that broke their bounds.
func (t *Table) Failures() []Row {
	var out []Row
	for _, r := range t.Rows {
		if r.Failed {
			out = append(out, r)
		}
	}
	return out
}

// Markdown renders the table.
func (t *Table) Markdown() string {
	var b strings.Builder
	b.WriteString("| figure | value | bound | |\n|---|---|---|---|\n")
	for _, r := range t.Rows {
		mark := ""
		switch {
		case r.Failed:
			mark = "FAIL"
		case r.Bound != "":
			mark = "ok"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(r.Figure), cell(r.Value), cell(r.Bound), mark)
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// MedianUsage is the per-figure median of samples.
func MedianUsage(samples []Usage) Usage {
	med := func(get func(Usage) float64) float64 {
		if len(samples) == 0 {
			return 0
		}
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = get(s)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Usage{
		Goroutines:    med(func(u Usage) float64 { return u.Goroutines }),
		HeapGoalBytes: med(func(u Usage) float64 { return u.HeapGoalBytes }),
		RSSBytes:      med(func(u Usage) float64 { return u.RSSBytes }),
	}
}
