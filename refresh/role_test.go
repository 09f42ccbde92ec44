package refresh

import (
	"testing"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// The fleet file's role wins over the engine's; without one, the engine's
// stays; an on-demand window gets the fleet file's role of the stored
// metrics, and only that.
func TestRoles(t *testing.T) {
	const (
		prefill = llmdiagv1.Role_ROLE_PREFILL
		decode  = llmdiagv1.Role_ROLE_DECODE
		none    = llmdiagv1.Role_ROLE_UNSPECIFIED
	)
	for _, tc := range []struct {
		name       string
		detected   llmdiagv1.Role
		fleetRole  string
		wantRole   llmdiagv1.Role
		wantSource string
		windowRole llmdiagv1.Role // CarryRole from the stored metrics to a window's
	}{
		{"fleet over detection", decode, "prefill", prefill, FleetRoleSource, prefill},
		{"fleet alone", none, "decode", decode, FleetRoleSource, decode},
		{"detection alone", decode, "", decode, `engine_type="decode"`, none},
		{"neither", none, "", none, "", none},
		{"fleet says both", decode, "both", llmdiagv1.Role_ROLE_BOTH, FleetRoleSource, llmdiagv1.Role_ROLE_BOTH},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &llmdiagv1.NodeMetrics{Role: tc.detected}
			if tc.detected != none {
				m.RoleSource = `engine_type="decode"`
			}
			ApplyRole(m, fleet.Node{ID: "n", Role: tc.fleetRole})
			if m.GetRole() != tc.wantRole || m.GetRoleSource() != tc.wantSource {
				t.Fatalf("role %v from %q, want %v from %q", m.GetRole(), m.GetRoleSource(), tc.wantRole, tc.wantSource)
			}
			// A window read on demand knows only what the engine says.
			w := &llmdiagv1.NodeMetrics{}
			CarryRole(w, m)
			if w.GetRole() != tc.windowRole {
				t.Errorf("window role %v, want %v", w.GetRole(), tc.windowRole)
			}
		})
	}
}
