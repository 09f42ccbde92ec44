// Package discovery checks `llmdiag serve --discovery` end to end: a
// file_sd file rewritten beside a simulated fleet, ListNodes following it,
// and the removed event of a node that left on StreamHealth; and one
// discovery file (file_sd, Kubernetes pods with relabel_configs and with
// the default rules) given both to a real Prometheus and to serve
// --discovery, finding the same targets with the same labels.
//
// The tests skip under -short.
package discovery
