package fleet_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/fleet"
)

// FuzzParse: a fleet file either parses into nodes that all validate and
// whose YAML parses back to the same file, or is refused with an error
// saying whether the YAML or a node was wrong (naming the node's index).
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/good.yaml", "testdata/bad.yaml", "testdata/typo.yaml", "../deploy/base/fleet.yaml"} {
		b, err := os.ReadFile(filepath.FromSlash(p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"", "nodes: []", "nodes:\n  - id: a\n", "nodes:\n  - id: a\n  - id: a\n",
		"nodes:\n  - id: a\n    url: http://[::1]:8000/metrics\n    engine: sglang\n    role: prefill\n",
		"nodes:\n  - id: a\n    labels: {\"bad-name\": x}\n",
		"nodes:\n  - id: a\n    profile: {active_params_billions: .nan, data_parallel: 4294967296}\n",
		"nodes:\n  - id: a\n    dcgm: ftp://x\n    engine: tgi\n",
		"nodes: &x\n  - *x\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := fleet.Parse(data)
		if err != nil {
			msg := err.Error()
			switch {
			case strings.HasPrefix(msg, "parse fleet file: "):
			case strings.HasPrefix(msg, "invalid fleet file: "):
				if !strings.Contains(msg, "nodes[") {
					t.Fatalf("invalid fleet file error names no node: %v", err)
				}
			default:
				t.Fatalf("error says neither parse nor invalid: %v", err)
			}
			return
		}
		if err := file.Validate(); err != nil {
			t.Fatalf("Parse accepted a file Validate refuses: %v", err)
		}
		for i, n := range file.Nodes {
			if !fleet.ValidID(n.ID) {
				t.Fatalf("nodes[%d].id %q accepted", i, n.ID)
			}
		}
		out, err := file.Marshal()
		if err != nil {
			t.Fatalf("marshal a parsed file: %v", err)
		}
		again, err := fleet.Parse(out)
		if err != nil {
			t.Fatalf("a parsed file's YAML does not parse: %v\n%s", err, out)
		}
		out2, err := again.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed the file:\n%s\n---\n%s", out, out2)
		}
		if len(again.Nodes) != len(file.Nodes) {
			t.Fatalf("round trip: %d nodes, want %d", len(again.Nodes), len(file.Nodes))
		}
	})
}
