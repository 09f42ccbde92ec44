// Package childproc runs the real servers tests start (prometheus,
// redis-server) as child processes that die with the test binary, even when
// it dies without running its cleanups, and reaps them. Server holds one
// such server's process and output across stops and starts, Ports starts
// it on a free loopback port (another when the port was taken meanwhile)
// and Ready waits until it answers. StartTest and
// ServeTest run the test binary itself again as such a child, serving a
// fake (promfake, expofarm) while the parent measures; LogTail keeps the
// end of a child's output for failure messages.
package childproc
