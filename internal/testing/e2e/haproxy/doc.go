// Package haproxy checks `llmdiag serve --haproxy-agent-listen` against a
// real HAProxy: a backend of the simulator's overloaded fleet whose
// servers take their weight and state from llmdiag's agent, read back
// through HAProxy's runtime API, and what HAProxy keeps once llmdiag is
// gone. The configuration it runs is the one docs/integrations.md shows.
//
// The tests skip under -short.
package haproxy
