// Package simtest runs a simulated fleet (package sim) inside a test: on
// free loopback ports, stopped when the test ends, with its fleet file
// written for `llmdiag serve --fleet`.
package simtest
