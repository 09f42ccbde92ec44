package refresh

import (
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/source"
)

// FleetRoleSource is NodeMetrics.role_source for a role the fleet file gave.
const FleetRoleSource = "fleet file"

// ApplyRole sets m's role to the fleet file's when n gives one: the fleet
// file wins over what the engine says. m must be the caller's own.
func ApplyRole(m *llmdiagv1.NodeMetrics, n fleet.Node) {
	if r := n.RoleOf(); r != llmdiagv1.Role_ROLE_UNSPECIFIED && m != nil {
		m.Role, m.RoleSource = r, FleetRoleSource
	}
}

// CarryRole gives m, read on demand (another window, an offset), the role
// the fleet file gave the node's stored metrics from: the source reading
// the window does not know the fleet file. m must be the caller's own.
func CarryRole(m, stored *llmdiagv1.NodeMetrics) {
	if m != nil && stored.GetRoleSource() == FleetRoleSource {
		m.Role, m.RoleSource = stored.GetRole(), FleetRoleSource
	}
}

// applyRole applies the role of o's node, or else of its fleet-file entry,
// to o.Metrics (ApplyRole). The source's metrics are the loop's own.
func (l *Loop) applyRole(o source.Observation) {
	n := o.Node
	if f, ok := l.cfg.Fleet[n.ID]; ok && n.Role == "" {
		n.Role = f.Role
	}
	ApplyRole(o.Metrics, n)
}
