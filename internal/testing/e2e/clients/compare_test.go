package clients_test

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

// compareTable is `llmdiag compare`'s text output, parsed.
type compareTable struct {
	head   []string
	rows   [][]string
	legend bool     // the ≈ explanation follows the table
	notes  []string // "note: …" lines
}

var columnGap = regexp.MustCompile(`\s{2,}`)

// parseCompare splits the table on runs of two or more spaces, which
// printCompare keeps out of its cells.
func parseCompare(out string) (compareTable, bool) {
	var t compareTable
	lines := strings.Split(out, "\n")
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], "SUBJECT") {
		i++
	}
	if i == len(lines) {
		return t, false
	}
	t.head = columnGap.Split(strings.TrimSpace(lines[i]), -1)
	// Rows end at a blank line (before the ≈ legend) or at the first note:
	// with no value within resolution there is no legend, and the notes
	// follow the table directly.
	for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "" && !strings.HasPrefix(lines[i], "note: "); i++ {
		cells := columnGap.Split(strings.TrimSpace(lines[i]), -1)
		if len(cells) != len(t.head) {
			return t, false
		}
		t.rows = append(t.rows, cells)
	}
	for ; i < len(lines); i++ {
		switch {
		case strings.HasPrefix(lines[i], "≈ within bucket resolution"):
			t.legend = true
		case strings.HasPrefix(lines[i], "note: "):
			t.notes = append(t.notes, lines[i])
		}
	}
	return t, true
}

// TestParseCompareWithoutLegend is the output of a run on a busy machine:
// two groups, neither value within the median's bucket, so no ≈ legend and
// the note right under the table. The parser read the note as a row.
func TestParseCompareWithoutLegend(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "compare-by-label-no-legend.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ct, ok := parseCompare(string(b))
	if !ok || len(ct.rows) != 3 || ct.legend || len(ct.notes) != 1 || ct.col("P90") < 0 {
		t.Fatalf("parsed %v: %d rows, legend %v, notes %q, head %q", ok, len(ct.rows), ct.legend, ct.notes, ct.head)
	}
	if got := ct.rows[0][0] + "," + ct.rows[1][0] + "," + ct.rows[2][0]; got != "a,b,(no pool label)" {
		t.Errorf("subjects %s", got)
	}
}

func (t compareTable) col(name string) int {
	for i, h := range t.head {
		if h == name || strings.HasPrefix(h, name+" ") {
			return i
		}
	}
	return -1
}

// valueCell is one "1.20s (1.00s–2.50s) #1 0.85×≈" cell.
type valueCell struct {
	value, lo, hi float64
	rank          int
	ratio         float64
	within        bool
}

var valueCellRE = regexp.MustCompile(`^(\S+) \((\S+)–(\S+)\)(?: #(\d+) ([0-9.]+)×)?(≈)?$`)

func parseValueCell(s string) (valueCell, bool) {
	m := valueCellRE.FindStringSubmatch(s)
	if m == nil {
		return valueCell{}, false
	}
	var c valueCell
	var ok1, ok2, ok3 bool
	c.value, ok1 = parseSeconds(m[1])
	c.lo, ok2 = parseSeconds(m[2])
	c.hi, ok3 = parseSeconds(m[3])
	if m[4] != "" {
		c.rank, _ = strconv.Atoi(m[4])
		c.ratio, _ = strconv.ParseFloat(m[5], 64)
	}
	c.within = m[6] != ""
	return c, ok1 && ok2 && ok3
}

// parseSeconds reads the CLI's durations: 250µs, 2.5ms, 350ms, 1.20s,
// 2.5min, +Inf.
func parseSeconds(s string) (float64, bool) {
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"µs", 1e-6}, {"ms", 1e-3}, {"min", 60}, {"s", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f * u.scale, err == nil
		}
	}
	if s == "+Inf" {
		return math.Inf(1), true
	}
	return 0, false
}

