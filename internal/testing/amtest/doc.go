// Package amtest runs a real Alertmanager for tests.
//
// Start finds the binary (ALERTMANAGER_BIN, then alertmanager or
// prometheus-alertmanager on PATH, then /usr/bin/prometheus-alertmanager;
// Debian's package: apt-get install -y prometheus-alertmanager), writes an
// alertmanager.yml with one webhook receiver into a t.TempDir — the URL
// given, a bearer token read from a credentials file
// (http_config.authorization.credentials_file), short group_wait and
// group_interval —, starts Alertmanager on a free 127.0.0.1 port with its
// --storage.path in the same directory and clustering off
// (--cluster.listen-address=""), and returns once /-/ready answers. A
// missing binary fails the test with an install hint; only -short skips
// it. The process is stopped by its pid when the test ends (SIGTERM,
// SIGKILL after a timeout), and its output is logged if the test failed.
//
// Point a Prometheus at URL (promtest.Options.Alertmanagers) to have it
// send its alerts there.
package amtest
