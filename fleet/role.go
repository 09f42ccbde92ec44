package fleet

import (
	"fmt"
	"strings"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// roles names each role as fleet files spell it.
var roles = []struct {
	role llmdiagv1.Role
	id   string
}{
	{llmdiagv1.Role_ROLE_BOTH, "both"},
	{llmdiagv1.Role_ROLE_PREFILL, "prefill"},
	{llmdiagv1.Role_ROLE_DECODE, "decode"},
}

// ParseRole maps a role from a fleet file (prefill, decode or both, any
// case) to the API enum. The empty string maps to ROLE_UNSPECIFIED: detect
// it from the engine's metrics, else both.
func ParseRole(s string) (llmdiagv1.Role, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return llmdiagv1.Role_ROLE_UNSPECIFIED, nil
	}
	for _, r := range roles {
		if s == r.id {
			return r.role, nil
		}
	}
	return 0, fmt.Errorf("unknown role %q (want prefill, decode or both)", s)
}

// RoleName is the inverse of ParseRole: "prefill", "decode", "both" or "".
func RoleName(r llmdiagv1.Role) string {
	for _, n := range roles {
		if n.role == r {
			return n.id
		}
	}
	return ""
}

// RoleOf is the node's role as the fleet file gives it; ROLE_UNSPECIFIED
// when it gives none (or one Validate would refuse).
func (n Node) RoleOf() llmdiagv1.Role {
	r, err := ParseRole(n.Role)
	if err != nil {
		return llmdiagv1.Role_ROLE_UNSPECIFIED
	}
	return r
}
