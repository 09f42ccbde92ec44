// Package childproc runs the real servers tests start (prometheus,
// redis-server) as child processes that die with the test binary, even when
// it dies without running its cleanups, and reaps them.
package childproc
