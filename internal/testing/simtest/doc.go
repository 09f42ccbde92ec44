// Package simtest runs a simulated fleet (package sim) inside a test: on
// free loopback ports, stopped (within 10 s) when the test ends (Serve),
// and with its fleet file written for `llmdiag serve --fleet` (Start).
// Scenario is a named scenario's configuration, failing the test when the
// name is unknown.
package simtest
