// Package discovery checks `llmdiag serve --discovery` end to end: a
// file_sd file rewritten beside a simulated fleet, ListNodes following it,
// and the removed event of a node that left on StreamHealth.
//
// The tests skip under -short.
package discovery
