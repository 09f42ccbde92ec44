package fleet_test

import (
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

func TestRole(t *testing.T) {
	tests := []struct {
		name    string
		role    string // the node's role: line, or "" for none
		want    llmdiagv1.Role
		wantErr []string
	}{
		{"none", "", llmdiagv1.Role_ROLE_UNSPECIFIED, nil},
		{"prefill", "role: prefill", llmdiagv1.Role_ROLE_PREFILL, nil},
		{"decode", "role: decode", llmdiagv1.Role_ROLE_DECODE, nil},
		{"both", "role: both", llmdiagv1.Role_ROLE_BOTH, nil},
		{"any case", "role: Prefill", llmdiagv1.Role_ROLE_PREFILL, nil},
		{"unknown", "role: encode", 0, []string{"nodes[0].role", `unknown role "encode"`, "prefill, decode or both"}},
		{"typo", "role: prefil", 0, []string{"nodes[0].role"}},
		{"misspelt key", "rol: prefill", 0, []string{"rol"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := "nodes:\n  - id: n0\n    url: http://a/metrics\n"
			if tc.role != "" {
				doc += "    " + tc.role + "\n"
			}
			f, err := fleet.Parse([]byte(doc))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("accepted %q", doc)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Nodes[0].RoleOf(); got != tc.want {
				t.Fatalf("role %v, want %v", got, tc.want)
			}
			// What Marshal writes, Parse reads back the same.
			data, err := f.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			g, err := fleet.Parse(data)
			if err != nil || g.Nodes[0].RoleOf() != tc.want {
				t.Fatalf("round trip: %+v, %v", g, err)
			}
		})
	}
}

func TestRoleNames(t *testing.T) {
	for v := range llmdiagv1.Role_name {
		r := llmdiagv1.Role(v)
		got, err := fleet.ParseRole(fleet.RoleName(r))
		if err != nil || got != r {
			t.Errorf("ParseRole(RoleName(%v)) = %v, %v", r, got, err)
		}
	}
}
