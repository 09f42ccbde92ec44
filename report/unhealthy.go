package report

import (
	"cmp"
	"slices"
	"strings"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Unhealthy returns the nodes that are not OK, worst first: CRIT (users
// are hurt now), DOWN (it takes no traffic), WARN, then UNKNOWN and
// unspecified (no evidence either way); within a status the highest load
// score first, then by id. The MCP server's unhealthy_nodes and Slack's
// `/llmdiag unhealthy` list nodes in this order.
func Unhealthy(nodes []*llmdiagv1.Node) []*llmdiagv1.Node {
	var bad []*llmdiagv1.Node
	for _, n := range nodes {
		if n.GetStatus() != llmdiagv1.Status_STATUS_OK {
			bad = append(bad, n)
		}
	}
	slices.SortStableFunc(bad, func(a, b *llmdiagv1.Node) int {
		return cmp.Or(cmp.Compare(severity(a.GetStatus()), severity(b.GetStatus())),
			cmp.Compare(b.GetLoadScore(), a.GetLoadScore()), strings.Compare(a.GetId(), b.GetId()))
	})
	return bad
}

// severity ranks a status for Unhealthy, worst lowest.
func severity(s llmdiagv1.Status) int {
	switch s {
	case llmdiagv1.Status_STATUS_CRIT:
		return 0
	case llmdiagv1.Status_STATUS_DOWN:
		return 1
	case llmdiagv1.Status_STATUS_WARN:
		return 2
	}
	return 3
}
