// Package testkit is llmdiag's one kit of test helpers, so that packages do
// not each keep a copy: waiting on a condition with an overall deadline
// (Eventually), a buffer safe to write from one goroutine and read from
// another (SyncBuffer), a loopback address that refuses connections
// (ClosedAddr), a fake clock whose timers fire when the test moves it
// (Clock), optional figures compared within a tolerance (Figures), a
// transport that sends a bearer token (Bearer), what a helper fails with
// (Fails), and the conventions every test of a real part follows.
//
// A real program a test runs (prometheus, redis-server, chromium,
// grpcurl) is found by Binary, one way for all: an environment override,
// then names on PATH and fixed paths. Under -short Binary skips the test,
// saying what it skips; a missing program fails the test saying how to
// get it (make deps, the Debian package, the override), never skips it.
//
// Waits poll a condition rather than sleeping for a guessed time: a test
// that passes alone must pass on two busy cores beside every other package,
// so deadlines are generous and only bound how long a broken test hangs.
package testkit
