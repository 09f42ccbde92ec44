package citations_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/llmdiag/llmdiag/internal/citations"
)

// TestPackageMapIsComplete holds docs/architecture.md's package map to the
// repository: a row for every directory of Go code, and no other.
func TestPackageMapIsComplete(t *testing.T) {
	problems, err := citations.PackageMap(os.DirFS(repoRoot(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestPackageMap(t *testing.T) {
	page := strings.Join([]string{
		"# Architecture",
		"",
		"| concept | vLLM |", // a table before the map is not read
		"| `queue` | waiting |",
		"",
		"## Package map",
		"",
		"| package | promises |",
		"|---|---|",
		"| `a` | one |",
		"| `a/b` | two |",
		"| `gone` | removed |",
		"| `a` | twice |",
		"",
		"## After",
		"| `c` | not read |",
	}, "\n")
	fsys := fstest.MapFS{
		"docs/architecture.md":   file(page),
		"a/a.go":                 file("package a"),
		"a/b/b_test.go":          file("package b"),
		"c/c.go":                 file("package c"),
		"a/testdata/x/x.go":      file("package x"),
		".hidden/h.go":           file("package h"),
		"bin/tool/t.go":          file("package t"),
		"queue/q.go":             file("package q"),
		"a/b/README.md":          file("# b"),
		"notgo/notes.md":         file("# notes"),
		"cmd/tool/internal/i.go": file("package i"),
	}
	problems, err := citations.PackageMap(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"docs/architecture.md:12: gone holds no Go file: remove its row",
		"docs/architecture.md:13: a has a row already",
		"docs/architecture.md:6: c holds Go files but has no row in the package map",
		"docs/architecture.md:6: cmd/tool/internal holds Go files but has no row in the package map",
		"docs/architecture.md:6: queue holds Go files but has no row in the package map",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPackageMapWithoutHeading(t *testing.T) {
	problems, err := citations.PackageMap(fstest.MapFS{"docs/architecture.md": file("# Architecture\n")})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].What, "no \"## Package map\" heading") {
		t.Errorf("problems = %v, want one naming the missing heading", problems)
	}
}
