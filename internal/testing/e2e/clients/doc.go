// Package clients checks, end to end, that the simulator's seed scenario
// served by `llmdiag serve` gets the worked example's answers through
// every client surface: the CLI (nodes, diagnose in English and Chinese,
// compare by model, by label and against a baseline, metrics, watch), the
// MCP server over streamable HTTP and over stdio from a `llmdiag mcp`
// process, and the Slack command. Each test runs serve in process
// (internal/testing/clitest) and asks it as a user would.
//
// The tests skip under -short: each waits for the simulated fleet to
// produce a decode-bound verdict, which takes tens of seconds.
package clients