// TestCompareSeedByModel is the acceptance case of ComparePercentiles: on the
// seed scenario, `compare --metric ttft --by model` ranks the three models,
// each value with its bucket bounds; ties and within-resolution marks agree
// with the bounds shown. The same fleet, with labels added to its file,
// groups by label and compares against a baseline.
func TestCompareSeedByModel(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compare on the simulated seed fleet")
	}
	dir := t.TempDir()
	simFleet := filepath.Join(dir, "sim.yaml")
	f := clitest.Sim(t, "seed", simFleet)

	// Label the simulator's fleet: deepseek nodes pool=a, glm pool=b, kimi none.
	for i, n := range f.Nodes {
		switch {
		case strings.HasPrefix(n.ID, "deepseek"):
			f.Nodes[i].Labels = map[string]string{"pool": "a"}
		case strings.HasPrefix(n.ID, "glm"):
			f.Nodes[i].Labels = map[string]string{"pool": "b"}
		}
	}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	fleetPath := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetPath, data, 0o600); err != nil {
		t.Fatal(err)
	}

	addr := testkit.FreeAddr(t)
	vars := map[string]string{"LLMDIAG_LISTEN": addr, "LLMDIAG_ADDR": "http://" + addr, "LLMDIAG_INTERVAL": "500ms"}
	clitest.Background(t, vars, "serve", "--fleet", fleetPath)

	// Under load a scrape can miss its deadline and leave a node without
	// data for a refresh: wait for all three models with values.
	models := []string{"deepseek-v4", "glm-4.6", "kimi-k2.6"}
	var out string
	var table compareTable
	clitest.WaitFor(t, "compare --by model to rank three models", 60*time.Second, func() bool {
		o, _, err := clitest.Run(t, vars, "compare", "--metric", "ttft", "--by", "model")
		out = o
		var ok bool
		if table, ok = parseCompare(o); err != nil || !ok || len(table.rows) != 3 {
			return false
		}
		for _, r := range table.rows {
			for i, h := range table.head {
				if strings.HasPrefix(h, "P") && r[i] == "-" {
					return false
				}
			}
		}
		return true
	}, &out)
	t.Logf("compare --metric ttft --by model:\n%s", out)

	subject := table.col("SUBJECT")
	var got []string
	for _, r := range table.rows {
		got = append(got, r[subject])
	}
	if strings.Join(got, ",") != strings.Join(models, ",") {
		t.Fatalf("subjects %v, want %v", got, models)
	}
	for _, q := range []string{"P50", "P95", "P99"} {
		col := table.col(q)
		if col < 0 {
			t.Fatalf("no %s column in %q", q, table.head)
		}
		cells := make([]valueCell, len(table.rows))
		anyWithin := false
		for i, r := range table.rows {
			c, ok := parseValueCell(r[col])
			if !ok {
				t.Fatalf("%s %s: cell %q is not value (lower–upper) #rank ratio×", r[subject], q, r[col])
			}
			// The value lies in its bucket (1% for the rounding of the display).
			if !(c.lo < c.hi && c.lo*0.99 <= c.value && c.value <= c.hi*1.01) || c.rank < 1 || c.rank > 3 || c.ratio <= 0 {
				t.Errorf("%s %s: %+v", r[subject], q, c)
			}
			cells[i] = c
			anyWithin = anyWithin || c.within
		}
		// Ranks follow the values, and values in the same bucket share one.
		for i, a := range cells {
			for j, b := range cells {
				sameBucket := a.lo == b.lo && a.hi == b.hi
				switch {
				case sameBucket && a.rank != b.rank:
					t.Errorf("%s: %s and %s share a bucket but rank %d and %d", q, models[i], models[j], a.rank, b.rank)
				case !sameBucket && a.value < b.value && a.rank >= b.rank:
					t.Errorf("%s: %s (%v) ranks %d, not ahead of %s (%v) at %d", q, models[i], a.value, a.rank, models[j], b.value, b.rank)
				}
			}
		}
		// The median subject's value is in its own bucket: at least one ≈.
		if !anyWithin {
			t.Errorf("%s: no value marked within resolution", q)
		}
	}
	if !table.legend {
		t.Errorf("no explanation of ≈ under the table:\n%s", out)
	}
	for _, col := range []string{"TAIL", "OUTLIER"} {
		if table.col(col) < 0 {
			t.Errorf("no %s column", col)
		}
	}

	// Labels reach ListNodes and group the comparison.
	o, _, err := clitest.Run(t, vars, "nodes", "--format", "json")
	nodes := &llmdiagv1.ListNodesResponse{}
	if err != nil || protojson.Unmarshal([]byte(o), nodes) != nil {
		t.Fatalf("nodes: %v\n%s", err, o)
	}
	for _, n := range nodes.GetNodes() {
		want := map[bool]string{true: "a", false: ""}[strings.HasPrefix(n.GetId(), "deepseek")]
		if strings.HasPrefix(n.GetId(), "glm") {
			want = "b"
		}
		if n.GetLabels()["pool"] != want {
			t.Errorf("%s: labels %v, want pool=%q", n.GetId(), n.GetLabels(), want)
		}
	}
	o, _, err = clitest.Run(t, vars, "compare", "--metric", "ttft", "--by", "label=pool", "--quantiles", "0.5,0.9")
	lt, ok := parseCompare(o)
	if err != nil || !ok || len(lt.rows) != 3 || lt.col("P90") < 0 {
		t.Fatalf("compare --by label=pool: err %v, parsed %v, %d rows, head %q:\n%s", err, ok, len(lt.rows), lt.head, o)
	}
	t.Logf("compare --metric ttft --by label=pool --quantiles 0.5,0.9:\n%s", o)
	if got := lt.rows[0][0] + "," + lt.rows[1][0] + "," + lt.rows[2][0]; got != "a,b,(no pool label)" {
		t.Errorf("label rows %s", got)
	}
	if len(lt.notes) != 1 || !strings.Contains(lt.notes[0], `without the label "pool"`) {
		t.Errorf("notes %q", lt.notes)
	}

	// A baseline the scrape ring holds: rows in pairs. One it cannot reach:
	// the same pairs, the baseline rows with a note, not a failure.
	// The service caches a window in the past for a minute, so each try
	// asks for a slightly different one: the first may find too few
	// samples that far back and have no baseline.
	baseline := 2 * time.Second
	clitest.WaitFor(t, "a baseline 2s back", 30*time.Second, func() bool {
		baseline += 10 * time.Millisecond
		o, _, err = clitest.Run(t, vars, "compare", "--metric", "ttft", "--by", "model", "--baseline", baseline.String())
		bt, ok := parseCompare(o)
		return err == nil && ok && len(bt.rows) == 6 && bt.col("×BASELINE") > 0 && bt.rows[0][bt.col("×BASELINE")] != "-" && len(bt.notes) == 0
	}, &o)
	t.Logf("compare --metric ttft --by model --baseline %s:\n%s", baseline, o)
	bt, _ := parseCompare(o)
	when := bt.col("WHEN")
	for i, r := range bt.rows {
		if want := map[bool]string{true: "now", false: baseline.String() + " before"}[i%2 == 0]; r[when] != want || r[0] != models[i/2] {
			t.Errorf("row %d: %s %s, want %s %s", i, r[0], r[when], models[i/2], want)
		}
	}
	o, _, err = clitest.Run(t, vars, "compare", "--metric", "ttft", "--by", "model", "--baseline", "24h")
	ft, ok := parseCompare(o)
	if err != nil || !ok || len(ft.rows) != 6 || len(ft.notes) != 3 || !strings.Contains(ft.notes[0], "no baseline for") {
		t.Fatalf("compare --baseline 24h: %v\n%s", err, o)
	}
	t.Logf("compare --metric ttft --by model --baseline 24h:\n%s", o)
}
