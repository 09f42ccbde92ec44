package auth

import (
	"strings"

	"connectrpc.com/grpchealth"

	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
)

// healthPrefix is grpc.health.v1's path prefix.
const healthPrefix = "/" + grpchealth.HealthV1ServiceName + "/"

// The HTTP surfaces of the port beside the RPCs.
const (
	// MCPPath serves the Model Context Protocol (streamable HTTP): reads
	// only, granted where the unary reads are.
	MCPPath = "/mcp"
	// AlertmanagerPath receives Alertmanager's webhook.
	AlertmanagerPath = "/alertmanager"
	// SlackCommandPath answers Slack's slash command. It is public to the
	// bearer check: Slack sends no token, and the handler verifies Slack's
	// request signature instead.
	SlackCommandPath = "/slack/command"
	// RunbooksPrefix serves the runbooks, one page per cause: documentation
	// in the repository, no fleet data, linked from alerts a person opens
	// in a browser; public.
	RunbooksPrefix = "/runbooks/"
	// ConsolePath is the web console's page, and ConsolePrefix its
	// embedded assets: the same files for everyone, holding no fleet data,
	// so public; the data the console shows comes from the procedures,
	// with the token the person enters.
	ConsolePath   = "/"
	ConsolePrefix = "/console/"
	// OpenAPIPath serves the OpenAPI document of the REST surface: the
	// same file for everyone, holding no fleet data, so public.
	OpenAPIPath = "/openapi.yaml"
	// RoutablePrefix, with a node id after it, answers the node's
	// routability as an HTTP status for proxies' health checkers: the
	// router role's (admin's too), as StreamHealth is.
	RoutablePrefix = "/routable/"
)

// reader reports whether procedure is one of RoleReader's: the unary reads.
func reader(procedure string) bool {
	switch procedure {
	case llmdiagv1connect.DiagnosisServiceListNodesProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeMetricsProcedure,
		llmdiagv1connect.DiagnosisServiceComparePercentilesProcedure,
		llmdiagv1connect.DiagnosisServiceDiagnoseNodeProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeHistoryProcedure,
		MCPPath:
		return true
	}
	return false
}

// Public reports whether the request path procedure answers without
// credentials: grpc.health.v1, Slack's command (verified by its signature),
// the runbooks, the web console's page and assets and the OpenAPI document. Paths are compared
// exactly, as the server's mux routes them.
func Public(procedure string) bool {
	// Health probes come from load balancers and orchestrators that hold
	// no credentials.
	return procedure == healthPrefix+"Check" || procedure == healthPrefix+"Watch" ||
		procedure == SlackCommandPath || strings.HasPrefix(procedure, RunbooksPrefix) ||
		procedure == ConsolePath || strings.HasPrefix(procedure, ConsolePrefix) || procedure == OpenAPIPath
}

// Allowed reports whether role may call procedure, a request path such as
// llmdiagv1connect.DiagnosisServiceListNodesProcedure. RoleAdmin may call
// every path on the port (reflection, /metrics, and paths that do not exist,
// which then answer NotFound); the other roles only the procedures they are
// granted, so a surface added to the port later is closed to them until it
// is listed here.
func Allowed(role, procedure string) bool {
	switch role {
	case RoleAdmin:
		return true
	case RoleRouter:
		return reader(procedure) || procedure == llmdiagv1connect.DiagnosisServiceStreamHealthProcedure ||
			procedure == llmdiagv1connect.DiagnosisServiceGetRoutabilityProcedure || strings.HasPrefix(procedure, RoutablePrefix)
	case RoleReader:
		return reader(procedure)
	case RoleAlertmanager:
		return procedure == AlertmanagerPath
	}
	return false
}
