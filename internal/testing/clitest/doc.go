// Package clitest runs llmdiag's commands inside a test, the way
// cmd/llmdiag runs them: cli.Run with an environment of the test's
// choosing and output in buffers. Run runs a command to completion;
// Background starts a long-running one (serve, sim) and, when the test
// ends, stops it and fails the test if it did not exit cleanly within 15 s;
// WaitFor polls a condition. Main lets a test binary run as llmdiag itself,
// for tests that need a real child process without building one.
//
// cli's tests and the end-to-end suites under internal/testing/e2e share
// these helpers instead of keeping copies.
package clitest
