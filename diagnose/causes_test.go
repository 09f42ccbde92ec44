package diagnose

import (
	"os"
	"strconv"
	"strings"
	"testing"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// decidedElsewhere are the causes outside the rules table, with the file
// that decides them (causes.go's comment says why).
var decidedElsewhere = map[llmdiagv1.Cause]string{
	llmdiagv1.Cause_CAUSE_NO_DATA:     "diagnose.go",
	llmdiagv1.Cause_CAUSE_TARGET_DOWN: "diagnose.go",
	llmdiagv1.Cause_CAUSE_STALLED:     "cause_stalled.go",
	llmdiagv1.Cause_CAUSE_HEALTHY:     "cause_healthy.go",
	llmdiagv1.Cause_CAUSE_UNEXPLAINED: "cause_healthy.go",
}

// Every cause the proto defines is either in the rules table or decided in
// a file that names it; a new enum value cannot be left out.
func TestEveryCauseIsDecided(t *testing.T) {
	for n := range llmdiagv1.Cause_name {
		c := llmdiagv1.Cause(n)
		if c == llmdiagv1.Cause_CAUSE_UNSPECIFIED {
			continue
		}
		file, elsewhere := decidedElsewhere[c]
		inTable := causeOf(c) != nil
		switch {
		case inTable && elsewhere:
			t.Errorf("%v is in the rules table and decided in %s", c, file)
		case !inTable && !elsewhere:
			t.Errorf("%v is neither in the rules table (causes.go) nor decided elsewhere: add its file and its rules (see \"Adding a cause\" in causes.go)", c)
		case elsewhere:
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(src), "llmdiagv1.Cause_"+c.String()) {
				t.Errorf("%v is said to be decided in %s, which does not name it", c, file)
			}
		}
	}
}

// Every table entry is complete, each cause has one identity, and the
// causes a cause is weighed after come later in the order and are in the
// table.
func TestRulesTableWellFormed(t *testing.T) {
	byID := map[llmdiagv1.Cause]*cause{}
	for i, r := range rules {
		c := r.cause
		if c == nil || r.applies == nil || r.verdict == nil || c.explains == nil || c.ruledOut == nil {
			t.Fatalf("rule %d (%v) lacks a field: %+v", i, c.id, r)
		}
		if prev, ok := byID[c.id]; ok && prev != c {
			t.Errorf("rule %d: two cause values carry %v", i, c.id)
		}
		byID[c.id] = c
		for _, later := range c.weighedFirst {
			w := causeOf(later)
			if w == nil {
				t.Errorf("%v is weighed after %v, which is not in the table", c.id, later)
				continue
			}
			if order(w) < order(c) {
				t.Errorf("%v lists %v in weighedFirst, yet %v comes first in the order anyway", c.id, later, later)
			}
		}
	}
}

// order is the position of c's first rule.
func order(c *cause) int {
	for i := range rules {
		if rules[i].cause == c {
			return i
		}
	}
	return -1
}

// The table in docs/verdict-rules.md lists the rules in the table's order:
// rule n for the n-th cause's first rule (counting from 2), n′ for a
// cause's later rules, between the causes decided before the rules (1) and
// after them (the number after the last cause's).
func TestRulesMatchDoc(t *testing.T) {
	page, err := os.ReadFile("../docs/verdict-rules.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "## The rules, in order")
	if !ok {
		t.Fatal(`docs/verdict-rules.md has no "## The rules, in order" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var doc []string
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| ") || strings.TrimSpace(cells[1]) == "#" {
			continue
		}
		doc = append(doc, strings.TrimSpace(cells[1])+" "+strings.TrimSpace(cells[2]))
	}

	want := []string{"1 NO_DATA", "1 TARGET_DOWN", "1 STALLED"}
	var seen []*cause
	for i, r := range rules {
		n := order(r.cause)
		if n == i {
			seen = append(seen, r.cause)
		}
		pos := 0
		for j, c := range seen {
			if c == r.cause {
				pos = j
			}
		}
		num := strconv.Itoa(2 + pos)
		if n != i {
			num += "′"
		}
		want = append(want, num+" "+strings.TrimPrefix(r.cause.id.String(), "CAUSE_"))
	}
	last := strconv.Itoa(2 + len(seen))
	want = append(want, last+" HEALTHY", last+" UNEXPLAINED")

	if strings.Join(doc, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/verdict-rules.md lists the rules\n%s\nthe table (causes.go) has them\n%s", strings.Join(doc, "\n"), strings.Join(want, "\n"))
	}
}

// Every cause has a name in both languages, its own, as the report titles
// it.
func TestCauseNames(t *testing.T) {
	for _, lang := range []llmdiagv1.Language{llmdiagv1.Language_LANGUAGE_EN, llmdiagv1.Language_LANGUAGE_ZH} {
		undetermined := CauseName(llmdiagv1.Cause_CAUSE_UNSPECIFIED, lang)
		seen := map[string]llmdiagv1.Cause{}
		for n := range llmdiagv1.Cause_name {
			c := llmdiagv1.Cause(n)
			name := CauseName(c, lang)
			if name == "" || (c != llmdiagv1.Cause_CAUSE_UNSPECIFIED && name == undetermined) {
				t.Errorf("%v has no name in %v (%q)", c, lang, name)
			}
			if other, dup := seen[name]; dup {
				t.Errorf("%v and %v are both named %q in %v", c, other, name, lang)
			}
			seen[name] = c
		}
	}
	for _, r := range rules {
		// An unset name is entry 0, a finding's name.
		if r.cause.name == msg(0) {
			t.Errorf("%v has no name: set its cause's name", r.cause.id)
		}
	}
}
