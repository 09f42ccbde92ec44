package benchtable_test

import (
	"os"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/internal/benchtable"
)

// TestMedians reads three and two runs and prints each unit's median, the
// benchmark's name without its GOMAXPROCS suffix; log lines are skipped.
func TestMedians(t *testing.T) {
	f, err := os.Open("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := benchtable.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := benchtable.Write(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := "| benchmark | runs | medians |\n|---|---|---|\n" +
		"| Unary/store=memory/conc=1/call=metrics | 3 | 150000 ns/op · 70.7 health-p50-µs · 100 p50-µs · 700 p99-µs · 1.50 x-health |\n" +
		"| StoreList | 2 | 13000 ns/op · 4096 B/op · 12 allocs/op |\n"
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestMalformed: a result line whose values do not pair with units is an
// error that names the line.
func TestMalformed(t *testing.T) {
	_, err := benchtable.Parse(strings.NewReader("BenchmarkX-2 10 5 ns/op 7\n"))
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("err = %v, want one naming line 1", err)
	}
}
