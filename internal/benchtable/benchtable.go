package benchtable

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Row is one benchmark's medians.
type Row struct {
	Name string
	Runs int
	// Units in the order the benchmark first reported them, and the
	// median of each over the runs that reported it.
	Units   []string
	Medians map[string]float64
}

// Parse reads benchmark result lines ("BenchmarkX-2  N  v unit  v unit…")
// and returns a row per benchmark, in the order first seen. Other lines
// (PASS, ok, goos…) are skipped; a malformed result line is an error.
func Parse(r io.Reader) ([]Row, error) {
	var rows []Row
	index := map[string]int{}
	values := map[string]map[string][]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a log line that starts with a benchmark's name
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: want value-unit pairs after the iteration count: %q", line, sc.Text())
		}
		name := trimProcs(f[0])
		i, ok := index[name]
		if !ok {
			i = len(rows)
			index[name] = i
			rows = append(rows, Row{Name: name, Medians: map[string]float64{}})
			values[name] = map[string][]float64{}
		}
		rows[i].Runs++
		for k := 2; k < len(f); k += 2 {
			v, err := strconv.ParseFloat(f[k], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: value %q: %w", line, f[k], err)
			}
			unit := f[k+1]
			if _, seen := values[name][unit]; !seen {
				rows[i].Units = append(rows[i].Units, unit)
			}
			values[name][unit] = append(values[name][unit], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i := range rows {
		for unit, vs := range values[rows[i].Name] {
			rows[i].Medians[unit] = median(vs)
		}
	}
	return rows, nil
}

// trimProcs drops the -GOMAXPROCS suffix go test adds to a name.
func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Write prints rows as one Markdown table: benchmark, runs, and the
// medians, each with its unit.
func Write(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| benchmark | runs | medians |\n|---|---|---|\n")
	for _, r := range rows {
		cells := make([]string, len(r.Units))
		for i, u := range r.Units {
			cells[i] = format(r.Medians[u]) + " " + u
		}
		fmt.Fprintf(&b, "| %s | %d | %s |\n", strings.TrimPrefix(r.Name, "Benchmark"), r.Runs, strings.Join(cells, " · "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// format keeps three significant figures, without exponents; whole
// numbers print whole.
func format(v float64) string {
	switch a := max(v, -v); {
	case a >= 100 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
