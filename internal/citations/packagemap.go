package citations

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// PackageMapPage is the page whose package map names every directory of Go
// code, and PackageMapHeading the heading of that map.
const (
	PackageMapPage    = "docs/architecture.md"
	PackageMapHeading = "## Package map"
)

// mapRow matches a row of the package map: "| `path` | what it promises |".
var mapRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// PackageMap checks PackageMapPage's package map against the Go code of
// fsys, the repository root: it returns a Problem for every directory
// holding .go files that has no row (hidden directories, the top-level bin
// and every testdata are not looked in), and for every row whose directory
// holds no .go file or that repeats another: the rows' problems in the
// page's order, then the directories without a row, sorted.
func PackageMap(fsys fs.FS) ([]Problem, error) {
	b, err := fs.ReadFile(fsys, PackageMapPage)
	if err != nil {
		return nil, err
	}
	rows, heading := mapRows(string(b))
	if heading == 0 {
		return []Problem{{File: PackageMapPage, Line: 1, What: fmt.Sprintf("no %q heading", PackageMapHeading)}}, nil
	}
	dirs, err := goDirs(fsys)
	if err != nil {
		return nil, err
	}
	var out []Problem
	mapped := map[string]bool{}
	for _, r := range rows {
		if mapped[r.dir] {
			out = append(out, Problem{PackageMapPage, r.line, fmt.Sprintf("%s has a row already", r.dir)})
		}
		mapped[r.dir] = true
		if !slices.Contains(dirs, r.dir) {
			out = append(out, Problem{PackageMapPage, r.line, fmt.Sprintf("%s holds no Go file: remove its row", r.dir)})
		}
	}
	for _, d := range dirs {
		if !mapped[d] {
			out = append(out, Problem{PackageMapPage, heading, fmt.Sprintf("%s holds Go files but has no row in the package map", d)})
		}
	}
	return out, nil
}

type row struct {
	dir  string
	line int
}

// mapRows returns the rows of the table under PackageMapHeading, up to the
// next heading, and the heading's line (0 when there is none).
func mapRows(text string) ([]row, int) {
	var rows []row
	heading := 0
	for i, line := range strings.Split(text, "\n") {
		switch {
		case strings.TrimRight(line, " ") == PackageMapHeading:
			heading = i + 1
		case heading == 0:
		case strings.HasPrefix(line, "#"):
			return rows, heading
		default:
			if m := mapRow.FindStringSubmatch(line); m != nil {
				rows = append(rows, row{strings.TrimSuffix(m[1], "/"), i + 1})
			}
		}
	}
	return rows, heading
}

// goDirs returns the slash-separated directories of fsys holding .go
// files, sorted.
func goDirs(fsys fs.FS) ([]string, error) {
	seen := map[string]bool{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != "." && (strings.HasPrefix(name, ".") || name == "testdata" || p == "bin") {
				return fs.SkipDir
			}
			return nil
		}
		if path.Ext(p) == ".go" {
			seen[path.Dir(p)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var dirs []string
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs, nil
}
