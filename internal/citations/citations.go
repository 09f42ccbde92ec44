package citations

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Problem is one reference that does not resolve inside the repository,
// or one phrase that tells how the text was made (see History).
type Problem struct {
	File string // slash-separated, relative to the repository root
	Line int    // 1-based
	What string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.What) }

// outside are strings that point out of the repository, whatever follows.
var outside = []struct{ text, why string }{
	{"../shared/", "a path outside the repository"},
	{"/work/shared", "a path outside the repository"},
	{"seed document", "the seed document does not ship; cite docs/verdict-rules.md"},
}

// notes are file names of the design notes: cited only if the repository
// has a file of that name.
var notes = []string{"DESIGN.md", "metric-definitions.md", "llm-inference-metrics-explained"}

var (
	// docsPage matches a mention of a page under docs/ not preceded by a
	// path: "docs/verdict-rules.md", but not "upstream/docs/x.md".
	docsPage = regexp.MustCompile(`(?:^|[^\w./-])(docs/[A-Za-z0-9_-]+\.md)`)
	// mdLink matches an inline Markdown link or image; mdRef a reference
	// definition.
	mdLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	mdRef  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	// codeSpan matches inline code, where brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	heading  = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// checked reports whether Check reads the file name.
func checked(name string) bool {
	switch path.Ext(name) {
	case ".go", ".proto", ".md", ".yaml", ".yml", ".sh", ".js", ".html", ".css":
		return true
	}
	return name == "Makefile" || strings.HasSuffix(name, ".mk")
}

// Check reads every checked file of fsys, the repository root, except those
// whose slash-separated path starts with one of skip, and returns what does
// not resolve inside it, ordered by file and line.
func Check(fsys fs.FS, skip ...string) ([]Problem, error) {
	var files []string
	names := map[string]bool{} // base names present, for notes
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || p == "bin") {
				return fs.SkipDir
			}
			return nil
		}
		names[d.Name()] = true
		if checked(d.Name()) && !slices.ContainsFunc(skip, func(s string) bool { return strings.HasPrefix(p, s) }) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("citations: %w", err)
	}
	c := checker{fsys: fsys, names: names, headings: map[string][]string{}}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("citations: %w", err)
		}
		c.file(f, string(b))
	}
	return c.problems, nil
}

type checker struct {
	fsys     fs.FS
	names    map[string]bool
	headings map[string][]string // Markdown file → its heading anchors
	problems []Problem
}

func (c *checker) add(file string, line int, format string, args ...any) {
	c.problems = append(c.problems, Problem{File: file, Line: line, What: fmt.Sprintf(format, args...)})
}

func (c *checker) file(name, text string) {
	md := path.Ext(name) == ".md"
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		lower := strings.ToLower(line)
		for _, o := range outside {
			if strings.Contains(lower, strings.ToLower(o.text)) {
				c.add(name, n, "%q: %s", o.text, o.why)
			}
		}
		for _, note := range notes {
			if strings.Contains(line, note) && !c.hasName(note) {
				c.add(name, n, "%q is not a file of this repository", note)
			}
		}
		mentions := line
		if md { // a link is checked as a link below
			mentions = mdLink.ReplaceAllString(mdRef.ReplaceAllString(line, ""), "]")
		}
		for _, m := range docsPage.FindAllStringSubmatch(mentions, -1) {
			if !c.exists(m[1]) {
				c.add(name, n, "%s does not exist", m[1])
			}
		}
		c.history(name, n, line)
		if !md {
			continue
		}
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			switch {
			case fence == "":
				fence = t[:3]
			case strings.HasPrefix(t, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		plain := codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range mdLink.FindAllStringSubmatch(plain, -1) {
			targets = append(targets, m[1])
		}
		if m := mdRef.FindStringSubmatch(plain); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if why := c.link(name, t); why != "" {
				c.add(name, n, "link %s: %s", t, why)
			}
		}
	}
}

// hasName reports whether a file whose name contains note is in the tree.
func (c *checker) hasName(note string) bool {
	for n := range c.names {
		if strings.Contains(n, note) {
			return true
		}
	}
	return false
}

func (c *checker) exists(p string) bool {
	_, err := fs.Stat(c.fsys, p)
	return err == nil
}

// link returns why the Markdown link target, in file from, does not
// resolve, or "" when it does.
func (c *checker) link(from, target string) string {
	if strings.Contains(target, ":") && !strings.HasPrefix(target, "#") {
		return "" // a scheme: https:, mailto:, …
	}
	file, frag, _ := strings.Cut(target, "#")
	p := from
	if file != "" {
		if strings.HasPrefix(file, "/") {
			return "an absolute path; link relative to the page"
		}
		p = path.Join(path.Dir(from), file)
		if p == ".." || strings.HasPrefix(p, "../") {
			return "outside the repository"
		}
		if !c.exists(p) {
			return p + " does not exist"
		}
	}
	if frag == "" || path.Ext(p) != ".md" {
		return ""
	}
	anchors, err := c.anchors(p)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(anchors, frag) {
		return fmt.Sprintf("%s has no heading #%s", p, frag)
	}
	return ""
}

// anchors returns the heading anchors of a Markdown file, as GitHub makes
// them: repeated ones get -1, -2, ….
func (c *checker) anchors(p string) ([]string, error) {
	if a, ok := c.headings[p]; ok {
		return a, nil
	}
	b, err := fs.ReadFile(c.fsys, p)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = !fence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fence || m == nil {
			continue
		}
		s := Slug(m[1])
		if k := seen[s]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, k))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	c.headings[p] = out
	return out, nil
}

// Slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped (hyphens and underscores kept), spaces as hyphens.
func Slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
