package citations

import "regexp"

// historyRule is a phrase that tells how the text came to be — an issue
// tracker's number, a round of work, the machine something was measured on
// during development, a commit — instead of what the code does. None of
// these ship: a reader of the repository has no tracker, no rounds and no
// such machine to look them up in.
type historyRule struct {
	re *regexp.Regexp
	// what names the phrase's kind; instead says what to write in its place.
	what, instead string
}

// historyRules are the phrases History reports, each matched on a line
// whose compounds of "round" that are not history (round trip, round
// robin) have been joined first.
//
// Left alone on purpose: the word "issue" without a number; an upstream
// bug as project#123 or an issues/123 URL (it cites someone else's
// tracker, which a reader can open); "the first round", "each round",
// "round %d", "rounds to" and the like (a load test's or a loop's rounds,
// rounding); "this machine's" (the host a script runs on).
var historyRules = []historyRule{
	{regexp.MustCompile(`(?i)\bissues?\s+(?:no\.?\s*)?#?\d+(?:\s*,?\s*items?\s+\d+)?`),
		"an issue number", "say what the code does; the issue tracker does not ship"},
	{regexp.MustCompile(`(?i)\(#\d+\)|\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?|see|pr|pull request)\s+#\d+\b`),
		"an issue or pull request number", "say what the code does; the issue tracker does not ship"},
	{regexp.MustCompile(`(?i)\(\s*items?\s+\d+\b[^)]*\)`),
		"an item of a task list", "say what the code does"},
	{regexp.MustCompile(`(?i)\b(?:this|last|previous|prior|that)\s+round\b`),
		"a round of work", "say what the code does, or state the figure as of now"},
	{regexp.MustCompile(`(?i)\b(?:the\s+round\s+before|before\s+the\s+first\s+round|rounds?\s+ago)\b`),
		"a round of work", "say what the code does, or state the figure as of now"},
	{regexp.MustCompile(`(?i)\b(?:faster|slower)\s+machine\b`),
		"a development machine", "name the hardware a figure was measured on, or give one figure"},
	{regexp.MustCompile(`(?i)\bsession\s+#?\d+\b`),
		"a work session", "say what the code does"},
	{regexp.MustCompile(`(?i)\bcommit\s+[0-9a-f]{7,40}\b`),
		"a commit as history", "say what the code or the data is, or name a release or a file"},
}

// notHistory joins the compounds of "round" that are no round of work, so
// that "this round trip" is not "this round".
var notHistory = regexp.MustCompile(`(?i)\bround[\s-]*(trips?|robin)\b`)

// HistoryFinding is one phrase of a line that tells how the text was made.
type HistoryFinding struct {
	Text    string // the phrase as written
	What    string // its kind: "an issue number", "a round of work", …
	Instead string // what to write in its place
}

// History returns the phrases of line that tell how the text was made
// rather than what the code does, in the order of historyRules.
func History(line string) []HistoryFinding {
	line = notHistory.ReplaceAllString(line, "round$1")
	var out []HistoryFinding
	for _, r := range historyRules {
		for _, m := range r.re.FindAllString(line, -1) {
			out = append(out, HistoryFinding{Text: m, What: r.what, Instead: r.instead})
		}
	}
	return out
}

// history adds a Problem for each phrase of line History finds.
func (c *checker) history(name string, n int, line string) {
	for _, f := range History(line) {
		c.add(name, n, "%q: %s tells how the text was made; %s", f.Text, f.What, f.Instead)
	}
}
