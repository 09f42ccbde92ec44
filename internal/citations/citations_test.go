package citations_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/llmdiag/llmdiag/internal/citations"
)

// TestRepositoryCitesOnlyItself runs Check over the repository. This
// package is skipped: its own text spells out what it looks for.
func TestRepositoryCitesOnlyItself(t *testing.T) {
	root := repoRoot(t)
	problems, err := citations.Check(os.DirFS(root), "internal/citations/")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// repoRoot is the directory holding go.mod, above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

// TestCheck holds each rule to a case it must report and one it must let
// pass.
func TestCheck(t *testing.T) {
	page := "# Verdict rules\n\n## Worked example: a decode-bound node\n\n## Notes\n\n## Notes\n"
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  []string // each a substring of one problem, in order; none for a clean tree
	}{
		{"clean tree", fstest.MapFS{
			"README.md":             file("See [the rules](docs/verdict-rules.md#worked-example-a-decode-bound-node) and [notes](docs/verdict-rules.md#notes-1).\n"),
			"docs/verdict-rules.md": file(page + "\n[top](#verdict-rules), [home](../README.md), [web](https://example.com/x.md)\n"),
			"diagnose/doc.go":       file("// The rules: docs/verdict-rules.md.\npackage diagnose\n"),
			"engine/table.go":       file("// upstream docs/user_guide/metrics.md and router/docs/x.md are not ours\n"),
		}, nil},
		{"sibling checkout", fstest.MapFS{
			"README.md": file("the worked case (`../shared/seed/`)\n"),
		}, []string{`README.md:1: "../shared/"`}},
		{"absolute workspace path", fstest.MapFS{
			"x/x.go": file("// see /work/shared/reference\n"),
		}, []string{"x/x.go:1: \"/work/shared\""}},
		{"design notes", fstest.MapFS{
			"a.go":        file("package a\n\n// as DESIGN.md says\n"),
			"b/b.yaml":    file("# after metric-definitions.md\n"),
			"Makefile":    file("# see llm-inference-metrics-explained.zh.md\n"),
			"c/notes.txt": file("DESIGN.md is not read: not a checked file\n"),
		}, []string{"Makefile:1:", "a.go:3: \"DESIGN.md\"", "b/b.yaml:1:"}},
		{"a notes file that ships may be cited", fstest.MapFS{
			"DESIGN.md": file("# Design\n"),
			"a.go":      file("// as DESIGN.md says\n"),
		}, nil},
		{"seed document", fstest.MapFS{
			"cli/help.go": file("// Diagnose the way the Seed Document does\n"),
		}, []string{"cli/help.go:1: \"seed document\""}},
		{"missing docs page", fstest.MapFS{
			"diagnose/t.go": file("// where defaults come from: docs/thresholds.md\n"),
		}, []string{"docs/thresholds.md does not exist"}},
		{"broken Markdown links", fstest.MapFS{
			"README.md":             file("[a](docs/gone.md) [b](docs/verdict-rules.md#nowhere) [c](/etc/passwd) [d](../x.md)\n\n[e]: docs/also-gone.md\n"),
			"docs/verdict-rules.md": file(page),
		}, []string{"docs/gone.md does not exist", "has no heading #nowhere", "absolute path", "outside the repository", "docs/also-gone.md does not exist"}},
		{"links in code are not links", fstest.MapFS{
			"README.md": file("`m[k](x)` and\n```go\nf := a[i](y)\n```\n"),
		}, nil},
		{"hidden directories and bin are skipped", fstest.MapFS{
			".git/DESIGN.md.go": file("// DESIGN.md\n"),
			"bin/notes.md":      file("../shared/\n"),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := citations.Check(tc.files)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, p := range got {
				lines = append(lines, p.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(lines, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestCheckSkip(t *testing.T) {
	files := fstest.MapFS{"internal/citations/doc.go": file("// DESIGN.md\n"), "a.go": file("// DESIGN.md\n")}
	got, err := citations.Check(files, "internal/citations/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].File != "a.go" {
		t.Fatalf("got %v, want one problem in a.go", got)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Worked example: a decode-bound DeepSeek v4 node": "worked-example-a-decode-bound-deepseek-v4-node",
		"Thresholds and alert rules":                      "thresholds-and-alert-rules",
		"`llmdiag thresholds` output":                     "llmdiag-thresholds-output",
		"Dependencies, and why each is there":             "dependencies-and-why-each-is-there",
		"How llmdiag reaches a verdict (v2)":              "how-llmdiag-reaches-a-verdict-v2",
	} {
		if got := citations.Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}
