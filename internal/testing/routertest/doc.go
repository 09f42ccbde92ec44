// Package routertest holds the end-to-end test of a request router built on
// client.Watch: the simulator, a real `llmdiag serve` in the same process,
// and a router loop that must steer around a node while it is overloaded and
// come back to it once it recovers. It has no non-test code.
package routertest
