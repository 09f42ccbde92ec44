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

// Settled sums up samples taken a second apart: the median number of
// goroutines (a leader's count moves with the connections and scrapes in
// flight at the moment read, and its lowest is a passing lull), and the
// lowest heap goal and resident memory, the floor a leak raises: one
// reading of the heap goal depends on what was live at the last
// collection (a large answer being encoded, a sync in flight), which moves
// it by tens of percent from one collection to the next; the lowest over
// several collections does not move unless what the process keeps does.
func Settled(samples []Usage) Usage {
	if len(samples) == 0 {
		return Usage{}
	}
	g := make([]float64, len(samples))
	out := samples[0]
	for i, s := range samples {
		g[i] = s.Goroutines
		out.HeapGoalBytes = min(out.HeapGoalBytes, s.HeapGoalBytes)
		out.RSSBytes = min(out.RSSBytes, s.RSSBytes)
	}
	slices.Sort(g)
	if len(g)%2 == 1 {
		out.Goroutines = g[len(g)/2]
	} else {
		out.Goroutines = (g[len(g)/2-1] + g[len(g)/2]) / 2
	}
	return out
}
