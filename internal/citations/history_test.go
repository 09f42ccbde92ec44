package citations_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/llmdiag/llmdiag/internal/citations"
)

// TestHistory holds History to lines that tell how the text was made (each
// with the phrases it must find) and to lines of this repository's kind
// that use the same words for what the code does.
func TestHistory(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string // the phrases found, in order; none for a clean line
	}{
		// Issue and pull request numbers.
		{"// Package alerts is llmdiag's Alertmanager receiver (issue 15, item 2):", []string{"issue 15, item 2"}},
		{"// Tracing (issue 18): OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set,", []string{"issue 18"}},
		{"// TestReplicasOneLeaderTakeoverFencing is issue 5's acceptance: three", []string{"issue 5"}},
		{"// Exactness (issue 3 item 6): for every engine schema", []string{"issue 3 item 6"}},
		{"# see Issue #42 and issues 7", []string{"Issue #42", "issues 7"}},
		{"// the fast lane's target (issue no. 17)", []string{"issue no. 17"}},
		{"- Retries the send (#123).", []string{"(#123)"}},
		{"// fixes #12; see #13", []string{"fixes #12", "see #13"}},
		{"// that alerts and verdicts never disagree (item 6).", []string{"(item 6)"}},
		// Rounds of work.
		{"| 68 µs (95 µs there before this round) |", []string{"this round"}},
		{"figures as of the last round", []string{"last round"}},
		{"as measured the previous round", []string{"previous round"}},
		{"95 µs the round before.", []string{"the round before"}},
		{"unchanged since before the first round", []string{"before the first round"}},
		{"two rounds ago this took 3 s", []string{"rounds ago"}},
		// Development machines, sessions, commits.
		{"1.37 ms (0.78 ms on the faster machine)", []string{"faster machine"}},
		{"on a slower machine it takes 2 s", []string{"slower machine"}},
		{"// written in session 4", []string{"session 4"}},
		{"Before answers were prepared (commit 52d399a, same benchmark)", []string{"commit 52d399a"}},

		// The same words for what the code does.
		{"// The issue is the node's queue, not its KV cache.", nil},
		{"// issues a fixed set of instant queries per engine", nil},
		{"// long prompts (vllm#22454): 9,000-token prompts", nil},
		{"// upstream: https://github.com/vllm-project/vllm/issues/22454", nil},
		{"so a read costs no Redis round trip at all", nil},
		{"// this round trip is the whole cost; the last round-trip time", nil},
		{"// picks round robin; this round-robin is fair", nil},
		{"// a tenth of the window rounded down to a round step.", nil},
		{"return d.Round(time.Millisecond).String()", nil},
		{"calls of each kind at each concurrency in each round", nil},
		{"// Answers the warm-up and the first round (2 kinds × 10 calls), then", nil},
		{`t.Errorf("round %d: %s reads n0: %v", round, s.id, err)`, nil},
		{"// ErrNoRound is returned when Duration passed before one round ended.", nil},
		{"	last  time.Time // of the last completed read round", nil},
		{"deadline; a round cut short is tried again at the next refresh.", nil},
		{"## this machine's CA bundle) as an OCI archive, built offline with buildah:", nil},
		{"	Sessions int // closed-loop sessions, 16 at most", nil},
		{"{At: 10 * time.Second, Sessions: 16, Think: time.Second}", nil},
		{"// Closing the session closes its stdin.", nil},
		{"# the commit's time, SOURCE_DATE_EPOCH", nil},
		{"gen/ drifted from proto/: run make generate and commit", nil},
		{"cell += fmt.Sprintf(\" #%d %.2f×\", v.GetRank(), v.GetRatioToMedian())", nil},
		{"the item 3 of the list is the third", nil},
	} {
		var got []string
		for _, f := range citations.History(tc.line) {
			if f.What == "" || f.Instead == "" {
				t.Errorf("%q: finding %q says neither what it is nor what to write", tc.line, f.Text)
			}
			got = append(got, f.Text)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("History(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestCheckHistory: Check reports history in every kind of file it reads,
// saying what it found and what to write instead.
func TestCheckHistory(t *testing.T) {
	files := fstest.MapFS{
		"Makefile":          file("# faster since the last round\n"),
		"a/doc.go":          file("// Package a is the receiver (issue 15, item 2).\npackage a\n"),
		"api/x.proto":       file("// Added in session 3.\n"),
		"console/x.js":      file("// Charts (issue 16) draw the percentiles.\n"),
		"deploy/x.yaml":     file("# a round trip per request\n"),
		"docs/x.md":         file("A round of queries; 1 ms on the faster machine.\n"),
		"scripts/x.sh":      file("# see (#12)\n"),
		"testdata/notes.tx": file("issue 1: not a checked file\n"),
	}
	got, err := citations.Check(files)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`Makefile:1: "last round": a round of work tells how the text was made; say what the code does`,
		`a/doc.go:1: "issue 15, item 2": an issue number tells how the text was made; say what the code does`,
		`api/x.proto:1: "session 3": a work session`,
		`console/x.js:1: "issue 16": an issue number`,
		`docs/x.md:1: "faster machine": a development machine tells how the text was made; name the hardware`,
		`scripts/x.sh:1: "(#12)": an issue or pull request number`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].String(), w) {
			t.Errorf("problem %d = %q, want it to start with %q", i, got[i], w)
		}
	}
}
