package fleet_test

import (
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		file    string
		wantErr []string // substrings; empty means success
	}{
		{"good.yaml", nil},
		{"typo.yaml", []string{"data_paralel"}},
		{"bad.yaml", []string{`nodes[0].id "bad id with spaces"`, "nodes[0].url", "nodes[0].engine", `nodes[2].id "dup": duplicate`}},
		{"missing.yaml", []string{"read fleet file"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f, err := fleet.Load("testdata/" + tc.file)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				n := f.Nodes[0]
				if n.ID != "deepseek-v4-0" || n.Profile.DataParallel != 8 || n.Profile.ActiveParamsBillions != 37 || f.Nodes[1].Engine != "" {
					t.Fatalf("parsed %+v", f.Nodes)
				}
				// What Marshal writes, Parse reads back the same.
				data, err := f.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				g, err := fleet.Parse(data)
				if err != nil || len(g.Nodes) != 2 || g.Nodes[0].Profile != n.Profile {
					t.Fatalf("round trip: %+v, %v", g, err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"deepseek-v4-0":          true,
		"10.0.0.5:8000":          true,
		"ns/pod-1":               true,
		"":                       false,
		"-leading-dash":          false,
		`x"} or vector(1)`:       false,
		"a b":                    false,
		strings.Repeat("a", 128): true,
		strings.Repeat("a", 129): false,
	} {
		if got := fleet.ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestEngineNames(t *testing.T) {
	for v := range llmdiagv1.Engine_name {
		e := llmdiagv1.Engine(v)
		got, err := fleet.ParseEngine(fleet.EngineName(e))
		if err != nil || got != e {
			t.Errorf("ParseEngine(EngineName(%v)) = %v, %v", e, got, err)
		}
	}
	if _, err := fleet.ParseEngine("ollama"); err == nil {
		t.Error("unknown engine accepted")
	}
}
