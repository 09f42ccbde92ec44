package auth

import "context"

// Roles a principal may have.
const (
	// RoleReader may call ListNodes, GetNode, GetNodeMetrics,
	// ComparePercentiles, DiagnoseNode and GetNodeHistory.
	RoleReader = "reader"
	// RoleRouter may call what a reader may, StreamHealth,
	// GetRoutability, and RoutablePrefix (the routability check for
	// health checkers).
	RoleRouter = "router"
	// RoleAdmin may call everything, server reflection and /metrics
	// included.
	RoleAdmin = "admin"
	// RoleAlertmanager may only post Alertmanager's webhook to
	// AlertmanagerPath: what an Alertmanager's http_config holds.
	RoleAlertmanager = "alertmanager"
)

// Principal is an authenticated caller.
type Principal struct {
	// Name identifies the caller in logs and per-caller limits: a token's
	// name, or a client certificate's mapped name.
	Name string
	// Role is RoleReader, RoleRouter, RoleAdmin or RoleAlertmanager.
	Role string
}

type ctxKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal ctx carries, if any. Without
// authentication configured, requests carry none.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// validRole reports whether r is one of the roles.
func validRole(r string) bool {
	return r == RoleReader || r == RoleRouter || r == RoleAdmin || r == RoleAlertmanager
}
