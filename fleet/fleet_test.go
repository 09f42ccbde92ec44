package fleet_test

import (
	"maps"
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
				if n.ID != "deepseek-v4-0" || n.Profile.DataParallel != 8 || n.Profile.ActiveParamsBillions != 37 || f.Nodes[1].Engine != "" ||
					n.Labels["team"] != "search" || n.Labels["region"] != "eu_west" || f.Nodes[1].Labels != nil {
					t.Fatalf("parsed %+v", f.Nodes)
				}
				// What Marshal writes, Parse reads back the same.
				data, err := f.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				g, err := fleet.Parse(data)
				if err != nil || len(g.Nodes) != 2 || g.Nodes[0].Profile != n.Profile || !maps.Equal(g.Nodes[0].Labels, n.Labels) {
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

func TestLabels(t *testing.T) {
	tests := []struct {
		name    string
		labels  string // the node's labels: block, indented
		wantErr []string
	}{
		{"valid", "team: search\n      gpu_pool: h20\n      _private: x", nil},
		{"none", "", nil},
		{"bad name", "\"gpu-pool\": h20", []string{`nodes[0].labels "gpu-pool"`, "Prometheus label name"}},
		{"leading digit", "1team: a", []string{`nodes[0].labels "1team"`}},
		{"reserved", "__name__: a", []string{`nodes[0].labels "__name__"`}},
		{"empty value", "team: \"\"", []string{"nodes[0].labels.team: empty value"}},
		{"null value", "team:", []string{"nodes[0].labels.team: empty value"}},
		{"long value", "team: " + strings.Repeat("x", fleet.MaxLabelValue+1), []string{"nodes[0].labels.team", "at most 256 bytes"}},
		{"several, all reported", "\"a b\": x\n      team: \"\"", []string{`"a b"`, "labels.team: empty value"}},
		{"not a map", "[a, b]", []string{"parse fleet file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := "nodes:\n  - id: n0\n    url: http://a/metrics\n"
			if tc.labels != "" {
				doc += "    labels:\n      " + tc.labels + "\n"
			}
			f, err := fleet.Parse([]byte(doc))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range f.Nodes[0].Labels {
					if !fleet.ValidLabelName(k) || v == "" {
						t.Errorf("accepted label %q=%q", k, v)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %q", doc)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestValidLabelName(t *testing.T) {
	for name, want := range map[string]bool{
		"team": true, "gpu_pool": true, "_x": true, "Region2": true,
		"": false, "2x": false, "gpu-pool": false, "a.b": false, "__name__": false, "é": false,
	} {
		if got := fleet.ValidLabelName(name); got != want {
			t.Errorf("ValidLabelName(%q) = %v, want %v", name, got, want)
		}
	}
}

// A node opts in to redirects with follow_redirects; a URL refused by
// validation is named without its password.
func TestFollowRedirectsAndRedactedURL(t *testing.T) {
	f, err := fleet.Parse([]byte("nodes:\n  - id: a\n    url: http://a/metrics\n    follow_redirects: true\n  - id: b\n    url: http://b/metrics\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Nodes[0].FollowRedirects || f.Nodes[1].FollowRedirects {
		t.Fatalf("follow_redirects: %+v", f.Nodes)
	}
	_, err = fleet.Parse([]byte("nodes:\n  - id: a\n    url: ftp://scraper:s3cret@a/metrics\n"))
	if err == nil || !strings.Contains(err.Error(), "nodes[0].url") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v: want nodes[0].url named, without the password", err)
	}
}

// A node may name its DCGM exporter; it must be an http(s) URL, named in
// the error without its password.
func TestDCGMURL(t *testing.T) {
	for _, tc := range []struct {
		dcgm    string
		wantErr bool
	}{
		{"http://gpu-node-07:9400/metrics", false},
		{"https://u:p@gpu-node-07:9400/metrics", false},
		{"gpu-node-07:9400", true},
		{"ftp://scraper:s3cret@a/metrics", true},
	} {
		f, err := fleet.Parse([]byte("nodes:\n  - id: a\n    url: http://a/metrics\n    dcgm: " + tc.dcgm + "\n"))
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "nodes[0].dcgm") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%q: error %v, want nodes[0].dcgm named without the password", tc.dcgm, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.dcgm, err)
			continue
		}
		if f.Nodes[0].DCGM != tc.dcgm {
			t.Errorf("dcgm = %q, want %q", f.Nodes[0].DCGM, tc.dcgm)
		}
	}
}
